"""What a Kueue object event costs the state with Kueue's baseline shape and its backlog (issue 32).

    .venv/bin/python tests/bench/bench_kueue_events.py [--pods N] [--rounds R]

Not a pytest test (tests/bench/conftest.py keeps pytest out; tests/test_kueue_events.py runs it tiny). It builds a
ClusterState as the watch does (sync.dispatch.apply_object): 5 cohorts of 6 ClusterQueues (nominal 20 CPU,
borrowingLimit 100), one LocalQueue per ClusterQueue, N pending pods spread over them and a few running. Then it
times, in microseconds per event:

  - status: a ClusterQueue MODIFIED event that changes only .status, metadata.resourceVersion and managedFields
    (what Quotient's own status write, every 10 s for every ClusterQueue, comes back as);
  - policy: a ClusterQueue whose stopPolicy changes (None <-> Hold);
  - localqueue: a LocalQueue repointed to another ClusterQueue and back (its pods move);
  - quota: a nominalQuota change (the full rebuild: tree, flavor node sets, every charge, the pending index).

and prints each next to the full rebuild (ratios within one run).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.state.cluster import ClusterState  # noqa: E402
from app.sync.dispatch import apply_object  # noqa: E402

KUEUE = "kueue.x-k8s.io/v1beta1"
FLAVOR = "default-flavor"


def cluster_queue(name: str, cohort: str, nominal: int = 20, stop: str = "None", rv: int = 1) -> dict:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue",
            "metadata": {"name": name, "resourceVersion": str(rv), "generation": 1,
                         "managedFields": [{"manager": "quotient", "operation": "Update", "subresource": "status"}]},
            "spec": {"cohort": cohort, "stopPolicy": stop,
                     "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                     "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [
                         {"name": "cpu", "nominalQuota": str(nominal), "borrowingLimit": "100"}]}]}]},
            "status": {"pendingWorkloads": rv, "admittedWorkloads": 0,
                       "flavorsUsage": [{"name": FLAVOR, "resources": [{"name": "cpu", "total": f"{rv}m"}]}]}}


def local_queue(i: int, cq: str) -> dict:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": f"ns-{i}"},
            "spec": {"clusterQueue": cq}}


def pod(i: int, ns: int, running: bool) -> dict:
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"p{i}", "namespace": f"ns-{ns}", "uid": f"uid-{i}",
                        "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    if running:
        obj["spec"]["nodeName"] = "n1"
        obj["status"] = {"phase": "Running"}
    return obj


def build(pods: int) -> ClusterState:
    state = ClusterState()
    state.begin_bulk()
    for obj in ([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                  "status": {"allocatable": {"cpu": "10000", "pods": "100000"}}},
                 {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}}]
                + [cluster_queue(f"cq-{i}", f"cohort-{i // 6}") for i in range(30)]
                + [local_queue(i, f"cq-{i}") for i in range(30)]
                + [pod(i, i % 30, running=i < 60) for i in range(pods)]):
        apply_object(state, obj)
    state.end_bulk()
    return state


def timed(events, state: ClusterState) -> float:
    """Microseconds per event."""
    start = time.perf_counter()
    for obj in events:
        apply_object(state, obj)
    return (time.perf_counter() - start) / len(events) * 1e6


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=15_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    state = build(args.pods)
    queued = sum(len(v) for v in state.pending.values())
    rv = iter(range(2, 10**9))
    results = {
        "status": timed([cluster_queue(f"cq-{i}", f"cohort-{i // 6}", rv=next(rv))
                         for _ in range(args.rounds) for i in range(30)], state),
        "policy": timed([cluster_queue("cq-0", "cohort-0", stop=stop) for _ in range(args.rounds)
                         for stop in ("Hold", "None")], state),
        "localqueue": timed([local_queue(0, cq) for _ in range(args.rounds) for cq in ("cq-1", "cq-0")], state),
        "quota": timed([cluster_queue("cq-0", "cohort-0", nominal=n) for _ in range(args.rounds) for n in (21, 20)],
                       state),
    }
    assert sum(len(v) for v in state.pending.values()) == queued
    print(f"30 ClusterQueues, {args.pods} pods ({queued} pending), {args.rounds} rounds")
    for what, us in results.items():
        print(f"  {what:<11} {us:>12.1f} us/event   {us / results['quota']:>8.4f} x a full rebuild")
    return results


if __name__ == "__main__":
    main()
