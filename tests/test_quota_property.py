"""Property test of the quota invariant (issue "Quota is never exceeded", point 1): random mixes of queues
(cohorts, nested cohorts, borrowing and lending limits, every preemption policy), pods and pod groups of random
priorities, sizes, lifetimes and grace periods, driven through filter, preempt, bind and deletion, with the
invariant checked after every step.

Two drivers: the simulated kube-scheduler (app.sim: in-tree checks, dry-run preemption, retries, evictions that
leave victims Terminating), which checks the invariant after every bind and fails the run on any instant above
quota; and a hostile caller that calls the verbs in any order (bind without filter, binds twice, stale watch
events, deletions at random), checked after every call.

CI runs a fixed seed and a bounded number of cases; for a longer run:
    QUOTIENT_PROPERTY_CASES=2000 .venv/bin/python -m pytest tests/test_quota_property.py
(QUOTIENT_PROPERTY_SEED picks another seed.)
"""
from __future__ import annotations

import os
import random

import orjson
import pytest

from app.config import Configuration
from app.api.verbs import Verbs
from app.scheduler.scheduler import Scheduler
from app.objects.meta import format_time
from app.objects.pod import decode_pod
from app.sim.invariant import violations
from app.sim.run import simulate
from app.sim.scenario import load_scenario
from app.state.cluster import ClusterState
from app.sync.dispatch import apply_object
from helpers import FakeClock

CASES = int(os.environ.get("QUOTIENT_PROPERTY_CASES", "30"))
SEED = int(os.environ.get("QUOTIENT_PROPERTY_SEED", "20261125"))
KUEUE = "kueue.x-k8s.io/v1beta1"
START = 1767225600.0


def quota_entry(rng: random.Random, nominal: int, in_cohort: bool = True) -> dict:
    """A cpu quota; borrowing and lending limits only where there is a cohort (Kueue requires one)."""
    entry: dict = {"name": "cpu", "nominalQuota": nominal}
    if not in_cohort:
        return entry
    if rng.random() < 0.3:
        entry["borrowingLimit"] = rng.randint(0, 4)
    if rng.random() < 0.3:
        entry["lendingLimit"] = rng.randint(0, nominal)
    return entry


def random_cluster(rng: random.Random) -> tuple[list[dict], list[str]]:
    """Objects of a random quota tree (names of its LocalQueues returned too): one root cohort, maybe a child
    cohort with quota of its own, two to four ClusterQueues under them or alone."""
    docs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
                        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}}]
    cohorts = ["root"]
    if rng.random() < 0.5:
        spec: dict = {"parentName": "root"}
        if rng.random() < 0.6:
            spec["resourceGroups"] = [{"coveredResources": ["cpu"], "flavors": [
                {"name": "f", "resources": [quota_entry(rng, rng.randint(0, 4))]}]}]
        docs.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "child"}, "spec": spec})
        cohorts.append("child")
    queues = []
    for i in range(rng.randint(2, 4)):
        name = f"cq{i}"
        cohort = rng.choice(cohorts) if rng.random() < 0.85 else None
        spec = {"namespaceSelector": {},
                "queueingStrategy": rng.choice(["BestEffortFIFO", "StrictFIFO"]),
                "preemption": {"withinClusterQueue": rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
                               "reclaimWithinCohort": rng.choice(["Never", "LowerPriority", "Any"])},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "f", "resources": [quota_entry(rng, rng.randint(0, 6), cohort is not None)]}]}]}
        if cohort:
            spec["cohort"] = cohort
        if rng.random() < 0.3 and spec["preemption"]["reclaimWithinCohort"] != "Never":
            spec["preemption"]["borrowWithinCohort"] = {"policy": "LowerPriority"}
        docs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
        docs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": f"lq{i}", "namespace": "ns"},
                     "spec": {"clusterQueue": name}})
        queues.append(f"lq{i}")
    for n in range(rng.randint(1, 3)):
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n}"},
                     "status": {"allocatable": {"cpu": str(rng.choice([4, 8, 16])), "memory": "64Gi", "pods": "110"}}})
    return docs, queues


def random_pod(rng: random.Random, name: str, queue: str, group: tuple[str, int] | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": queue}, "annotations": {}}
    if group:
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = group[0]
        meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = str(group[1])
    notes = meta["annotations"]
    if rng.random() < 0.6:
        notes["scenario.quotient.dev/submit-at"] = f"{rng.randint(0, 60)}s"
    if rng.random() < 0.5:
        notes["scenario.quotient.dev/finish-after"] = f"{rng.randint(5, 90)}s"
    if rng.random() < 0.5:
        notes["scenario.quotient.dev/terminate-after"] = f"{rng.randint(1, 40)}s"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"priority": rng.choice([0, 10, 100, 1000]),
                     "containers": [{"name": "c", "image": "x",
                                     "resources": {"requests": {"cpu": str(rng.choice([1, 1, 2, 3, 4]))}}}]}}


