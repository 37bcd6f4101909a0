"""Soak: does Quotient's memory stay flat over many reconcile cycles on a steady live cluster? (issue 16, point 12)

    .venv/bin/python tests/bench/bench_soak.py [--quick] [--cycles N] [--rich] [--filter-every N] [--no-trace]

Not a pytest test (tests/bench/conftest.py keeps pytest out); tests/test_soak_memory.py is its regression
test. Two processes, so that the fake API's own bookkeeping (it records every request) is not counted:

  * tests/fakeapi.py's FakeApiServer, in its own process, seeded with a steady cluster: 20 nodes,
    4 ClusterQueues in cohort `pool` (cq-0 may preempt lower priorities and reclaim within the cohort),
    75 running pods per queue using its whole nominal quota, and 3 pending pods per queue of a lower
    priority, over quota, so filter refuses them (QuotaExceeded; cq-0's head also gets a preemption
    search that finds nothing to preempt, every reconcile);
  * this process: Quotient live as `quotient serve --kubeconfig` wires it (app/cli.py serve_live): a
    WatchSource and a KubeWriter on one kubernetes_asyncio ApiClient, a Scheduler with the metrics, the
    decision log and the counting writer attached (app.observe.attach), on a clock that advances by
    the reconcile interval (5 s) per cycle, so the rate-limited ClusterQueue status writes happen
    every other cycle as they would in real time.

--rich makes the steady cluster busier (cluster_docs): an eviction a PodDisruptionBudget refuses, retried for
ever, an incomplete pod group, Jobs, waitForPodsReady and fair sharing. There the preemption starts again each
time its hold expires (holdTimeout 60 s: every 12 cycles) and each start is journaled (a new hold, evictions
issued again, an INFO log line): about 140 B a cycle until the journal's ring is full (12,000 cycles), then flat.

One cycle = what the background loops of app/api/app.py do in one reconcile interval: extender.reconcile()
and extender.note_cleared() (--looks per cycle), plus a Prometheus scrape (Metrics.render) every 3 cycles. The
pending pods are filtered once, before the warm-up (their refusals booked); kube-scheduler then leaves them
parked (--filter-every N filters them again every N cycles: each such request is recorded in the journal,
by design, until its ring of 1,000 entries is full). Nothing in the cluster changes, but the status
writes come back through the watch as ClusterQueue MODIFIED events.

Figures: tracemalloc runs from the start (so a bounded ring that turns over counts as no growth); after
--warmup cycles, RSS and traced memory, then the same five times over --cycles cycles (the curve), growth
per cycle in bytes (traced, and RSS, which includes tracemalloc's own tables: --no-trace for RSS alone),
the sizes of the structures that could grow, and the allocation sites that grew most between the first
and the last snapshot (by line). PASS when the growth per cycle is below --limit bytes (default 64: noise,
not a leak). Talks only to 127.0.0.1; the full run takes about two minutes, --quick about 20 s.

Before the fix (issue 16, point 12) every reconcile journaled the same "reclaim NoPreemption" decision
again for each ClusterQueue head that may preempt but finds no victim: about 0.5 KB a cycle, until the
journal's ring (1,000 entries) was full, all of it copies.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_extender import proc_status, source_version  # noqa: E402
from serving import stop_process  # noqa: E402

QUEUES = 4
NODES = 20
RUNNING_PER_QUEUE = 75
PENDING_PER_QUEUE = 3
TICK = 5.0                 # seconds of the clock per cycle: the default reconcileInterval
SCRAPE_EVERY = 3           # cycles between two /metrics renders (a 15 s scrape)


# ---------------------------------------------------------------- the cluster
def cluster_docs(rich: bool = False) -> tuple[list[dict], list[dict], list[str]]:
    """(every object, the pending pods kube-scheduler filters, the node names): a steady cluster where quota is
    all used. rich adds what keeps a reconcile busy without changing the cluster: a preemptor in cq-1 whose
    victims a PodDisruptionBudget protects (every eviction is refused, 429, and retried after act/'s
    backoff; the hold expires and the reclaim starts again), an incomplete pod group in cq-2, ownerReferences
    (Jobs) and Ready conditions on the running pods (waitForPodsReady and fair sharing are on: RICH_CONFIG)."""
    from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor

    nodes = [f"n{i:02d}" for i in range(NODES)]
    docs: list[dict] = [ResourceFlavor("default-flavor").obj(), Cohort("pool").obj()]
    docs += [Node(n).cpu("64").memory("256Gi").obj() for n in nodes]
    pending: list[dict] = []
    for q in range(QUEUES):
        ns, name = f"team-{q}", f"cq-{q}"
        queue = ClusterQueue(name).cohort("pool").resource_group(FlavorQuotas("default-flavor").resource("cpu", "60"))
        if q == 0:
            queue.preemption({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"})
        elif rich and q == 1:
            queue.preemption({"withinClusterQueue": "LowerPriority"})
        docs += [Namespace(ns).obj(), queue.obj(), LocalQueue("lq", ns).cluster_queue(name).obj()]
        for i in range(RUNNING_PER_QUEUE):      # 75 x 800m = 60 cpu: the queue's whole nominal quota
            running = (Pod(f"run-{i:03d}", ns).queue("lq").cpu("800m").priority(100).created(i)
                       .node(nodes[(q * RUNNING_PER_QUEUE + i) % NODES]))
            if rich:
                running.label("app", "run").owner("Job", f"job-{i % 5}", f"job-{ns}-{i % 5}").ready()
            docs.append(running.obj())
        for i in range(PENDING_PER_QUEUE):      # lower priority: no victim for them, over quota
            pending.append(Pod(f"wait-{i}", ns).queue("lq").cpu("1").priority(0).created(1000 + i).obj())
    if rich:
        docs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "keep-all", "namespace": "team-1"},
                     "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": "run"}}}})
        pending.append(Pod("boss", "team-1").queue("lq").cpu("1").priority(1000).created(2000).obj())
        pending += [Pod(f"gang-{i}", "team-2").queue("lq").cpu("2").priority(0).created(3000 + i)
                    .label("kueue.x-k8s.io/pod-group-name", "gang")
                    .annotation("kueue.x-k8s.io/pod-group-total-count", "3").obj() for i in range(3)]
    return docs + pending, pending, nodes


RICH_CONFIG = {"waitForPodsReady": {"enable": True, "timeout": "5m"}, "fairSharing": {"enable": True}}


# ---------------------------------------------------------------- the fake API process
def run_fake_api(docs_path: str, workdir: str) -> None:
    """FakeApiServer seeded from docs_path; prints its kubeconfig path when ready. Its request log is
    cleared every second (the fake's bookkeeping, not the API server's)."""
    from fakeapi import FakeApiServer

    async def main() -> None:
        api = await FakeApiServer(bookmark_interval=5.0, history=1000).start()
        for obj in orjson.loads(Path(docs_path).read_bytes()):
            api.apply(obj)
        print(orjson.dumps({"kubeconfig": api.kubeconfig_path(workdir)}).decode(), flush=True)
        parent = os.getppid()
        while os.getppid() == parent:
            api.requests.clear()
            api.writes.clear()
            api.write_times.clear()
            await asyncio.sleep(1.0)

    asyncio.run(main())


# ---------------------------------------------------------------- Quotient, live, in this process
class VirtualClock:
    """Quotient's clock: now, then advanced by hand, one reconcile interval per cycle."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def rss_kib() -> int:
    return proc_status().get("VmRSS", 0)


