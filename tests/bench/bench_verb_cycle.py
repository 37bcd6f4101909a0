"""The verb path's own cost, in one process: filter, bind and the bound pod's watch event, per pod.

Why: the live throughput benchmark (bench_throughput.py) measures the whole stack, where the machine's noise
(uvicorn, TLS, the fake API server, the Go client) is larger than a refactor's effect on Quotient's own code.
This drives the same cycle through the wire codec (api.verbs) and the scheduler on a SnapshotWriter, with no
sockets, and prints Python calls per pod (exact) and CPU per pod. With --baseline CHECKOUT it runs that
checkout's code the same way (PYTHONPATH), alternating, and prints the ratios of one invocation.

    .venv/bin/python tests/bench/bench_verb_cycle.py [--baseline /path/to/checkout] [--rounds 3]
"""
import argparse
import os
import statistics
import subprocess
from pathlib import Path
import asyncio
import copy
import sys
import time

import orjson
from app.config import Configuration
from app.state.cluster import ClusterState
from app.act.writer import SnapshotWriter
from app.sync.dispatch import apply_object


def make(state):
    """The verbs bytes in, bytes out: api.verbs over the scheduler (before issue 35: the Extender)."""
    try:
        from app.api.verbs import Verbs
        from app.scheduler.scheduler import Scheduler
        return Verbs(Scheduler(state, SnapshotWriter(state)))
    except ImportError:
        from app.extender import Extender
        return Extender(state, SnapshotWriter(state))


N, NODES = 600, 100
def node(i): return {"apiVersion":"v1","kind":"Node","metadata":{"name":f"n{i}","uid":f"nu{i}","labels":{}},"status":{"allocatable":{"cpu":"32","memory":"128Gi","pods":"110"}}}
objs = [node(i) for i in range(NODES)]
objs += [{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"default"}},
 {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu","memory"],"flavors":[{"name":"default","resources":[{"name":"cpu","nominalQuota":"10000"},{"name":"memory","nominalQuota":"100000Gi"}]}]}]}},
 {"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"spec":{"clusterQueue":"cq"}}]
def pod(i): return {"apiVersion":"v1","kind":"Pod","metadata":{"name":f"p{i}","namespace":"ns","uid":f"pu{i}","labels":{"kueue.x-k8s.io/queue-name":"lq"},"creationTimestamp":"2026-01-01T00:00:00Z","resourceVersion":str(i+10)},"spec":{"schedulerName":"default-scheduler","containers":[{"name":"c","resources":{"requests":{"cpu":"100m","memory":"100Mi"}}}]},"status":{"phase":"Pending"}}
async def main():
    state = ClusterState(Configuration())
    for o in objs: apply_object(state, o)
    pods = [pod(i) for i in range(N)]
    for p in pods: apply_object(state, p)
    v = make(state)
    names = [f"n{i}" for i in range(NODES)]
    calls = [0]
    def prof(frame, event, arg):
        if event == "call": calls[0] += 1
    async def cycle(p, count):
        if count: sys.setprofile(prof)
        out = v.filter(orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names}))
        ans = orjson.loads(out); node = ans["NodeNames"][0]
        await v.bind(orjson.dumps({"PodName": p["metadata"]["name"], "PodNamespace": "ns", "PodUID": p["metadata"]["uid"], "Node": node}))
        q = copy.deepcopy(p); q["spec"]["nodeName"] = node; q["metadata"]["resourceVersion"] = str(int(q["metadata"]["resourceVersion"]) + 100000)
        apply_object(state, q)
        if count: sys.setprofile(None)
    for p in pods[:50]: await cycle(p, False)
    await cycle(pods[50], True)
    t = time.process_time()
    for p in pods[51:]: await cycle(p, False)
    bound = sum(1 for x in state.pods.values() if x.node_name)
    print(orjson.dumps({"calls": calls[0], "cpu_us": round((time.process_time() - t) / (N - 51) * 1e6),
                        "bound": bound}).decode())


def run(root: str) -> dict:
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, __file__, "--one"], cwd=root, env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{root}: {out.stderr[-2000:]}")
    return orjson.loads(out.stdout.strip().splitlines()[-1])


def compare() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="a checkout of Quotient to compare with (its code, run the same way)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[2])
    trees = [("quotient", here)] + ([("baseline", args.baseline)] if args.baseline else [])
    seen: dict[str, list[dict]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, root in trees:
            r = run(root)
            seen[name].append(r)
            print(f"{name:9} python calls per pod {r['calls']:6d}  CPU {r['cpu_us']:5d} us per pod  "
                  f"({r['bound']}/{N} bound)", flush=True)
    if args.baseline:
        calls = seen["quotient"][0]["calls"] / seen["baseline"][0]["calls"]
        best = min(r["cpu_us"] for r in seen["quotient"]) / min(r["cpu_us"] for r in seen["baseline"])
        median = statistics.median(r["cpu_us"] for r in seen["quotient"]) / statistics.median(
            r["cpu_us"] for r in seen["baseline"])
        print(f"quotient / baseline: python calls {calls:.3f}, CPU per pod best {best:.2f}, median {median:.2f}")
    return 0


if __name__ == "__main__":
    if "--one" in sys.argv:
        asyncio.run(main())
    else:
        sys.exit(compare())
