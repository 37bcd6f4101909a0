"""Quotient web view benchmark: the /ui tree page on a big cluster, server-side.

    .venv/bin/python tests/bench/bench_ui.py [--quick] [--runs N] [--pods N] [--nodes N] [--pending N] ...

Target (the web view issue): the tree page (GET /ui) for 100 ClusterQueues and 50,000 running pods renders
in <= 200 ms server-side; the figure judged is its p99. Not a pytest test (tests/bench/conftest.py keeps
pytest out); tests/test_bench_ui_smoke.py runs it with --quick.

The cluster is gen_cluster.py's (5,000 nodes, 10 Cohorts of 10 ClusterQueues, 2 flavors x cpu/memory/pods,
50,000 running pods of 500m / 1Gi, bound and admitted), changed before loading so that the tree is one an
admin would look at:

  * hierarchical cohorts: cohort-00..03 get parent Cohort org-a, cohort-04..06 parent org-b (which has quota
    of its own, --parent-quota pods' worth per flavor); the rest stay roots;
  * the first ClusterQueue of each Cohort has 80% of its usage as nominal quota, so it borrows;
  * --pending pending pods (created after every running pod), --busy-pending of them in the busy queue
    (cq-000, a borrower), the rest round-robin over every queue;
  * --reservations of those pending pods are passed through filter (app.api.verbs) (queue heads first, every node
    offered), so they hold reservations (reserving, not bound) and the decisions journal has entries.

The snapshot is written as JSON and loaded with build_from_snapshot, as `quotient serve --snapshot` does;
create_app is the real application and every request goes through it with httpx.AsyncClient over
httpx.ASGITransport (in-process, no socket): the time is the server's (routing, view, render, response)
plus httpx's small client share. Each page gets a few warm-up requests, then --runs timed ones:

  a. GET /ui (the tree page): p50/p90/p99/max, the HTML size, and how many ClusterQueues it names;
  b. GET /debug/queues (its JSON twin, the same queues_view): p50/p99 and a/b;
  c. GET /ui/decisions: p50/p99, reported only;
  d. GET /ui/queues/cq-000 (decides up to 100 pending pods; --queue-runs, one warm-up): p50/p99, reported only;
  e. the tree page's parts in-process, no HTTP: queues_view, pages.tree (the bars), the Jinja2 render.

A tree page p99 over the target (or --profile) is profiled with cProfile. Exit 1 when the target is missed
or the tree page does not name every ClusterQueue. --quick: 100 ClusterQueues still, but 200 nodes, 2,000
running pods and few runs; a smoke run, not the 50k figures.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import bench_extender as be  # noqa: E402
import gen_cluster  # noqa: E402
from app.api.verbs import Verbs  # noqa: E402
from bench_gangs import GcCount  # noqa: E402
from bench_preemption import _quota  # noqa: E402

TARGET_MS = 200.0
BUSY = "cq-000"
BORROWER_SHARE = 0.8                         # a borrowing queue's nominal quota, as a share of its usage
PARENTS = {"org-a": range(0, 4), "org-b": range(4, 7)}      # parent Cohort -> indices of its child Cohorts
QUOTA_OF_ITS_OWN = "org-b"
CQ_ITEM = re.compile(r'<li class="node clusterqueue" data-kind="ClusterQueue" data-name="([^"]+)"')


@dataclass
class Result:
    """What a run measured, for main's summary and the smoke test."""
    figures: dict[str, dict] = field(default_factory=dict)
    tree_html: str = ""
    queues: list[str] = field(default_factory=list)
    named: list[str] = field(default_factory=list)
    reserved: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    app: object = None


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="200 nodes, 2,000 running pods, few runs")
    ap.add_argument("--runs", type=int, help="timed requests per page (default 30, quick 5)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--queue-runs", type=int, help=f"timed requests of /ui/queues/{BUSY}, which decides up to 100 "
                                                   "pending pods (default 10, quick 2; one warm-up)")
    ap.add_argument("--nodes", type=int, help="default 5,000 (quick 200)")
    ap.add_argument("--pods", type=int, help="running pods (default 50,000, quick 2,000)")
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--cohorts", type=int, default=10)
    ap.add_argument("--pending", type=int, help="pending pods (default 3,000, quick 300)")
    ap.add_argument("--busy-pending", type=int, help=f"of those, in {BUSY} (default 500, quick 30)")
    ap.add_argument("--reservations", type=int, help="pending pods filtered to a reservation (default 300, "
                                                     "quick 50)")
    ap.add_argument("--parent-quota", type=int, default=500, help=f"pods' worth of {QUOTA_OF_ITS_OWN}'s own quota")
    ap.add_argument("--profile", action="store_true", help="profile the tree page even when it passes")
    a = ap.parse_args(argv)
    quick = a.quick
    a.runs = a.runs or (5 if quick else 30)
    a.nodes = a.nodes or (200 if quick else 5000)
    a.pods = a.pods if a.pods is not None else (2000 if quick else 50_000)
    a.pending = a.pending if a.pending is not None else (300 if quick else 3000)
    a.busy_pending = min(a.pending, a.busy_pending if a.busy_pending is not None else (30 if quick else 500))
    a.queue_runs = a.queue_runs or (2 if quick else 10)
    a.reservations = a.reservations if a.reservations is not None else (50 if quick else 300)
    return a


