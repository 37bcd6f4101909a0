"""The cohort-order walk (core.admission.served_first) goes no further than its verdict needs (issue 32: each
borrowing head walked every other ClusterQueue's pods, one assignment each): a ClusterQueue at its nominal quota
is passed over whole, since every pod of it would borrow, and the walk stops once the borrowing pod no longer fits
after the pods found first. Neither changes a verdict."""
from __future__ import annotations

import random

import pytest

from app.core import admission
from app.core.admission import decide
from app.core.workload import Workload
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import apply, make_state

QUEUES = ("a", "b", "c", "d")


def cohort(rng: random.Random):
    objs = [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), Node("n1").cpu("1000").obj()]
    for q in QUEUES:
        objs += [ClusterQueue(q).cohort("co").resource_group(FlavorQuotas("default-flavor").resource(
                     "cpu", rng.choice([2, 4, 6]), borrowing=rng.choice([None, 4]))).obj(),
                 LocalQueue(f"lq-{q}", "team-a").cluster_queue(q).obj()]
    state = make_state(*objs)
    for i in range(rng.randint(0, 10)):
        q, cpu = rng.choice(QUEUES), rng.choice([1, 2])
        node = state.ledger.quota_node(q)
        if node.usage.get(("default-flavor", "cpu"), 0) + cpu * 1000 <= node.subtree[("default-flavor", "cpu")]:
            apply(state, Pod(f"run-{i}").queue(f"lq-{q}").cpu(str(cpu)).node("n1").obj())
    for i in range(rng.randint(4, 30)):
        cpu = rng.choice([1, 2, 3])
        apply(state, Pod(f"p-{i}").queue(f"lq-{rng.choice(QUEUES)}").cpu(str(cpu)).priority(rng.choice([0, 10]))
              .created(i).obj())
    return state, [p for p in state.pods.values() if p.name.startswith("p-")]


def counted_assigns(monkeypatch) -> list:
    calls: list = []
    real = admission.assign
    monkeypatch.setattr(admission, "assign", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.mark.parametrize("seed", range(20))
def test_the_walk_that_stops_early_decides_as_the_whole_walk(seed, monkeypatch):
    state, pods = cohort(random.Random(seed))
    calls = counted_assigns(monkeypatch)
    short = [decide(state, Workload.of_pod(p)) for p in pods]
    few = len(calls)
    monkeypatch.setattr(admission, "at_nominal", lambda node: False)
    monkeypatch.setattr(admission, "lacks", lambda *a: False)
    whole = [decide(state, Workload.of_pod(p)) for p in pods]
    assert [(v.rule, v.admit, v.cluster_queue) for v in short] == [(v.rule, v.admit, v.cluster_queue) for v in whole]
    assert few <= len(calls) - few


def test_a_cohort_of_queues_at_their_nominal_quota_is_not_walked(monkeypatch):
    objs = [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), Node("n1").cpu("1000").obj()]
    for q in (*QUEUES, "idle"):
        objs += [ClusterQueue(q).cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", 4)).obj(),
                 LocalQueue(f"lq-{q}", "team-a").cluster_queue(q).obj()]
    state = make_state(*objs)
    for q in QUEUES[1:]:                     # b, c, d run their nominal quota, and have pods waiting of 3 shapes
        apply(state, Pod(f"run-{q}").queue(f"lq-{q}").cpu("4").node("n1").obj())
        for cpu in (1, 2, 3):
            apply(state, Pod(f"p-{q}-{cpu}").queue(f"lq-{q}").cpu(str(cpu)).created(cpu).obj())
    apply(state, Pod("borrower").queue("lq-a").cpu("6").obj())      # 4 of a's own, 2 lent by idle
    borrower = next(p for p in state.pods.values() if p.name == "borrower")
    calls = counted_assigns(monkeypatch)
    assert decide(state, Workload.of_pod(borrower)).admit
    assert len(calls) == 1, "only the borrower itself is assigned: no pod of b, c or d can come first"
