"""Quotient end-to-end benchmark: startup, filter throughput/latency, full cycle, memory.

    .venv/bin/python tests/bench/bench_extender.py [--quick] [--profile]

Not a pytest test (tests/bench/conftest.py keeps pytest out). What it does:

  a. generates the synthetic cluster of gen_cluster.py (5,000 nodes, 100
     ClusterQueues, 50,000 running pods), writes it as YAML and as JSON, and
     times read_snapshot + apply_documents into a fresh ClusterState for each;
  b. starts a server subprocess that loads the JSON snapshot exactly as
     `quotient serve` does (build_from_snapshot + create_app under uvicorn,
     same logging) and adds one pass-through route, POST /bench/echo, which only
     decodes the body with orjson and answers the filter result keys with every
     node name. One httpx client on one keep-alive connection alternates filter
     and echo requests with identical bodies (the wire format of
     filter-nodecache-true.request.json, all 5,000 NodeNames, a new pod with its
     own name and uid each time, queue ns-000/user-queue, cpu 100m): filter
     requests/s, echo requests/s, their ratio, and filter p50/p99 latency.
     Each filtered pod is then bound (untimed), as kube-scheduler would do right
     after, so reservations do not pile up (--filter-only leaves them unbound);
  c. runs filter -> prioritize (the nodes filter returned) -> bind for new
     pending pods, one after another, spread over all 100 LocalQueues, and
     reports pods/s (nodes that the simulated kube-scheduler sees as full by
     pod count are left out of NodeNames, as NodeResourcesFit would);
  d. reads VmRSS of the server process (its /proc/self/status) after loading;
  e. measures what recording decisions costs the filter path, in-process: the
     same filter bodies through filter (app.api.verbs) with the journal recording as
     `quotient serve` does (journal ring, metrics and decision-log listeners,
     INFO logging to a file) and with Books.record (app/scheduler/outcome.py) a no-op for filter's records,
     alternating blocks of each; the difference as a share of filter time.

Quota never runs out during the run: ClusterQueue cq-000 (the filter
benchmark's queue) gets 100x the quota it needs, and every other queue keeps 25%
slack over its running pods, far more than the cycle's pods of 100m each take.
Every filter answer is checked to be an admission that returns every on-demand
node; a run where that fails is reported as FAIL.

--quick uses 10,000 running pods instead of 50,000 and fewer requests (a smoke
run in about 30 s; its startup and memory figures are not the 50,000-pod ones).
--profile adds a cProfile of the filter path (in-process, no HTTP).
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import gen_cluster  # noqa: E402

WIRE_FILTER = Path("/work/shared/wire/filter-nodecache-true.request.json")
BENCH_QUEUE = "cq-000"
BENCH_NAMESPACE = "ns-000"
JSON = "application/json"

TARGETS = {
    "startup_yaml_s": 15.0,
    "startup_json_s": 15.0,
    "ratio": 0.70,
    "p99_ms": 5.0,
    "cycle_pods_s": 400.0,
    "rss_mib": 1024.0,
    "recording_pct": 5.0,
}


# ---------------------------------------------------------------- server side
def proc_status(pid: str | int = "self") -> dict[str, int]:
    """VmRSS / VmHWM in KiB from /proc/<pid>/status."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def serve(snapshot: str, port: int) -> None:
    """The server subprocess: `quotient serve --snapshot snapshot`, plus /bench routes."""
    import logging

    import uvicorn
    from fastapi import Request
    from fastapi.responses import Response

    from app.api.app import create_app
    from app.cli import build_from_snapshot

    # As app.cli.main does for `serve`.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    pauses: list[float] = []
    started: dict[int, float] = {}

    def gc_watch(phase: str, info: dict) -> None:
        if phase == "start":
            started[info["generation"]] = time.perf_counter()
        elif info["generation"] in started:
            pauses.append((info["generation"], time.perf_counter() - started.pop(info["generation"])))

    t0 = time.perf_counter()
    extender = build_from_snapshot(snapshot)
    load_s = time.perf_counter() - t0
    after_load = proc_status()
    app = create_app(extender, "")
    state = extender.state

    @app.post("/bench/echo")
    async def echo(request: Request) -> Response:
        body = orjson.loads(await request.body())
        return Response(orjson.dumps({"Nodes": None, "NodeNames": body.get("NodeNames"), "FailedNodes": {},
                                      "FailedAndUnresolvableNodes": {}, "Error": ""}), media_type=JSON)

    @app.get("/bench/_stats")
    async def stats() -> Response:
        gen2 = [p for g, p in pauses if g == 2]
        return Response(orjson.dumps({
            "load_seconds": load_s, "after_load": after_load, "now": proc_status(),
            "nodes": len(state.nodes), "pods": len(state.pods), "admitted": len(state.admitted),
            "reservations": len(state.reservations), "gc_collections": len(pauses),
            "gc_gen2": len(gen2), "gc_gen2_max_ms": max(gen2, default=0) * 1000,
            "gc_max_ms": max((p for _, p in pauses), default=0) * 1000,
            "gc_total_ms": sum(p for _, p in pauses) * 1000,
        }), media_type=JSON)

    @app.post("/bench/_gc-reset")
    async def gc_reset() -> Response:
        pauses.clear()
        return Response(b"{}", media_type=JSON)

    timings: dict[str, list[float]] = {}

    async def timed(scope, receive, send):
        """Server-side time per verb: from the request's arrival to the last byte of the answer."""
        if scope["type"] != "http" or scope["path"].startswith("/bench/_"):
            return await app(scope, receive, send)
        t0 = time.perf_counter()

        async def send_timed(message):
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                timings.setdefault(scope["path"], []).append(time.perf_counter() - t0)
        await app(scope, receive, send_timed)

    @app.get("/bench/_server-times")
    async def server_times() -> Response:
        out = {path: {"n": len(v), "mean_ms": sum(v) / len(v) * 1000, "p50_ms": percentile(v, 50) * 1000,
                      "p99_ms": percentile(v, 99) * 1000} for path, v in timings.items() if v}
        timings.clear()
        return Response(orjson.dumps(out), media_type=JSON)

    gc.callbacks.append(gc_watch)
    uvicorn.run(timed, host="127.0.0.1", port=port, log_level="info", access_log=False)