def random_scenario(rng: random.Random) -> list[dict]:
    docs, queues = random_cluster(rng)
    for i in range(rng.randint(3, 10)):
        queue = rng.choice(queues)
        if rng.random() < 0.25:
            size = rng.randint(2, 3)
            for m in range(size):
                docs.append(random_pod(rng, f"g{i}-{m}", queue, (f"g{i}", size)))
        else:
            docs.append(random_pod(rng, f"p{i}", queue))
    docs.append({"apiVersion": "quotient.dev/v1alpha1", "kind": "Expectation", "spec": {"until": "150s"}})
    if rng.random() < 0.3:
        docs.insert(0, {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration",
                        "fairSharing": {"enable": True}})
    return docs


@pytest.mark.parametrize("case", range(CASES))
async def test_simulated_runs_never_go_above_quota(case, tmp_path):
    rng = random.Random(SEED * 1000 + case)
    path = tmp_path / f"case-{case}.yaml"
    path.write_bytes(b"\n---\n".join(orjson.dumps(d) for d in random_scenario(rng)))
    out = await simulate(load_scenario(str(path)))
    assert out.violations == [], f"seed {SEED}, case {case}:\n" + "\n".join(out.timeline)


# ---- a hostile caller: the verbs in any order ------------------------------------------------------------------

class Cluster:
    """The API's side for the hostile driver: the objects it holds (the truth the invariant is checked on),
    each pod's first, pending version (what a late event would carry), and a resourceVersion counter."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.clock = FakeClock(START)
        self.state = ClusterState(Configuration(), clock=self.clock)
        docs, self.queues = random_cluster(rng)
        for d in docs:
            apply_object(self.state, d)
        self.api: dict[str, dict] = {}
        self.first: dict[str, dict] = {}
        self.rv = 100

    def write(self, obj: dict) -> dict:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.api[obj["metadata"]["uid"]] = obj
        return obj

    def new_pod(self) -> None:
        n = len(self.first) + 1
        obj = random_pod(self.rng, f"p{n}", self.rng.choice(self.queues))
        obj["metadata"]["annotations"].clear()
        obj["metadata"].update(uid=f"uid-{n}", creationTimestamp=format_time(self.clock.now))
        self.first[obj["metadata"]["uid"]] = orjson.loads(orjson.dumps(self.write(obj)))
        apply_object(self.state, obj)

    def truth(self):
        return [decode_pod(o) for o in self.api.values()]


class ApiWriter:
    """Bindings and evictions land in the API only; the watch (the driver's "echo" step) tells the state later,
    except that a deletion is seen at once."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    async def bind(self, pod, node: str) -> None:
        obj = orjson.loads(orjson.dumps(self.cluster.api[pod.uid]))
        obj["spec"]["nodeName"] = node
        self.cluster.write(obj)

    async def evict(self, pod, reason: str, message: str) -> None:
        obj = self.cluster.api.pop(pod.uid, None)
        if obj is not None:
            apply_object(self.cluster.state, obj, deleted=True)


async def hostile_step(rng: random.Random, cluster: Cluster, ext: Scheduler) -> None:
    state = cluster.state
    nodes = sorted(state.nodes)
    what = rng.choice(["new", "filter", "filter", "bind", "bind", "preempt", "delete", "stale", "echo",
                       "reconcile", "tick"])
    if what == "new" or not cluster.api:
        cluster.new_pod()
        return
    uid = rng.choice(sorted(cluster.api))
    obj = cluster.api[uid]
    meta = obj["metadata"]
    if what == "filter":
        Verbs(ext).filter(orjson.dumps({"Pod": obj, "Nodes": None, "NodeNames": nodes}))
    elif what == "bind":          # with or without a filter before it, to any node
        await Verbs(ext).bind(orjson.dumps({"PodName": meta["name"], "PodNamespace": "ns", "PodUID": uid,
                                     "Node": rng.choice(nodes)}))
    elif what == "preempt":
        victims = {n: {"Pods": [{"UID": p.uid} for p in state.pods.values() if p.node_name == n]} for n in nodes}
        Verbs(ext).preempt(orjson.dumps({"Pod": obj, "NodeNameToVictims": None, "NodeNameToMetaVictims": victims}))
    elif what == "delete":
        del cluster.api[uid]
        apply_object(state, obj, deleted=True)
    elif what == "stale":         # the pod's first, pending version, delivered late
        apply_object(state, cluster.first[uid])
    elif what == "echo":          # the watch delivers the API's current version
        apply_object(state, obj)
    elif what == "reconcile":
        await ext.reconcile()
    else:
        cluster.clock.advance(rng.choice([1, 5, 30, 61]))


@pytest.mark.parametrize("case", range(CASES))
async def test_verbs_in_any_order_never_go_above_quota(case):
    rng = random.Random(SEED * 7919 + case)
    cluster = Cluster(rng)
    ext = Scheduler(cluster.state, ApiWriter(cluster))
    for step in range(150):
        await hostile_step(rng, cluster, ext)
        found = violations(cluster.state, cluster.truth())
        assert found == [], f"seed {SEED}, case {case}, step {step}: {found}"
