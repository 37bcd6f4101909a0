"""What one refused filter costs as the backlog grows (issue 32): Kueue's scale-test queues, 150 pending pods
against 15,000, the same refused pods asked about.

    .venv/bin/python tests/bench/bench_refusal_cost.py [--backlogs 150,15000] [--asks 3000] [--profile]

Not a pytest test (tests/bench/conftest.py keeps pytest out). In process, on the verb's whole path from the
request's bytes to the answer's (app.api.verbs' filter), no HTTP: the HTTP layer's cost does not grow with the backlog
and bench_throughput.py measures it. The cluster is Kueue's configs/baseline (test/performance/scheduler):
5 cohorts of 6 ClusterQueues (nominal 20 cpu, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue
LowerPriority), every cohort's quota in use by running small pods, and the backlog spread over the
ClusterQueues as Kueue's generator makes it (350 small : 100 medium : 50 large per ClusterQueue, priorities
50 / 100 / 200). The running pods have a priority above all three, and no ClusterQueue borrows, so the pending
pods wait: none may preempt (a preemption is a decision of its own, measured by bench_preemption.py). Asked:
pending pods spread over the queues and classes, as kube-scheduler retries them after their backoffs; every
answer is checked to be a refusal. Every `--churn` asks (default 10) one running pod finishes and another
starts in its place (the steady state of the scale test: quota used as fast as it frees), and every
`--frees` asks (default 40; 1,500 asks a second against 40 pods finishing in the scale test) one finishes
for a moment before its place is taken, so quota really frees and the refusals are decided again.

Prints per backlog: microseconds per refused filter (mean over the asks, and p50/p99), and the ratio of the
largest backlog's mean to the smallest's. Target (issue 32): within 1.5x.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from app.act.writer import SnapshotWriter  # noqa: E402
from app.api.verbs import Verbs  # noqa: E402
from app.scheduler.scheduler import Scheduler  # noqa: E402
from app.objects.pod import decode_pod  # noqa: E402
from app.state.heap import settle_heap  # noqa: E402
from app.state.presence import OVERDUE  # noqa: E402
from helpers import make_state, with_uids  # noqa: E402

KUEUE = "kueue.x-k8s.io/v1beta1"
COHORTS, QUEUES_PER_COHORT = 5, 6
NOMINAL, BORROWING = 20, 100
CLASSES = (("small", 1, 50, 350), ("medium", 5, 100, 100), ("large", 20, 200, 50))   # name, cpu, priority, share
RUNNING = ("running", 1, 1000, 0)    # what fills the quota: above every class, so no pending pod may preempt
NODES, NODE_CPU = 20, 64
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def queue_docs() -> list[dict]:
    docs: list[dict] = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    for name, _, value, _ in (*CLASSES, RUNNING):
        docs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                     "value": value})
    for c in range(COHORTS):
        for q in range(QUEUES_PER_COHORT):
            cq = f"cq-{c}-{q}"
            docs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
                "cohort": f"cohort-{c}", "namespaceSelector": {},
                "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": NOMINAL, "borrowingLimit": BORROWING}]}]}]}})
            docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cq}})
            docs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": cq},
                         "spec": {"clusterQueue": cq}})
    for n in range(NODES):
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n:02d}", "labels": {}},
                     "status": {"allocatable": {"cpu": str(NODE_CPU), "memory": "512Gi", "pods": "1000"}}})
    return docs


def pod(name: str, cq: str, cls: tuple, created: int, node: str = "") -> dict:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": cq, "labels": {QUEUE_LABEL: "lq"},
        "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_700_000_000 + created))},
        "spec": {"priorityClassName": cls[0], "priority": cls[2], "schedulerName": "default-scheduler",
                 "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": str(cls[1])}}}]},
        "status": {"phase": "Pending"}}
    if node:
        obj["spec"]["nodeName"] = node
        obj["status"]["phase"] = "Running"
    return obj


def cluster(backlog: int) -> tuple[list[dict], list[dict]]:
    """(every object, the pending pods in ask order)."""
    docs = queue_docs()
    queues = [f"cq-{c}-{q}" for c in range(COHORTS) for q in range(QUEUES_PER_COHORT)]
    for i, cq in enumerate(queues):           # each ClusterQueue runs its nominal quota in small pods
        for k in range(NOMINAL):
            docs.append(pod(f"run-{k}", cq, RUNNING, 0, f"node-{(i * NOMINAL + k) % NODES:02d}"))
    total = sum(share for *_, share in CLASSES)
    pending = []
    for i, cq in enumerate(queues):
        per_queue = max(1, backlog // len(queues))
        for cls in CLASSES:
            for k in range(max(1, per_queue * cls[3] // total)):
                pending.append(pod(f"{cls[0]}-{k}", cq, cls, 1 + k))
    docs.extend(pending)
    docs = with_uids(docs)
    ordered = sorted((p for p in docs if p["kind"] == "Pod" and not p["spec"].get("nodeName")),
                     key=lambda p: (int(p["metadata"]["name"].rsplit("-", 1)[1]), p["metadata"]["namespace"]))
    return docs, ordered


def body(p: dict, nodes: list[str]) -> bytes:
    sent = {k: v for k, v in p.items() if k != "status"}
    return orjson.dumps({"Pod": sent, "Nodes": None, "NodeNames": nodes})


class Backlog:
    """One backlog's state and its asks, run a round at a time: the backlogs take turns, so that a machine's
    drift (another tenant, the clock's frequency) falls on all of them alike and the ratio is within one run."""

    def __init__(self, backlog: int, churn: int, frees: int):
        docs, pending = cluster(backlog)
        self.state = make_state(*docs)
        settle_heap()               # as serve does once its initial lists are in (app.state.heap)
        self.ext = Verbs(Scheduler(self.state, SnapshotWriter(self.state)))
        nodes = sorted(self.state.nodes)
        # the asked pods: not the first of their class in their queue, as most of a backlog is not
        self.asked = [body(p, nodes) for p in pending if int(p["metadata"]["name"].rsplit("-", 1)[1]) >= 1]
        self.running = [p for p in docs if p["kind"] == "Pod" and p["spec"].get("nodeName")]
        self.backlog, self.churn, self.frees = len(pending), churn, frees
        self.asks, self.times, self.refused = 0, [], 0

    def round(self, asks: int, timed: bool = True) -> None:
        state, ext, asked, running = self.state, self.ext, self.asked, self.running
        times = self.times if timed else []
        for i in range(self.asks, self.asks + asks):
            if self.churn and i % self.churn == 0:      # one pod finishes and another starts in its place
                k = (i // self.churn) % len(running)
                done = running[k]
                state.upsert_pod(decode_pod(dict(done, status={"phase": "Succeeded"})))
                if self.frees and i % self.frees == 0:   # quota is free for one ask before it is taken again
                    ext.filter(asked[(i * 7919 + 1) % len(asked)])
                again = dict(done, metadata=dict(done["metadata"], name=f"again-{i}", uid=f"again-{i}"))
                state.upsert_pod(decode_pod(again))
                running[k] = again
            raw = asked[(i * 7919) % len(asked)]
            t0 = time.perf_counter()
            answer = ext.filter(raw)
            times.append(time.perf_counter() - t0)
            self.refused += timed and b'"NodeNames":[]' in answer
        self.asks += asks

    def result(self) -> dict:
        times = sorted(self.times)
        return {"backlog": self.backlog, "asks": len(times), "refused": self.refused,
                "blocked_hits": self.state.blocked.hits, "mean_us": sum(times) / len(times) * 1e6,
                "p50_us": times[len(times) // 2] * 1e6, "p99_us": times[int(len(times) * 0.99)] * 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backlogs", default="150,15000")
    ap.add_argument("--asks", type=int, default=3000)
    ap.add_argument("--churn", type=int, default=10)
    ap.add_argument("--frees", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=10, help="the backlogs take turns, this many rounds each")
    ap.add_argument("--profile", action="store_true", help="cProfile the last backlog's asks")
    args = ap.parse_args(argv)
    backlogs = [Backlog(int(x), args.churn, args.frees) for x in args.backlogs.split(",")]
    # Past the load's transient: every pod loaded pending is expected at once, and leaves the present set OVERDUE
    # later when nobody asked (state.presence), one time per load; then a round untimed, as a process running a while.
    time.sleep(OVERDUE + 0.1)
    for b in backlogs:
        b.round(args.asks // 10, timed=False)
    rounds = max(1, args.rounds)
    prof = None
    if args.profile:
        import cProfile
        prof = cProfile.Profile()
    for r in range(rounds):
        for b in backlogs:
            share = args.asks // rounds + (1 if r < args.asks % rounds else 0)
            if prof is not None and b is backlogs[-1]:
                prof.enable()
                b.round(share)
                prof.disable()
            else:
                b.round(share)
    if prof is not None:
        import pstats
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    results = [b.result() for b in backlogs]
    for r in results:
        print(f"backlog {r['backlog']:>6}: {r['mean_us']:8.1f} us/refused filter (p50 {r['p50_us']:.1f}, "
              f"p99 {r['p99_us']:.1f}); {r['refused']}/{r['asks']} refused", flush=True)
    if len(results) > 1:
        ratio = results[-1]["mean_us"] / results[0]["mean_us"]
        print(f"ratio largest/smallest backlog: {ratio:.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