# ---------------------------------------------------------------- client side
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def stats(lat: list[float]) -> dict:
    """Latencies in seconds -> p50, p99, max and mean in milliseconds, and the count."""
    return {"p50": percentile(lat, 50) * 1000, "p99": percentile(lat, 99) * 1000,
            "max": max(lat) * 1000, "mean": sum(lat) / len(lat) * 1000, "n": len(lat)}


def source_version() -> str:
    """The commit measured, and whether app/ had uncommitted changes (figures move with the code)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "app"], cwd=ROOT, capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "commit unknown"
    return f"commit {head or 'unknown'}" + (" + uncommitted changes in app/" if dirty else "")


def wire_pod(name: str, uid: str, namespace: str, created: str) -> dict:
    """The pod of filter-nodecache-true.request.json, renamed into a bench queue, cpu 100m."""
    if WIRE_FILTER.exists():
        pod = orjson.loads(WIRE_FILTER.read_bytes())["Pod"]
    else:  # the shared wire samples are not everywhere; same shape, trimmed
        pod = gen_cluster.make_pod(name, namespace, uid, created, None, cpu="100m", memory="64Mi")
        pod.pop("apiVersion"), pod.pop("kind")
    meta = pod["metadata"]
    meta.update(name=name, namespace=namespace, uid=uid, creationTimestamp=created)
    meta["labels"] = {**meta.get("labels", {}), gen_cluster.QUEUE_LABEL: gen_cluster.LOCAL_QUEUE}
    meta.pop("annotations", None)
    for c in pod["spec"]["containers"]:
        c["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    return pod


class Template:
    """A filter/prioritize body encoded once; each request splices in a pod name, uid and NodeNames."""

    NAME, UID, NODES = "bench-template-name", "bench-template-uid", "bench-template-nodes"

    def __init__(self, namespace: str):
        pod = wire_pod(self.NAME, self.UID, namespace, "2025-06-01T00:00:00Z")
        raw = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": self.NODES})
        raw = raw.replace(f'"{self.NAME}"'.encode(), b'"\0N').replace(f'"{self.UID}"'.encode(), b'"\0U')
        raw = raw.replace(f'"{self.NODES}"'.encode(), b"\0L")
        chunks = raw.split(b"\0")
        self.head = chunks[0]
        self.rest = [(c[:1], c[1:]) for c in chunks[1:]]
        assert sorted(k for k, _ in self.rest) == [b"L", b"N", b"U"], self.rest

    @staticmethod
    def ident(n: int, tag: str) -> tuple[str, str]:
        """Pod name and uid, distinct per (tag, n)."""
        return f"bench-{tag}-{n:06d}", f"{sum(map(ord, tag)) & 0xFFFFFFFF:08x}-0000-4000-8000-{n:012d}"

    def body(self, n: int, tag: str, names_json: bytes) -> tuple[bytes, str, str]:
        name, uid = self.ident(n, tag)
        fill = {b"N": name.encode() + b'"', b"U": uid.encode() + b'"', b"L": names_json}
        out = [self.head]
        for key, tail in self.rest:
            out += [fill[key], tail]
        return b"".join(out), name, uid


def timed_load(path: str) -> tuple[float, int, int, int]:
    from app.state.cluster import ClusterState
    from app.sync.snapshot import apply_documents, read_snapshot

    gc.collect()
    t0 = time.perf_counter()
    cluster, _ = read_snapshot(path)
    state = ClusterState()
    apply_documents(path, state, cluster)
    seconds = time.perf_counter() - t0
    counts = len(state.nodes), len(state.pods), len(state.admitted)
    del cluster, state
    gc.collect()
    return (seconds, *counts)


def start_server(snapshot: str, workdir: str, script: str = __file__) -> tuple[subprocess.Popen, int, str]:
    """`python script --serve snapshot --port P` in the background, its output in workdir/server.log."""
    port = free_port()
    log_path = os.path.join(workdir, "server.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, script, "--serve", snapshot, "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
    return proc, port, log_path


def wait_ready(client, proc: subprocess.Popen, log_path: str, timeout: float = 180.0, path: str = "/livez") -> None:
    """Until GET path answers 200 on client; exits with the server's log when it dies or never gets there."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}:\n{Path(log_path).read_text()[-3000:]}")
        try:
            if client.get(path).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit("server did not become ready")


