"""Decisions read a view and never write the live state (issue 13, point 2).

ClusterState implements every view of core.view. The quota tree decisions see (quota_node, quota_tree) is a
mirror of the live one, brought up to date from the live usage when read; simulated charges and
removals (core.overlay) change only the mirror and are taken back. The live tree changes through the
state's own charges alone, by the one primitive core.resource_node.charge.
"""
from __future__ import annotations

from types import MappingProxyType

import pytest

from app.core.admission import decide, virtual_charges
from app.core.decisions import Hold, Refuse
from app.core.overlay import Overlay
from app.core.preemption import kube_preempt
from app.core.resource_node import available, charge
from app.core import reclaim
from app.core.rules import MAY_NOT_PREEMPT
from app.core import view
from app.state.cluster import ClusterState
from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor, cpu_queue
from helpers import CPU, apply, delete, make_state, workload_info

FR = ("default-flavor", "cpu")


def cohort_state():
    """Cohort c: a (4 CPUs, withinClusterQueue LowerPriority, reclaimWithinCohort Any) and b (4). b runs b0..b5
    (1 CPU each: it borrows 2 of a's), b4 and b5 on n2; a runs a1 (1 CPU, n2); h (a, 3 CPUs, priority 100) is
    pending: a's quota fits it once 2 of b's borrowed CPUs come back."""
    return make_state(ResourceFlavor("default-flavor").obj(), Cohort("c").obj(), Node("n1").cpu("8").obj(),
                      Node("n2").cpu("8").obj(),
                      cpu_queue("a", 4, "c", preemption={"withinClusterQueue": "LowerPriority",
                                                     "reclaimWithinCohort": "Any"}),
                      cpu_queue("b", 4, "c"), LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                      LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                      *[Pod(f"b{i}", "team-b").queue("lq").cpu("1").created(i).node("n1" if i < 4 else "n2")
                            .obj() for i in range(6)],
                      Pod("a1").queue("lq").cpu("1").created(1).node("n2").obj(),
                      Pod("h").queue("lq").cpu("3").priority(100).created(10).obj())


def live_usage(state) -> dict:
    return {(kind, name): dict(node.usage)
            for kind, nodes in (("cq", state.tree.queues), ("cohort", state.tree.cohorts))
            for name, node in nodes.items()}


def frozen(state):
    """Make the live tree's usage read-only: any write by a decision raises TypeError."""
    for nodes in (state.tree.queues, state.tree.cohorts):
        for node in nodes.values():
            node.usage = MappingProxyType(node.usage)


def thawed(state):
    for nodes in (state.tree.queues, state.tree.cohorts):
        for node in nodes.values():
            node.usage = dict(node.usage)


def test_cluster_state_implements_the_views_core_reads():
    state = ClusterState()
    views = [v for v in vars(view).values() if isinstance(v, type) and v.__module__ == view.__name__
             and getattr(v, "_is_runtime_protocol", False)]
    assert len(views) >= 15 and all(isinstance(state, v) for v in views)


@pytest.mark.parametrize("component, reads", [("store", view.StoreReads), ("ledger", view.LedgerReads),
                                              ("queues", view.QueueReads), ("workloads", view.HoldReads),
                                              ("pods_ready", view.ReadinessReads)])
def test_each_component_answers_the_queries_core_makes_of_it(component, reads):
    """The views name ClusterState's components (state/: split by job); each answers what core asks of it."""
    queries = [n for n, v in vars(reads).items() if callable(v) and not n.startswith("_")]
    part = getattr(ClusterState(), component)
    assert queries and all(callable(getattr(part, n, None)) for n in queries), component


def test_the_mirror_has_the_live_shape_and_usage_but_its_own_nodes():
    s = cohort_state()
    live, mirror = s.tree, s.ledger.quota_tree()
    assert list(mirror.queues) == list(live.queues) and list(mirror.cohorts) == list(live.cohorts)
    for name, node in live.queues.items():
        twin = mirror.queues[name]
        assert twin is not node and twin.usage == node.usage and twin.usage is not node.usage
        assert twin.parent is mirror.cohorts["c"] and twin.quotas is node.quotas and twin.bound is node.bound
    assert mirror.cohorts["c"].children == [mirror.queues["a"], mirror.queues["b"]]
    assert s.ledger.quota_node("a") is mirror.queues["a"]