def traced() -> int:
    return tracemalloc.get_traced_memory()[0]


def growth_sites(before, after, top: int) -> list[str]:
    """The allocation sites (file:line) whose traced size grew most between two snapshots."""
    keep = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
            tracemalloc.Filter(False, "<unknown>")]
    diff = before.filter_traces(keep), after.filter_traces(keep)
    stats = [s for s in diff[1].compare_to(diff[0], "lineno") if s.size_diff > 0]
    out = []
    for s in stats[:top]:
        frame = s.traceback[0]
        where = frame.filename.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "<venv>/")
        out.append(f"  {s.size_diff:+9,d} B {s.count_diff:+6,d} blocks  {where}:{frame.lineno}")
    return out


async def soak(kubeconfig: str, pending: list[dict], nodes: list[str], args) -> dict:
    from app.act.kube import KubeWriter
    from app.config import Configuration, decode_configuration
    from app.api.verbs import Verbs
    from app.scheduler.scheduler import Scheduler
    from app.observe import attach
    from app.state.cluster import ClusterState
    from app.sync.apiserver import make_api_client
    from app.sync.watch import WatchSource

    if not args.no_trace:
        tracemalloc.start(args.frames)       # from the start: a ring (the journal) turning over is no growth
    logging.getLogger("quotient.act").setLevel(logging.ERROR)    # --rich: a refused eviction per retry
    clock = VirtualClock()
    client = await make_api_client(kubeconfig)
    config = decode_configuration(RICH_CONFIG) if args.rich else Configuration()
    state = ClusterState(config, clock=clock)
    extender = Scheduler(state, KubeWriter(client, state))
    observers = attach(extender)
    source = WatchSource(client, state, metrics=observers.metrics)
    task = source.start()
    out: dict = {}
    try:
        deadline = time.monotonic() + 30
        while not source.health.ready:
            if time.monotonic() > deadline:
                raise SystemExit("the watch did not list the cluster within 30 s")
            await asyncio.sleep(0.02)
        bodies = [orjson.dumps({"Pod": {k: p[k] for k in ("metadata", "spec")}, "Nodes": None, "NodeNames": nodes})
                  for p in pending]

        wire = Verbs(extender)

        def refuse_all() -> list[bytes]:
            return [b'"NodeNames":[]' in wire.filter(b) and b for b in bodies]

        out["refused"] = sum(1 for b in refuse_all() if b)
        cycle_no = 0

        async def cycles(n: int) -> None:
            nonlocal cycle_no
            for _ in range(n):
                cycle_no += 1
                clock.now += args.tick
                await extender.reconcile()
                for _ in range(args.looks):
                    extender.note_cleared()
                if args.scrape_every and cycle_no % args.scrape_every == 0:
                    observers.metrics.render()
                if args.filter_every and cycle_no % args.filter_every == 0:
                    refuse_all()
                await asyncio.sleep(0)          # the watch applies the status writes' MODIFIED events
            await asyncio.sleep(0.05)

        t0 = time.perf_counter()
        await cycles(args.warmup)
        out["warmup_s"] = time.perf_counter() - t0
        snap0 = tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None      # before RSS: it takes room
        gc.collect()
        out["rss0"], out["traced0"], out["journal0"] = rss_kib(), traced(), len(extender.journal.entries)
        out["curve"] = []                   # (cycles measured, traced bytes, RSS KiB, journal entries)
        t0 = time.perf_counter()
        step = max(1, args.cycles // 5)
        for done in range(0, args.cycles, step):
            await cycles(min(step, args.cycles - done))
            gc.collect()
            out["curve"].append((min(done + step, args.cycles), traced(), rss_kib(), len(extender.journal.entries)))
        out["soak_s"] = time.perf_counter() - t0
        out["rss1"], out["traced1"] = rss_kib(), traced()
        snap1 = tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None
        out["sites"] = growth_sites(snap0, snap1, args.top) if tracemalloc.is_tracing() else []
        out["tracemalloc_kib"] = tracemalloc.get_tracemalloc_memory() // 1024
        tracemalloc.stop()
        out["sizes"] = {"journal.entries": len(extender.journal.entries),
                        "journal.by_pod": len(extender.journal.by_pod),
                        "refusals": len(extender.refusals), "writer._announced": len(extender.writer._announced),
                        "actions.done": len(extender.actions.done), "actions.failed": len(extender.actions.failed),
                        "metrics.decision_counts": len(observers.metrics.decision_counts),
                        "state.pods": len(state.pods), "state.holds": len(state.holds),
                        "state.reservations": len(state.reservations)}
        out["writes_failed"] = dict(extender.writer.failures)
    finally:
        await source.stop()
        if not task.done():
            task.cancel()
        await client.close()
    return out


# ---------------------------------------------------------------- the driver
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="500 measured cycles instead of 3,000")
    ap.add_argument("--cycles", type=int, help="measured cycles (default 3000, 4 hours of reconciles; --quick 500)")
    ap.add_argument("--warmup", type=int, default=100, help="cycles before the first measure (default 100)")
    ap.add_argument("--looks", type=int, default=1, help="extender.note_cleared() calls per cycle (default 1)")
    ap.add_argument("--filter-every", type=int, default=0,
                    help="cycles between two filters of every pending pod, as kube-scheduler's retries (default 0: "
                         "never after the first; 60 is its 5-minute flush of parked pods, 2 its 10 s backoff)")
    ap.add_argument("--scrape-every", type=int, default=SCRAPE_EVERY,
                    help=f"cycles between two /metrics renders (default {SCRAPE_EVERY}; 0: never)")
    ap.add_argument("--tick", type=float, default=TICK, help=f"clock seconds per cycle (default {TICK:g})")
    ap.add_argument("--frames", type=int, default=1, help="tracemalloc frames kept per allocation (default 1)")
    ap.add_argument("--rich", action="store_true", help="a busier steady cluster (see cluster_docs)")
    ap.add_argument("--no-trace", action="store_true", help="RSS only, without tracemalloc (faster)")
    ap.add_argument("--top", type=int, default=12, help="allocation sites shown (default 12)")
    ap.add_argument("--limit", type=float, default=64.0, help="traced bytes per cycle for PASS (default 64)")
    ap.add_argument("--fake-api", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.fake_api:
        run_fake_api(a.fake_api, a.workdir)
        return 0
    if a.cycles is None:
        a.cycles = 500 if a.quick else 3000
    workdir = tempfile.mkdtemp(prefix="quotient-bench-soak-")
    docs, pending, nodes = cluster_docs(a.rich)
    docs_path = os.path.join(workdir, "cluster.json")
    Path(docs_path).write_bytes(orjson.dumps(docs))
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "127.0.0.1"
    log = open(os.path.join(workdir, "fakeapi.log"), "wb")
    fake = subprocess.Popen([sys.executable, __file__, "--fake-api", docs_path, "--workdir", workdir],
                            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, cwd=str(ROOT), env=env)
    try:
        ready = orjson.loads(fake.stdout.readline() or b"{}")
        if "kubeconfig" not in ready:
            raise SystemExit(f"the fake API did not start:\n{Path(workdir, 'fakeapi.log').read_text()[-3000:]}")
        print(f"Soak, live: fake API (own process) + WatchSource + KubeWriter + Scheduler; {source_version()}; "
              f"{NODES} nodes, {QUEUES} ClusterQueues in one cohort, {QUEUES * RUNNING_PER_QUEUE} running pods, "
              f"{len(pending)} pending pods refused; a cycle = reconcile + {a.looks} look for cleared refusals, {a.tick:g} s of clock",
              flush=True)
        r = asyncio.run(soak(ready["kubeconfig"], pending, nodes, a))
    finally:
        stop_process(fake, 10)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
    per_cycle = (r["traced1"] - r["traced0"]) / a.cycles
    rss_per_cycle = (r["rss1"] - r["rss0"]) * 1024 / a.cycles
    print(f"  pending pods refused by filter: {r['refused']} of {len(pending)}; warm-up {a.warmup} cycles in "
          f"{r['warmup_s']:.1f} s; {a.cycles} cycles in {r['soak_s']:.1f} s"
          + ("" if a.no_trace else f" (tracemalloc on: slower; its own tables {r['tracemalloc_kib']:,} KiB, in RSS)"))
    traced_of = (lambda v: "-" if a.no_trace else f"{v / 1024:9.1f} KiB")
    print(f"  after warm-up      : RSS {r['rss0'] / 1024:7.1f} MiB   traced {traced_of(r['traced0'])}   "
          f"journal {r['journal0']} entries")
    for n, t, rss, j in r["curve"]:
        print(f"  after {n:>6} cycles : RSS {rss / 1024:7.1f} MiB   traced {traced_of(t)}   journal {j} entries")
    print(f"  growth per cycle   : traced {'-' if a.no_trace else f'{per_cycle:+.1f} B'}, RSS {rss_per_cycle:+.1f} B")
    print(f"  sizes: {', '.join(f'{k}={v}' for k, v in r['sizes'].items())}")
    if r["writes_failed"]:
        print(f"  writes failed: {r['writes_failed']}")
    if not a.no_trace:
        print("  top allocation sites that grew (tracemalloc, by line):")
        print("\n".join(r["sites"]) or "  (none)")
    growth = rss_per_cycle if a.no_trace else per_cycle
    ok = growth < a.limit and r["refused"] == len(pending)
    print(f"\n{'RSS' if a.no_trace else 'traced'} growth per cycle {growth:+.1f} B (limit {a.limit:g} B): "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