def rotations(names: list[str], count: int = 16) -> list[bytes]:
    """The names in `count` different orders, as kube-scheduler offers them (its feasible list is
    filled by parallel workers, so its order changes from one pod to the next)."""
    step = max(1, len(names) // count)
    return [orjson.dumps(names[k * step:] + names[:k * step]) for k in range(count)]


def bench_filter(client, names: list[str], od_count: int, requests: int, warmup: int, bind: bool,
                 namespace: str = BENCH_NAMESPACE, tag: str = "") -> dict:
    """Alternate filter and echo requests with the same body shape; time each round trip.

    With bind, each filtered pod is then bound (untimed) to one of the nodes filter returned,
    as kube-scheduler would right after, so reservations do not pile up in a way no real
    scheduler produces; without it, every filtered pod keeps its reservation for the timeout."""
    template = Template(namespace)
    orders = rotations(names)
    lat = {"filter": [], "echo": []}
    bad: list[str] = []
    for i in range(warmup + requests):
        for verb in (("filter", "echo") if i % 2 == 0 else ("echo", "filter")):
            body, name, uid = template.body(i, tag + ("f" if verb == "filter" else "e"), orders[i % len(orders)])
            path = "/filter" if verb == "filter" else "/bench/echo"
            t0 = time.perf_counter()
            r = client.post(path, content=body, headers={"content-type": JSON})
            dt = time.perf_counter() - t0
            if i >= warmup:
                lat[verb].append(dt)
            if verb != "filter":
                continue
            ans = orjson.loads(r.content) if r.status_code == 200 else {}
            passing = ans.get("NodeNames") or []
            if r.status_code != 200 or ans.get("Error") or len(passing) != od_count:
                bad.append(f"{name}: HTTP {r.status_code}, {len(passing)} nodes, {r.text[:200]}")
            elif bind:
                r = client.post("/bind", content=orjson.dumps({
                    "PodName": name, "PodNamespace": namespace, "PodUID": uid,
                    "Node": passing[i % len(passing)]}), headers={"content-type": JSON})
                if r.status_code != 200 or orjson.loads(r.content).get("Error"):
                    bad.append(f"bind {name}: HTTP {r.status_code} {r.text[:200]}")
    out = {"bad": bad}
    for verb, values in lat.items():
        out[f"{verb}_rps"] = len(values) / sum(values)
        out[f"{verb}_p50_ms"] = percentile(values, 50) * 1000
        out[f"{verb}_p99_ms"] = percentile(values, 99) * 1000
        out[f"{verb}_max_ms"] = max(values) * 1000
    out["ratio"] = out["filter_rps"] / out["echo_rps"]
    return out


def bench_cycle(client, names: list[str], pods_per_node: dict[str, int], node_pods: int, queues: int,
                count: int, budget_s: float) -> dict:
    """filter -> prioritize -> bind for `count` new pods, one after another (stops after budget_s seconds)."""
    from operator import itemgetter

    templates = [Template(gen_cluster.namespace_name(q)) for q in range(queues)]
    full: set[str] = {n for n, c in pods_per_node.items() if c >= node_pods}
    offered = [n for n in names if n not in full]
    orders = rotations(offered)
    bad: list[str] = []
    phases = {"filter": 0.0, "prioritize": 0.0, "bind": 0.0}
    score = itemgetter("Score")
    t_start = time.perf_counter()
    done = 0
    for i in range(count):
        if time.perf_counter() - t_start > budget_s:
            break
        q = i % queues
        namespace = gen_cluster.namespace_name(q)
        body, name, uid = templates[q].body(i, "c", orders[i % len(orders)])
        t0 = time.perf_counter()
        r = client.post("/filter", content=body, headers={"content-type": JSON})
        t1 = time.perf_counter()
        ans = orjson.loads(r.content)
        passing = ans.get("NodeNames") or []
        if r.status_code != 200 or not passing:
            bad.append(f"filter {name}: HTTP {r.status_code} {r.text[:200]}")
            continue
        body = templates[q].body(i, "c", orjson.dumps(passing))[0]
        t2 = time.perf_counter()
        r = client.post("/prioritize", content=body, headers={"content-type": JSON})
        t3 = time.perf_counter()
        best = max(orjson.loads(r.content), key=score)["Host"]    # the first highest score
        body = orjson.dumps({"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": best})
        t4 = time.perf_counter()
        r = client.post("/bind", content=body, headers={"content-type": JSON})
        t5 = time.perf_counter()
        if r.status_code != 200 or orjson.loads(r.content).get("Error"):
            bad.append(f"bind {name} -> {best}: HTTP {r.status_code} {r.text[:200]}")
        phases["filter"] += t1 - t0
        phases["prioritize"] += t3 - t2
        phases["bind"] += t5 - t4
        done += 1
        pods_per_node[best] = pods_per_node.get(best, 0) + 1
        if pods_per_node[best] >= node_pods:     # NodeResourcesFit would drop it from now on
            full.add(best)
            offered = [n for n in offered if n != best]
            orders = rotations(offered)
    wall = time.perf_counter() - t_start
    return {"pods_s": done / wall, "wall_s": wall, "done": done, "bad": bad,
            **{f"{k}_ms": v / max(1, done) * 1000 for k, v in phases.items()},
            "client_ms": (wall - sum(phases.values())) / max(1, done) * 1000}


def profile_filter(snapshot: str, names: list[str], calls: int) -> str:
    """cProfile of filter (app.api.verbs) in-process (no HTTP) on new pods of the bench queue, each bound after."""
    import asyncio

    from app.cli import build_from_snapshot

    from app.api.verbs import Verbs

    extender = Verbs(build_from_snapshot(snapshot))
    template = Template(BENCH_NAMESPACE)
    names_json = orjson.dumps(names)
    prof = cProfile.Profile()
    spent = 0.0

    async def run() -> None:
        nonlocal spent
        for i in range(calls + 20):
            body, name, uid = template.body(i, "x", names_json)
            if i >= 20:
                prof.enable()
            t0 = time.perf_counter()
            answer = extender.filter(body)
            if i >= 20:
                spent += time.perf_counter() - t0
            prof.disable()
            passing = orjson.loads(answer)["NodeNames"]
            await extender.bind(orjson.dumps({"PodName": name, "PodNamespace": BENCH_NAMESPACE, "PodUID": uid,
                                              "Node": passing[i % len(passing)]}))

    asyncio.run(run())
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    body = "\n".join(line for line in text.getvalue().splitlines() if line.strip())
    return f"filter in-process under cProfile: {spent / calls * 1000:.3f} ms/call over {calls} calls\n{body}"


def recording_cost(snapshot: str, names: list[str], calls: int, workdir: str) -> dict:
    """filter (app.api.verbs) in-process with its decisions recorded (journal, metrics, decision log) vs not.

    Both modes run the same kind of body (a new pod of the bench queue with all NodeNames,
    bound after, untimed) in short blocks, paired and alternating which mode goes first,
    so drift (caches, the journal and the state growing) falls on both alike. In the no-op
    mode Books.record does nothing for filter's decisions; bind records in both modes,
    its cost being on the bind path. The cost is the median over pairs of (recording -
    no-op) block means, as a share of the median recording block mean. Time is the
    thread's CPU time (time.thread_time), so a burst of load from another process on the
    machine does not land on one block as waiting time."""
    import asyncio
    import logging
    import statistics

    from app.api.app import create_app
    from app.api.verbs import Verbs
    from app.cli import build_from_snapshot
    from app.journal import FilterRecord
    from app.observe.logs import setup_logging

    scheduler = build_from_snapshot(snapshot)
    create_app(scheduler, "")          # attaches the listeners `quotient serve` has: metrics, decision log
    extender = Verbs(scheduler)
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    log_file = open(os.path.join(workdir, "recording.log"), "w")
    setup_logging("text", "info", stream=log_file)
    template = Template(BENCH_NAMESPACE)
    names_json = orjson.dumps(names)
    block, pairs = 20, max(10, calls // 20)
    books = scheduler.books
    record = books.record

    def no_op(decided) -> None:
        if not isinstance(decided, FilterRecord):
            record(decided)
    means: dict[str, list[float]] = {"recording": [], "no-op": []}
    counter = iter(range(10**9))

    async def run_block(mode: str) -> float:
        if mode == "no-op":
            books.record = no_op          # the bench only: an instance attribute shadows the method
        elif "record" in vars(books):
            del books.record
        spent = 0.0
        for _ in range(block):
            i = next(counter)
            body, name, uid = template.body(i, "r", names_json)
            t0 = time.thread_time()
            answer = extender.filter(body)
            spent += time.thread_time() - t0
            passing = orjson.loads(answer)["NodeNames"]
            await extender.bind(orjson.dumps({"PodName": name, "PodNamespace": BENCH_NAMESPACE, "PodUID": uid,
                                              "Node": passing[i % len(passing)]}))
        return spent / block

    async def run() -> None:
        for p in range(pairs + 2):
            order = ("recording", "no-op") if p % 2 == 0 else ("no-op", "recording")
            got = {mode: await run_block(mode) for mode in order}
            if p >= 2:                        # the first two pairs warm up
                for mode, mean in got.items():
                    means[mode].append(mean)

    try:
        asyncio.run(run())
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        log_file.close()
    on = statistics.median(means["recording"])
    off = statistics.median(means["no-op"])
    diff = statistics.median(r - n for r, n in zip(means["recording"], means["no-op"]))
    return {"recording_ms": on * 1000, "noop_ms": off * 1000, "diff_us": diff * 1e6,
            "calls": len(means["recording"]) * block, "pct": diff / on * 100}


def row(label: str, value: str, target: str, ok: bool | None) -> str:
    verdict = "" if ok is None else ("PASS" if ok else "FAIL")
    return f"  {label:<44} {value:>8}   {target:<12} {verdict}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller cluster, fewer requests (~30 s)")
    ap.add_argument("--requests", type=int, help="filter and echo requests each (default 2000, quick 300)")
    ap.add_argument("--cycle", type=int, help="pods through filter+prioritize+bind (default 1000, quick 200)")
    ap.add_argument("--filter-only", action="store_true",
                    help="in b, leave filtered pods unbound (their reservations pile up until the timeout)")
    ap.add_argument("--profile", action="store_true", help="also cProfile the filter path in-process")
    ap.add_argument("--keep", metavar="DIR", help="write snapshots and the server log here and keep them")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve:
        serve(a.serve, a.port)
        return 0

    import httpx

    quick = a.quick
    pods = 10_000 if quick else 50_000
    requests = a.requests or (300 if quick else 2000)
    warmup = 30 if quick else 100
    cycle = a.cycle or (200 if quick else 1000)
    params = gen_cluster.Params(pods=pods, generous=(BENCH_QUEUE,), plain_queue=True)
    t_all = time.perf_counter()
    print(f"Quotient benchmark ({'quick' if quick else 'full'}): {params.nodes} nodes, {params.queues} "
          f"ClusterQueues in {params.cohorts} cohorts, {pods} running pods; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs", flush=True)

    workdir_obj = None if a.keep else tempfile.TemporaryDirectory(prefix="quotient-bench-")
    workdir = a.keep or workdir_obj.name
    os.makedirs(workdir, exist_ok=True)
    t0 = time.perf_counter()
    docs = gen_cluster.generate(params)
    yaml_path = gen_cluster.write(docs, os.path.join(workdir, "cluster.yaml"), "yaml")
    json_path = gen_cluster.write(docs, os.path.join(workdir, "cluster.json"), "json")
    node_docs = [d for d in docs if d["kind"] == "Node"]
    names = [d["metadata"]["name"] for d in node_docs]
    od_count = sum(1 for d in node_docs if d["metadata"]["labels"]["instance-type"] == "on-demand")
    pods_per_node: dict[str, int] = {}
    for d in docs:
        if d["kind"] == "Pod":
            n = d["spec"]["nodeName"]
            pods_per_node[n] = pods_per_node.get(n, 0) + 1
    del docs
    gc.collect()
    print(f"generated and wrote snapshots in {time.perf_counter() - t0:.1f} s "
          f"(YAML {os.path.getsize(yaml_path) / 2**20:.1f} MiB, JSON {os.path.getsize(json_path) / 2**20:.1f} MiB)",
          flush=True)

    # a. startup
    yaml_s, n_nodes, n_pods, n_adm = timed_load(yaml_path)
    print(f"a. startup from YAML: {yaml_s:.2f} s ({n_nodes} nodes, {n_pods} pods, {n_adm} admitted charges)",
          flush=True)
    json_s, n_nodes, n_pods, n_adm = timed_load(json_path)
    print(f"a. startup from JSON: {json_s:.2f} s ({n_nodes} nodes, {n_pods} pods, {n_adm} admitted charges)",
          flush=True)
    loads_ok = n_pods == pods and n_adm == pods and n_nodes == params.nodes

    proc, port, log_path = start_server(json_path, workdir)
    results: dict = {}
    try:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60.0) as client:
            wait_ready(client, proc, log_path)
            st = client.get("/bench/_stats").json()
            rss_mib = st["after_load"].get("VmRSS", 0) / 1024
            print(f"d. server loaded the JSON snapshot in {st['load_seconds']:.2f} s; VmRSS {rss_mib:.0f} MiB "
                  f"({st['pods']} pods, {st['admitted']} admitted)", flush=True)
            client.post("/bench/_gc-reset")
            client.get("/bench/_server-times")    # clears them

            # b. filter vs pass-through
            fb = bench_filter(client, names, od_count, requests, warmup, bind=not a.filter_only)
            st_b = client.get("/bench/_stats").json()
            print(f"b. filter: {fb['filter_rps']:.0f} req/s, p50 {fb['filter_p50_ms']:.2f} ms, "
                  f"p99 {fb['filter_p99_ms']:.2f} ms, max {fb['filter_max_ms']:.1f} ms "
                  f"({requests} requests, {len(names)} NodeNames, {od_count} nodes returned; "
                  f"{'pods left unbound' if a.filter_only else 'each pod then bound, untimed'})", flush=True)
            print(f"b. echo:   {fb['echo_rps']:.0f} req/s, p50 {fb['echo_p50_ms']:.2f} ms, "
                  f"p99 {fb['echo_p99_ms']:.2f} ms, max {fb['echo_max_ms']:.1f} ms; ratio filter/echo "
                  f"{fb['ratio']:.2f}", flush=True)
            print(f"   server GC during b: {st_b['gc_collections']} collections, {st_b['gc_gen2']} full, "
                  f"longest full {st_b['gc_gen2_max_ms']:.0f} ms, {st_b['gc_total_ms']:.0f} ms in all; "
                  f"{st_b['reservations']} reservations held", flush=True)
            srv_b = client.get("/bench/_server-times").json()
            for path in ("/filter", "/bench/echo"):
                t = srv_b.get(path, {})
                print(f"   server-side {path}: mean {t.get('mean_ms', 0):.2f} ms, p50 {t.get('p50_ms', 0):.2f} ms, "
                      f"p99 {t.get('p99_ms', 0):.2f} ms", flush=True)
            for line in fb["bad"][:5]:
                print(f"   bad filter answer: {line}")
            # b'. the same against ClusterQueue cq-plain, whose flavor has no nodeLabels: quota only,
            # no node of the 5,000 to check against a flavor.
            fp = bench_filter(client, names, len(names), requests, warmup, bind=not a.filter_only,
                              namespace=f"ns-{gen_cluster.PLAIN}", tag="p")
            print(f"b'. filter, flavor without nodeLabels: {fp['filter_rps']:.0f} req/s, p50 "
                  f"{fp['filter_p50_ms']:.2f} ms, p99 {fp['filter_p99_ms']:.2f} ms; echo {fp['echo_rps']:.0f} req/s; "
                  f"ratio {fp['ratio']:.2f}", flush=True)
            for line in fp["bad"][:5]:
                print(f"   bad filter answer: {line}")
            client.get("/bench/_server-times")
            client.post("/bench/_gc-reset")

            # c. full cycle
            cy = bench_cycle(client, names, pods_per_node, params.node_pods, params.queues, cycle,
                             budget_s=10 if quick else 60)
            st_c = client.get("/bench/_stats").json()
            stopped = "" if cy["done"] == cycle else f" (time budget reached; {cycle} asked)"
            print(f"c. full cycle: {cy['pods_s']:.0f} pods/s ({cy['done']} pods in {cy['wall_s']:.2f} s{stopped}; "
                  f"per pod round trips: filter {cy['filter_ms']:.2f} ms, prioritize {cy['prioritize_ms']:.2f} ms, "
                  f"bind {cy['bind_ms']:.2f} ms; the client's own work {cy['client_ms']:.2f} ms)", flush=True)
            print(f"   server GC during c: {st_c['gc_collections']} collections, {st_c['gc_gen2']} full, "
                  f"longest full {st_c['gc_gen2_max_ms']:.0f} ms, {st_c['gc_total_ms']:.0f} ms in all; "
                  f"state now {st_c['pods']} pods, {st_c['admitted']} admitted", flush=True)
            srv_c = client.get("/bench/_server-times").json()
            print("   server-side per pod: " + ", ".join(
                f"{path.strip('/')} {t['mean_ms']:.2f} ms (p99 {t['p99_ms']:.2f})" for path, t in srv_c.items()),
                flush=True)
            server_cycle_ms = sum(srv_c.get(p, {}).get("mean_ms", 0) for p in ("/filter", "/prioritize", "/bind"))
            cy["server_pods_s"] = 1000 / server_cycle_ms if server_cycle_ms else 0
            print(f"   server time per cycle {server_cycle_ms:.2f} ms: the server alone could take "
                  f"{cy['server_pods_s']:.0f} pods/s; the one-connection Python client above is what "
                  "limits the end-to-end figure", flush=True)
            for line in cy["bad"][:5]:
                print(f"   bad cycle: {line}")
            print(f"d. server VmRSS at the end {st_c['now'].get('VmRSS', 0) / 1024:.0f} MiB, "
                  f"peak {st_c['now'].get('VmHWM', 0) / 1024:.0f} MiB", flush=True)
            results = {"fb": fb, "fp": fp, "cy": cy, "rss": rss_mib, "admitted_after": st_c["admitted"]}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

    rc = recording_cost(json_path, names, 2000 if quick else 6000, workdir)
    print(f"e. recording decisions on the filter path (in-process, medians of {rc['calls']} calls each): filter "
          f"{rc['recording_ms']:.3f} ms with the journal, metrics and decision log, {rc['noop_ms']:.3f} ms with "
          f"Books.record a no-op; recording costs {rc['diff_us']:.1f} us, {rc['pct']:.1f}% of filter time", flush=True)

    if a.profile:
        print()
        print(profile_filter(json_path, names, 300 if quick else 1000))

    fb, fp, cy = results["fb"], results["fp"], results["cy"]
    T = TARGETS
    scope = f"{pods // 1000}k pods" if quick else ""
    print()
    print(f"Summary ({'quick: ' + scope + ', not the 50k targets' if quick else 'full'}; "
          f"total {time.perf_counter() - t_all:.0f} s)")
    print(row("figure", "value", "target", None))
    rss = results["rss"]
    checks = [
        ("a. startup, YAML (s)", f"{yaml_s:.2f}", f"<= {T['startup_yaml_s']:.0f}",
         yaml_s <= T["startup_yaml_s"] and loads_ok),
        ("a. startup, JSON (s)", f"{json_s:.2f}", f"<= {T['startup_json_s']:.0f}",
         json_s <= T["startup_json_s"] and loads_ok),
        ("b. filter (req/s)", f"{fb['filter_rps']:.0f}", "", None),
        ("b. pass-through echo (req/s)", f"{fb['echo_rps']:.0f}", "", None),
        ("b. filter / echo ratio (flavor nodeLabels)", f"{fb['ratio']:.2f}", f">= {T['ratio']:.2f}",
         fb["ratio"] >= T["ratio"] and not fb["bad"]),
        ("b'. filter / echo ratio (no nodeLabels)", f"{fp['ratio']:.2f}", f">= {T['ratio']:.2f}",
         fp["ratio"] >= T["ratio"] and not fp["bad"]),
        ("b'. filter p99, no nodeLabels (ms)", f"{fp['filter_p99_ms']:.2f}", f"<= {T['p99_ms']:.0f}",
         fp["filter_p99_ms"] <= T["p99_ms"]),
        ("b. filter p50 (ms)", f"{fb['filter_p50_ms']:.2f}", "", None),
        ("b. filter p99 (ms)", f"{fb['filter_p99_ms']:.2f}", f"<= {T['p99_ms']:.0f}",
         fb["filter_p99_ms"] <= T["p99_ms"]),
        ("c. filter+prioritize+bind (pods/s)", f"{cy['pods_s']:.0f}", f">= {T['cycle_pods_s']:.0f}",
         cy["pods_s"] >= T["cycle_pods_s"] and not cy["bad"]),
        ("c. server capacity, same cycle (pods/s)", f"{cy['server_pods_s']:.0f}", f">= {T['cycle_pods_s']:.0f}",
         cy["server_pods_s"] >= T["cycle_pods_s"] and not cy["bad"]),
        ("d. server VmRSS after load (MiB)", f"{rss:.0f}", f"<= {T['rss_mib']:.0f}", rss <= T["rss_mib"]),
        ("e. recording cost on filter (% of filter)", f"{rc['pct']:.1f}", f"< {T['recording_pct']:.0f}",
         rc["pct"] < T["recording_pct"]),
    ]
    for label, value, target, ok in checks:
        print(row(label, value, target, ok))
    failed = [c[0] for c in checks if c[3] is False]
    print(f"\n{'all targets met' if not failed else 'FAILED: ' + '; '.join(failed)}")
    if workdir_obj is not None:
        workdir_obj.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