def test_reclaim_and_the_preempt_verb_decide_without_writing_the_live_tree():
    """The live usage is read-only while core decides (a write would raise): the decisions still find their
    victims, simulating every removal on the mirror, and leave the mirror as the live tree is."""
    s = cohort_state()
    before = live_usage(s)
    h = workload_info(s, "team-a", "h")
    frozen(s)
    try:
        verdict = decide(s, h)
        assert not verdict.admit and verdict.rule == "QuotaExceeded"
        decision = reclaim.reclaim(s, h.template, verdict)
        answer = kube_preempt.answer(s, h.template, ["n1", "n2"])
    finally:
        thawed(s)
    assert isinstance(decision, tuple) and isinstance(decision[0], Hold)
    hold, plan = decision
    assert sorted(s.pods[u].key for u in hold.victims) == ["team-b/b4", "team-b/b5"]     # the newest first
    assert (hold.node, plan.node, hold.charge.cluster_queue) == ("n2", "n2", "a")
    assert {n: sorted(s.pods[u].key for u in uids) for n, uids in answer.victims.items()} == \
        {"n1": ["team-b/b2", "team-b/b3"], "n2": ["team-b/b4", "team-b/b5"]}      # per node, newest first
    assert live_usage(s) == before
    assert {n: dict(v.usage) for n, v in s.ledger.quota_tree().queues.items()} == {n: before[("cq", n)] for n in s.tree.queues}


def test_a_live_charge_reaches_the_mirror_when_it_is_next_read():
    s = cohort_state()
    mirror_a = s.ledger.quota_node("a")
    assert mirror_a.usage[FR] == 1 * CPU
    apply(s,
          Pod("a2").queue("lq").cpu("2").created(2).node("n2")
              .obj())            # a running pod charged to a, on the live tree
    assert s.tree.queues["a"].usage[FR] == 3 * CPU
    assert s.ledger.quota_node("a").usage[FR] == 3 * CPU                  # the mirror caught up on reading
    assert s.ledger.quota_tree().cohorts["c"].usage == s.tree.cohorts["c"].usage
    delete(s, Pod("a2").queue("lq").cpu("2").created(2).node("n2").obj())
    assert s.ledger.quota_node("a").usage[FR] == 1 * CPU


def test_the_overlay_charges_and_removes_on_the_mirror_and_takes_all_back():
    s = cohort_state()
    live_before, mirror_before = live_usage(s), dict(s.ledger.quota_node("b").usage)
    with Overlay(s) as overlay:
        overlay.charge("x", "a", {FR: 3 * CPU})
        overlay.charge("y", "b", {FR: 2 * CPU}, -1)
        assert s.ledger.quota_node("a").usage[FR] == 4 * CPU and s.ledger.quota_node("b").usage[FR] == 4 * CPU
        assert available(s.ledger.quota_node("a"), FR) == 0                 # the cohort's 8 CPUs all used
        overlay.take_back("y")
        assert s.ledger.quota_node("b").usage[FR] == 6 * CPU and list(overlay.applied) == ["x"]
        assert live_usage(s) == live_before                   # the live tree never moved
    assert dict(s.ledger.quota_node("b").usage) == mirror_before and s.ledger.quota_node("a").usage[FR] == 1 * CPU
    with virtual_charges(s, [("a", {FR: CPU}, "p1"), ("a", {FR: CPU}, "p2")]):
        assert s.ledger.quota_node("a").usage[FR] == 3 * CPU
    assert s.ledger.quota_node("a").usage[FR] == 1 * CPU


def test_the_overlay_takes_back_even_when_the_decision_fails():
    s = cohort_state()
    with pytest.raises(RuntimeError):
        with Overlay(s) as overlay:
            overlay.charge("x", "a", {FR: 3 * CPU})
            raise RuntimeError("a bug in a rule")
    assert s.ledger.quota_node("a").usage[FR] == 1 * CPU


@pytest.mark.parametrize("sign,bound", [(1, False), (-1, False), (1, True)])
def test_charge_is_the_one_primitive_and_charges_above_guaranteed_quota_to_the_cohort(sign, bound):
    s = make_state(ResourceFlavor("default-flavor").obj(), Cohort("c").obj(),
                   ClusterQueue("a").cohort("c")
                       .resource_group(FlavorQuotas("default-flavor").resource("cpu", "4", lending="1")).obj(),
                   cpu_queue("b", 4, "c"))
    node = s.tree.queues["a"]
    start = 5 * CPU if sign < 0 else 0
    if start:
        charge(node, {FR: start}, 1, bound)
    charge(node, {FR: 2 * CPU if sign < 0 else 5 * CPU}, sign, bound)
    used = node.bound if bound else node.usage
    parent = s.tree.cohorts["c"].bound if bound else s.tree.cohorts["c"].usage
    # a keeps 3 CPUs (4 nominal, 1 lent) for itself: only what is above it is stored in the cohort
    assert (used[FR], parent.get(FR, 0)) == ((3 * CPU, 0) if sign < 0 else (5 * CPU, 2 * CPU))


def test_a_refusal_is_a_typed_decision_naming_its_rule():
    s = cohort_state()
    h = workload_info(s, "team-a", "h")
    verdict = decide(s, h)
    s.config.preemption_mode = "None"
    decision = reclaim.reclaim(s, h.template, verdict)
    assert decision == Refuse(MAY_NOT_PREEMPT, "preemption is off (preemption.mode None)", "a")