# ---------------------------------------------------------------- the cluster
def build_docs(a: argparse.Namespace) -> tuple[list[dict], dict[str, list[dict]]]:
    """gen_cluster's snapshot with parent Cohorts, borrowing queues and pending pods; the pending pods by queue."""
    p = gen_cluster.Params(nodes=a.nodes, pods=a.pods, queues=a.queues, cohorts=a.cohorts)
    docs = gen_cluster.generate(p)
    used = gen_cluster.pods_per_queue(p)
    cohorts = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Cohort"}
    for parent, children in PARENTS.items():
        spec: dict = {}
        if parent == QUOTA_OF_ITS_OWN and a.parent_quota:
            spec["resourceGroups"] = [{"coveredResources": ["cpu", "memory", "pods"],
                                       "flavors": [{"name": f, "resources": _quota(a.parent_quota)}
                                                   for f in gen_cluster.FLAVORS]}]
        docs.insert(0, {"apiVersion": gen_cluster.KUEUE, "kind": "Cohort", "metadata": {"name": parent},
                        "spec": spec})
        for c in children:
            if gen_cluster.cohort_name(c) in cohorts:
                cohorts[gen_cluster.cohort_name(c)]["spec"]["parentName"] = parent
    borrowers: set[tuple[str, str]] = set()     # (cohort, its first ClusterQueue)
    for d in docs:
        if d["kind"] == "ClusterQueue" and d["spec"]["cohort"] not in {cohort for cohort, _ in borrowers}:
            name = d["metadata"]["name"]
            borrowers.add((d["spec"]["cohort"], name))
            for fq in d["spec"]["resourceGroups"][0]["flavors"]:
                fq["resources"] = _quota(max(1, int(used.get(name, {}).get(fq["name"], 0) * BORROWER_SHARE)))
    pending: dict[str, list[dict]] = {}
    start = a.pods * 0.5 + 60
    for k in range(a.pending):
        q = 0 if k < a.busy_pending else (k - a.busy_pending) % a.queues
        pod = gen_cluster.make_pod(f"pending-{k:05d}", gen_cluster.namespace_name(q),
                                   f"00000000-0000-4000-a000-{k:012d}", gen_cluster._time(start + k), None)
        pending.setdefault(gen_cluster.queue_name(q), []).append(pod)
        docs.append(pod)
    return docs, pending


def reserve(extender, pending: dict[str, list[dict]], count: int) -> int:
    """Filter `count` pending pods, queue heads first (round-robin over the queues), every node offered; the
    reservations there are afterwards."""
    # Reserving at full size takes longer than the default 30 s reservationTimeout: the first would expire.
    extender.state.config.reservation_timeout = 3600.0
    names = orjson.dumps(sorted(extender.state.nodes)).decode()
    rounds = max((len(v) for v in pending.values()), default=0)
    done, wire = 0, Verbs(extender)
    for r in range(rounds):
        for queue in sorted(pending):
            if done >= count:
                break
            if r < len(pending[queue]):
                sent = {k: v for k, v in pending[queue][r].items() if k not in ("apiVersion", "kind")}
                wire.filter(b'{"Pod":' + orjson.dumps(sent) + b',"Nodes":null,"NodeNames":'
                            + names.encode() + b"}")
                done += 1
    return len(extender.state.reservations)


# ---------------------------------------------------------------- the measurements
async def timed_gets(client, path: str, runs: int, warmup: int) -> tuple[dict, object]:
    """runs timed GETs of path after warmup untimed ones; stats in ms, the last response."""
    lat, response = [], None
    with GcCount() as gcs:
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            response = await client.get(path)
            dt = time.perf_counter() - t0
            if i >= warmup:
                lat.append(dt)
    s = be.stats(lat)
    s["p90"] = be.percentile(lat, 90) * 1000
    s["status"] = response.status_code
    s["bytes"] = len(response.content)
    s["gc"] = gcs.summary()
    return s, response


