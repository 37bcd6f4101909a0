"""A walk of queue order gives a pod the assignment the pod of its shape before it got, without assigning it again,
while that Fit in its groups' first flavors still holds without borrowing (core.flavors.FitMemo,
core.admission.queue_ahead): every verdict is the one a walk assigning each pod anew reaches,
whatever the flavors, their fungibility, the cohort and the pods ahead (Kueue's flavorassigner, seed 001)."""
from __future__ import annotations

import random

import pytest

from app.core.flavors import FitMemo
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor, running
from helpers import decide_pod, make_state

FUNGIBILITY = [None, {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
               {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "Preempt"},
               {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}]
PREEMPTION = [None, {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
              {"withinClusterQueue": "Never", "reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {
                  "policy": "LowerPriority"}}]


def cluster(rng: random.Random) -> list[dict]:
    flavors = ["f1", "f2"][:rng.choice([1, 2])]
    quotas = [FlavorQuotas(f).resource("cpu", rng.choice([2, 4, 6, 10]), borrowing=rng.choice([None, 0, 4]))
              for f in flavors]
    cq = ClusterQueue("cq").cohort("co").resource_group(*quotas)
    fungibility, preemption = rng.choice(FUNGIBILITY), rng.choice(PREEMPTION)
    if fungibility:
        cq = cq.flavor_fungibility(fungibility)
    if preemption:
        cq = cq.preemption(preemption)
    other = ClusterQueue("other").cohort("co").resource_group(
        *[FlavorQuotas(f).resource("cpu", rng.choice([0, 2, 6])) for f in flavors])
    objs = [Namespace("team-a").obj(), *[ResourceFlavor(f).obj() for f in flavors], cq.obj(), other.obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
            LocalQueue("lq-other", "team-a").cluster_queue("other").obj(), Node("n1").cpu("1000").obj()]
    for i in range(rng.choice([0, 1, 3])):
        objs.append(running(f"r{i}", rng.choice(["lq", "lq-other"]), rng.choice([1, 2, 4]),
                            priority=rng.choice([0, 10]), created=i).obj())
    sizes = rng.sample([1, 2, 3], rng.choice([1, 2]))
    for i in range(rng.randint(3, 25)):
        objs.append(Pod(f"p{i:02d}").queue("lq").cpu(rng.choice(sizes)).priority(rng.choice([0, 0, 5]))
                    .created(10 + rng.randint(0, 5)).obj())
    return objs


def verdict(objs: list[dict], pod: dict, memo: bool, monkeypatch):
    with monkeypatch.context() as m:
        if not memo:
            m.setattr(FitMemo, "again", lambda self, shape: None)
        v = decide_pod(make_state(*objs), pod)
    return v.admit, v.rule, v.reason, v.resolvable, v.assignment.flavors if v.assignment else None


@pytest.mark.parametrize("seed", range(1000))
def test_a_shape_given_its_fit_again_decides_as_assigning_every_pod_anew(seed, monkeypatch):
    rng = random.Random(seed)
    objs = cluster(rng)
    pod = Pod("me").queue("lq").cpu(rng.choice([1, 2, 3])).priority(rng.choice([0, 5, 10])).created(100).obj()
    assert verdict(objs, pod, True, monkeypatch) == verdict(objs, pod, False, monkeypatch)


RACK = "cloud.provider.com/topology-rack"


def test_a_pod_asking_a_topology_is_not_given_the_fit_of_one_asking_none(monkeypatch):
    """Two 1-CPU pods ahead, the second asking a rack (Kueue's TAS): it cannot take the flavor without a Topology
    ("does not support TopologyAwareScheduling"), so it takes tas, and `me` fits in plain. Asking a topology is
    part of a pod's shape (PodInfo.shape): the first pod's fit in plain is not given to the second."""
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
                "spec": {"levels": [{"nodeLabel": RACK}]}}
    tas = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tas"},
           "spec": {"nodeLabels": {"tas": "yes"}, "topologyName": "default"}}
    cq = ClusterQueue("cq").resource_group(FlavorQuotas("plain").resource("cpu", 2), FlavorQuotas("tas").resource("cpu", 2))
    objs = [Namespace("team-a").obj(), topology, ResourceFlavor("plain").obj(), tas, cq.obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
            Node("n1").cpu("100").labels({"tas": "yes", RACK: "r1"}).obj(),
            Pod("p1").queue("lq").cpu(1).created(10).obj(),
            Pod("p2").queue("lq").cpu(1).created(11).annotation("kueue.x-k8s.io/podset-required-topology", RACK).obj()]
    me = Pod("me").queue("lq").cpu(1).created(100).obj()
    assert verdict(objs, me, True, monkeypatch) == verdict(objs, me, False, monkeypatch)
    assert verdict(objs, me, True, monkeypatch)[:2] == (True, "Admitted")