def parts(extender, runs: int) -> dict[str, dict]:
    """The tree page's three parts timed in-process: the view, the bars, the render."""
    from app.observe.views import queues_view
    from app.ui import pages

    env = pages.templates()
    template = env.get_template("tree.html")
    lat: dict[str, list[float]] = {"queues_view": [], "tree + bars": [], "render": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        view = queues_view(extender.state)
        t1 = time.perf_counter()
        roots = pages.tree(view)
        t2 = time.perf_counter()
        template.render(title="Quota tree", roots=roots, view=view)
        t3 = time.perf_counter()
        lat["queues_view"].append(t1 - t0)
        lat["tree + bars"].append(t2 - t1)
        lat["render"].append(t3 - t2)
    return {k: be.stats(v) for k, v in lat.items()}


PAGES = (("tree", "/ui"), ("json", "/debug/queues"), ("decisions", "/ui/decisions"), ("queue", f"/ui/queues/{BUSY}"))


def report(label: str, result: Result) -> str:
    """One page's printed line (b compares with a, so a is measured first)."""
    f = result.figures
    s = f[label]
    if label == "tree":
        return (f"a. GET /ui (tree page): p50 {s['p50']:.1f} ms, p90 {s['p90']:.1f} ms, p99 {s['p99']:.1f} ms, "
                f"max {s['max']:.1f} ms, mean {s['mean']:.1f} ms; HTML {s['bytes'] / 1024:.0f} KiB, status "
                f"{s['status']}; ClusterQueues on the page: {len(set(result.named) & set(result.queues))} of "
                f"{len(result.queues)}; {s['gc']}")
    if label == "json":
        t = f["tree"]
        return (f"b. GET /debug/queues (the JSON twin): p50 {s['p50']:.1f} ms, p99 {s['p99']:.1f} ms; "
                f"{s['bytes'] / 1024:.0f} KiB; tree page / JSON: p50 x{t['p50'] / s['p50']:.1f}, "
                f"p99 x{t['p99'] / s['p99']:.1f}")
    if label == "decisions":
        return (f"c. GET /ui/decisions: p50 {s['p50']:.1f} ms, p99 {s['p99']:.1f} ms; {s['bytes'] / 1024:.0f} KiB, "
                f"status {s['status']}")
    return (f"d. GET /ui/queues/{BUSY} (decides up to 100 pending pods; reported only): p50 {s['p50']:.1f} ms, "
            f"p99 {s['p99']:.1f} ms, max {s['max']:.1f} ms ({s['n']} runs after 1 warm-up); "
            f"{s['bytes'] / 1024:.0f} KiB, status {s['status']}; {s['gc']}")


async def measure(app, a: argparse.Namespace, result: Result) -> None:
    """Every page through the real application, each printed as soon as it is measured."""
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", trust_env=False) as client:
        for label, path in PAGES:
            runs, warmup = (a.queue_runs, 1) if label == "queue" else (a.runs, a.warmup)
            s, response = await timed_gets(client, path, runs, warmup)
            s["path"] = path
            result.figures[label] = s
            result.statuses[path] = response.status_code
            if label == "tree":
                result.tree_html = response.text
                result.named = CQ_ITEM.findall(result.tree_html)
            print(report(label, result), flush=True)


def profiled(app, runs: int, top: int = 25) -> str:
    """cProfile of `runs` tree page requests through the app, own and cumulative time per function."""
    import httpx

    async def go(prof: cProfile.Profile) -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1",
                                     trust_env=False) as client:
            await client.get("/ui")
            prof.enable()
            for _ in range(runs):
                await client.get("/ui")
            prof.disable()

    prof = cProfile.Profile()
    asyncio.run(go(prof))
    st = pstats.Stats(prof)
    total = st.total_tt or 1e-12
    rows = sorted(((tt, ct, nc, f"{func} ({os.path.basename(file)}:{line})")
                   for (file, line, func), (cc, nc, tt, ct, _) in st.stats.items()), reverse=True)
    cum = sorted(((ct, tt, nc, f"{func} ({os.path.basename(file)}:{line})")
                  for (file, line, func), (cc, nc, tt, ct, _) in st.stats.items()), reverse=True)
    out = [f"GET /ui x {runs} under cProfile ({total * 1000 / runs:.0f} ms a request profiled); by own time: "
           "own %, cumulative %, calls, function"]
    out += [f"  {tt / total * 100:6.1f} {ct / total * 100:6.1f}  {nc:>9}  {w}" for tt, ct, nc, w in rows[:top]]
    out.append("by cumulative time (cumulative %, own %, calls, function):")
    out += [f"  {ct / total * 100:6.1f} {tt / total * 100:6.1f}  {nc:>9}  {w}" for ct, tt, nc, w in cum[:top]]
    return "\n".join(out)


def run(a: argparse.Namespace) -> Result:
    """Build, load, measure and print; the figures and the tree page's HTML."""
    from app.api.app import create_app
    from app.cli import build_from_snapshot

    result = Result()
    print(f"Quotient web view benchmark ({'quick' if a.quick else 'full'}): {a.nodes} nodes, {a.queues} "
          f"ClusterQueues in {a.cohorts} Cohorts (+{len(PARENTS)} parents), {a.pods} running pods, {a.pending} "
          f"pending ({a.busy_pending} in {BUSY}), {a.reservations} to reserve; {a.runs} runs after {a.warmup} "
          f"warm-up; python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {be.source_version()}", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="quotient-bench-ui-") as workdir:
        docs, pending = build_docs(a)
        snapshot = gen_cluster.write(docs, os.path.join(workdir, "cluster.json"), "json")
        del docs
        gc.collect()
        extender = build_from_snapshot(snapshot)
    app = create_app(extender, "")
    state = extender.state
    result.reserved = reserve(extender, pending, a.reservations)
    result.queues = sorted(state.cluster_queues)
    borrowing = sum(1 for name in result.queues
                    if any(v > state.tree.queues[name].quotas[fr].nominal
                           for fr, v in state.tree.queues[name].usage.items() if fr in state.tree.queues[name].quotas))
    nested = sum(1 for c in state.tree.cohorts.values() if c.parent is not None)
    print(f"generated and loaded in {time.perf_counter() - t0:.1f} s: {len(state.nodes)} nodes, {len(state.pods)} "
          f"pods, {len(state.admitted)} admitted, {len(state.reservations)} reservations, "
          f"{len(state.tree.cohorts)} Cohorts ({nested} with a parent), {len(state.cluster_queues)} ClusterQueues "
          f"({borrowing} over their nominal quota), {len(extender.journal.entries)} journal entries", flush=True)
    outcomes = Counter(e.get("outcome") for e in extender.journal.entries if e.get("verb") == "filter")
    refused = Counter(str(e.get("reason"))[:100] for e in extender.journal.entries
                      if e.get("verb") == "filter" and e.get("outcome") != "Admitted")
    print("the reserving filters' outcomes: " + ", ".join(f"{k} {n}" for k, n in outcomes.most_common())
          + "".join(f"; {n} x {why!r}" for why, n in refused.most_common(3)), flush=True)

    asyncio.run(measure(app, a, result))
    f = result.figures
    split = parts(extender, a.runs)
    f["parts"] = split
    print("e. the tree page's parts in-process (no HTTP), p50 / p99: " + "; ".join(
        f"{k} {v['p50']:.1f} / {v['p99']:.1f} ms" for k, v in split.items()), flush=True)
    result.app = app
    return result


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    t_all, load_start = time.perf_counter(), os.getloadavg()[0]
    result = run(a)
    p99 = result.figures["tree"]["p99"]
    whole = set(result.queues) <= set(result.named) and result.statuses.get("/ui") == 200
    passed = p99 <= TARGET_MS
    if a.profile or not passed:
        print()
        print(profiled(result.app, max(3, min(a.runs, 10))))
    print()
    scope = f"quick: {a.pods} running pods, not the 50k cluster" if a.quick else "full"
    print(f"Summary ({scope}; total {time.perf_counter() - t_all:.0f} s; load average {load_start:.2f} at the "
          f"start, {os.getloadavg()[0]:.2f} at the end)")
    print(be.row("tree page GET /ui p50 (ms)", f"{result.figures['tree']['p50']:.1f}", "", None))
    print(be.row("tree page GET /ui p99 (ms)", f"{p99:.1f}", f"<= {TARGET_MS:.0f}", passed))
    print(be.row("every ClusterQueue on the tree page", "yes" if whole else "no", "yes", whole))
    print(f"\n{'PASS' if passed else 'FAIL'}: tree page p99 {p99:.1f} ms against the {TARGET_MS:.0f} ms target "
          f"({len(result.queues)} ClusterQueues, {a.pods} running pods{', quick' if a.quick else ''})")
    return 0 if passed and whole else 1


if __name__ == "__main__":
    sys.exit(main())
