"""Hierarchical preemption (issue 9 point 2; seed 000 with Cohort parentName): classic preemption over a tree
of Cohorts, as Kueue's classical candidate iterator does it (pkg/scheduler/preemption/classical/
hierarchical_preemption.go, candidate_generator.go, preemption.go classicalPreemptions).

Most cases are Kueue's TestHierarchicalPreemptions (pkg/scheduler/preemption/preemption_hierarchical_test.go),
one test each, named after the Kueue case; the trees are drawn as in Kueue, "(n)" being a node's own CPU
quota. Every queue has withinClusterQueue LowerPriority and reclaimWithinCohort Any unless said otherwise.
Namespaces are named after their ClusterQueue (hyphens for Kueue's underscores). The same cases end to end
(filter, the extender's own reclaim, bind) are tests/scenarios/hierarchical-preemption-*.yaml, run by
tests/test_scenarios.py.
"""
from __future__ import annotations

import contextlib

from app.core import hierarchy as H
from app.core import preemption
from app.core.preemption.candidates import find_candidates
from app.core.rules import IN_CLUSTER_QUEUE, IN_COHORT_RECLAIM_WHILE_BORROWING, IN_COHORT_RECLAMATION
from app.objects.annotations import FENCE
from app.core.preemption.quota_targets import quota_targets as quota_targets_of
from app.core.resource_node import available
from app.core.admission import assign

from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor, running
from helpers import CPU, all_usage, make_state, preemptor_of, workload_info

FR = ("default-flavor", "cpu")
MEM = ("default-flavor", "memory")
DEFAULT = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
BWC0 = {**DEFAULT, "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0}}


# ---- building Kueue's cases -----------------------------------------------------------------------------------

def co(name, parent=None, cpu=None, **more):
    """A Cohort with an optional parent and CPU (and other resources) of its own."""
    res = {**({"cpu": str(cpu)} if cpu is not None else {}), **more}
    built = Cohort(name).parent(parent)
    return (built.resource_group(FlavorQuotas("default-flavor").resources_from(res)) if res else built).obj()


def q(name, parent, cpu=0, policy=None, lending=None, **more):
    """A ClusterQueue under Cohort parent, with its namespace's LocalQueue "lq"."""
    quotas = FlavorQuotas("default-flavor").resource("cpu", str(cpu), lending=None if lending is None else str(lending))
    return [ClusterQueue(name).cohort(parent).resource_group(quotas.resources_from(more))
            .preemption(policy or DEFAULT).obj(),
            LocalQueue("lq", name).cluster_queue(name).obj()]


def state(*parts, incoming, memory="512Gi"):
    """A state from cohorts, queue pairs and running pods; incoming is the pending pod, created last."""
    objs = [Node("n1").cpu("256").memory(memory).obj()]
    for p_ in parts:
        objs += p_ if isinstance(p_, list) else [p_]
    return make_state(ResourceFlavor("default-flavor").obj(), *objs, incoming)


def fingerprint(s):
    return all_usage(s), {u: (c.cluster_queue, dict(c.usage)) for u, c in s.admitted.items()}


@contextlib.contextmanager
def unchanged(s):
    before = fingerprint(s)
    yield
    assert fingerprint(s) == before


def candidates(s, ns="q", name="in"):
    pre = preemptor_of(s, ns, name)
    with unchanged(s):
        return find_candidates(s, pre, pre.relevant, set())


def targets(s, ns="q", name="in"):
    """{victim: reason} of the quota targets (None when there is no set of them)."""
    pre = preemptor_of(s, ns, name)
    with unchanged(s):
        found = quota_targets_of(s, pre, find_candidates(s, pre, pre.relevant, set()))
    return None if found is None else {t.candidate.pod.key: t.reason for t in found}


def plan(s, ns="q", name="in"):
    p = workload_info(s, ns, name)
    _, c = s.store.queue_of(p.template)
    with unchanged(s):
        return preemption.plans(s, p, c, assign(s, p, c), sorted(s.nodes), lambda n: s.workloads.room(n, p.uid))


def incoming(cpu, priority=0, queue="q", memory=None):
    return Pod("in", queue).queue("lq").cpu(str(cpu)).memory(memory).priority(priority).created(100).obj()


RECLAIM, WHILE_BORROWING, IN_CQ = IN_COHORT_RECLAMATION, IN_COHORT_RECLAIM_WHILE_BORROWING, IN_CLUSTER_QUEUE


# ---- Kueue's TestHierarchicalPreemptions --------------------------------------------------------------------

def test_preempt_with_hierarchical_advantage():
    """Kueue "preempt with hierarchical advantage":  R -> {C(2) -> q(0), q_borrowing(0)}. q_borrowing uses C's
    2 CPUs; a 2-CPU pod of the same priority in q reclaims them although q itself (nominal 0) must borrow
    from C: the flat rule ("no reclaim while the preemptor would still borrow") gave nothing."""
    s = state(co("r"), co("c", "r", 2), q("q", "c"), q("q-borrowing", "r"),
              running("admitted2", "lq", "2", namespace="q-borrowing", priority=0, created=1).obj(),
              incoming=incoming(2))
    assert targets(s) == {"q-borrowing/admitted2": RECLAIM}
    found = candidates(s)
    assert [c.variant for c in found] == [H.HIERARCHICAL_RECLAIM]
    assert found[0].lca is s.ledger.quota_tree().cohorts["r"]


def test_avoid_queues_within_nominal_quota():
    """Kueue "avoid queues within nominal quota" (issue 9 point 2, first case): R -> {C(2) -> q(0), q_nominal(2),
    q_borrowing(0)}. q_nominal's pod (priority -10) is lower than the preemptor's but within its queue's
    nominal quota: no candidate. q_borrowing's (same priority, Any) goes."""
    s = state(co("r"), co("c", "r", 2), q("q", "c"), q("q-nominal", "r", 2), q("q-borrowing", "r"),
              running("admitted1", "lq", "2", namespace="q-nominal", priority=-10, created=1).obj(),
              running("admitted2", "lq", "2", namespace="q-borrowing", priority=0, created=1).obj(),
              incoming=incoming(2))
    assert [c.pod.key for c in candidates(s)] == ["q-borrowing/admitted2"]
    assert targets(s) == {"q-borrowing/admitted2": RECLAIM}


def test_preempt_multiple_with_hierarchical_advantage():
    """Kueue "preempt multiple with hierarchical advantage": q_borrowing's two 1-CPU pods have priorities 1 and 2,
    above the preemptor's 0: with reclaimWithinCohort Any both go, C's quota being q's to reclaim."""
    s = state(co("r"), co("c", "r", 2), q("q", "c"), q("q-borrowing", "r"),
              running("admitted1", "lq", "1", namespace="q-borrowing", priority=1, created=1).obj(),
              running("admitted2", "lq", "1", namespace="q-borrowing", priority=2, created=1).obj(),
              incoming=incoming(2))
    assert targets(s) == {"q-borrowing/admitted1": RECLAIM, "q-borrowing/admitted2": RECLAIM}


def test_preempt_in_cohort_and_own_cq():
    """Kueue "preempt in cohort and own CQ": R(0) -> C(3) -> {q(0), q_same_cohort(0)}; q has borrowWithinCohort
    LowerPriority with maxPriorityThreshold 0. The preemptor (priority 1, 2 CPUs) has no advantage over its
    sibling (C cannot hold it): q_same_cohort's priority-0 pod goes while q borrows, its priority-1 pod is
    above the threshold, so q's own priority -1 pod goes too. (Kueue's case charges the preemptible pod 2 of
    C's 3 CPUs, over C's quota; here it uses 1, C is exactly full, same outcome.)"""
    s = state(co("r"), co("c", "r", 3), q("q", "c", policy=BWC0), q("q-same-cohort", "c"),
              running("not-preemptible", "lq", "1", namespace="q-same-cohort", priority=1, created=1).obj(),
              running("preemptible", "lq", "1", namespace="q-same-cohort", priority=0, created=1).obj(),
              running("own-queue", "lq", "1", namespace="q", priority=-1, created=1).obj(), incoming=incoming(2, 1))
    assert targets(s) == {"q-same-cohort/preemptible": WHILE_BORROWING, "q/own-queue": IN_CQ}


def test_prefer_to_preempt_hierarchical_candidate():
    """Kueue "prefer to preempt hierarchical candidate": R(0) -> {C(2) -> q(0), q_borrowing(0)}. q's own pod
    (priority -2) is lower than q_borrowing's (1), but the candidate under the hierarchical advantage comes
    first in Kueue's candidate iterator, and alone frees enough."""
    s = state(co("r"), co("c", "r", 2), q("q", "c"), q("q-borrowing", "r"),
              running("admitted-borrowing", "lq", "1", namespace="q-borrowing", priority=1, created=1).obj(),
              running("admitted-same-queue", "lq", "1", namespace="q", priority=-2, created=1).obj(),
              incoming=incoming(1))
    assert [c.pod.key for c in candidates(s)] == ["q-borrowing/admitted-borrowing", "q/admitted-same-queue"]
    assert targets(s) == {"q-borrowing/admitted-borrowing": RECLAIM}


def test_forced_to_preempt_priority_candidate():
    """Kueue "forced to preempt priority candidate": R(0) -> {C(2) -> {q(0), q_same_cohort(0)}, q_nominal(2)}.
    q_same_cohort uses C's 2 CPUs; with borrowWithinCohort (threshold 0) its priority -1 pod goes while q
    borrows from C; q_nominal's pod (-10) is within its nominal quota and stays."""
    s = state(co("r"), co("c", "r", 2), q("q", "c", policy=BWC0), q("q-nominal", "r", 2), q("q-same-cohort", "c"),
              running("admitted-nominal", "lq", "2", namespace="q-nominal", priority=-10, created=1).obj(),
              running("admitted-same-cohort", "lq", "2", namespace="q-same-cohort", priority=-1, created=1).obj(),
              incoming=incoming(2))
    assert targets(s) == {"q-same-cohort/admitted-same-cohort": WHILE_BORROWING}


def test_incoming_workload_fits_in_cq_nominal_quota():
    """Kueue "incoming workload fits in CQ nominal quota": R(0) -> {C(2) -> {q(4), q_same_cohort(0)},
    q_borrowing(0)}. q's request fits its own nominal 4, so it has the advantage at every level: both
    borrowers go although their priority (10) is far above the preemptor's (0)."""
    s = state(co("r"), co("c", "r", 2), q("q", "c", 4), q("q-borrowing", "r"), q("q-same-cohort", "c"),
              running("admitted-borrowing", "lq", "3", namespace="q-borrowing", priority=10, created=1).obj(),
              running("admitted-same-cohort", "lq", "3", namespace="q-same-cohort", priority=10, created=1).obj(),
              incoming=incoming(4))
    assert targets(s) == {"q-borrowing/admitted-borrowing": RECLAIM, "q-same-cohort/admitted-same-cohort": RECLAIM}


def test_preempt_hierarchical_and_priority_candidates():
    """Kueue "preempt hierarchical and priority candidates": R(1) -> {C(4) -> {q(0), q_same_cohort(0)},
    q_borrowing(0)}; q reclaims with LowerPriority and borrowWithinCohort (threshold 0). C holds the 3 CPUs:
    q_borrowing's lower pod goes by the advantage, its priority-1 pod never (LowerPriority); the last CPU
    comes from q_same_cohort while borrowing."""
    policy = {**BWC0, "reclaimWithinCohort": "LowerPriority"}
    s = state(co("r", cpu=1), co("c", "r", 4), q("q", "c", policy=policy), q("q-borrowing", "r"),
              q("q-same-cohort", "c"),
              running("admitted-borrowing", "lq", "2", namespace="q-borrowing", priority=-1, created=1).obj(),
              running("admitted-same-cohort-preemptible", "lq", "1", namespace="q-same-cohort",
                      priority=-1, created=1).obj(),
              running("admitted-borrowing-not-preemptible", "lq", "2", namespace="q-borrowing",
                      priority=1, created=1).obj(),
              incoming=incoming(3))
    assert targets(s) == {"q-borrowing/admitted-borrowing": RECLAIM,
                          "q-same-cohort/admitted-same-cohort-preemptible": WHILE_BORROWING}


def test_preempt_hierarchical_candidates_and_inside_cq():
    """Kueue "preempt hierarchical candidates and inside CQ": as above, the last CPU from q's own pod."""
    policy = {**BWC0, "reclaimWithinCohort": "LowerPriority"}
    s = state(co("r", cpu=1), co("c", "r", 4), q("q", "c", policy=policy), q("q-borrowing", "r"),
              q("q-same-cohort", "c"),
              running("admitted-borrowing", "lq", "2", namespace="q-borrowing", priority=-1, created=1).obj(),
              running("admitted-same-queue-preemptible", "lq", "1", namespace="q", priority=-1, created=1).obj(),
              running("admitted-borrowing-not-preemptible", "lq", "2", namespace="q-borrowing",
                      priority=1, created=1).obj(),
              incoming=incoming(3))
    assert targets(s) == {"q-borrowing/admitted-borrowing": RECLAIM, "q/admitted-same-queue-preemptible": IN_CQ}


def test_reclaim_nominal_quota_from_lowest_priority_workload_excluding_non_borrowing():
    """Kueue "reclaim nominal quota from lowest priority workload, excluding non-borrowing": R(0) -> {C(3) ->
    q(0), q_borrowing(0), q_nominal(2)}: the lowest of q_borrowing's pods (8), never q_nominal's (-2)."""
    s = state(co("r"), co("c", "r", 3), q("q", "c"), q("q-borrowing", "r"), q("q-nominal", "r", 2),
              running("prio-8", "lq", "1", namespace="q-borrowing", priority=8, created=1).obj(),
              running("prio-9", "lq", "1", namespace="q-borrowing", priority=9, created=1).obj(),
              running("prio-10", "lq", "1", namespace="q-borrowing", priority=9, created=1).obj(),
              running("admitted-nominal", "lq", "2", namespace="q-nominal", priority=-2, created=1).obj(),
              incoming=incoming(1))
    assert targets(s) == {"q-borrowing/prio-8": RECLAIM}


def test_infeasible_preemption_all_available_workloads_in_pruned_subtrees():
    """Kueue "infeasible preemption all available workloads in pruned subtrees": R -> {C(2) -> {q(0),
    q_same_cohort(0)}, C_other(2) -> q_other(0)}. q_other borrows only inside C_other, which is within its
    quota: never entered. q_same_cohort's pod has the preemptor's priority and no advantage: nothing."""
    s = state(co("r"), co("c", "r", 2), co("c-other", "r", 2), q("q-other", "c-other"), q("q", "c"),
              q("q-same-cohort", "c"),
              running("other-1", "lq", "1", namespace="q-other", priority=-10, created=1).obj(),
              running("other-2", "lq", "1", namespace="q-other", priority=-10, created=1).obj(),
              running("admitted-same-cohort", "lq", "2", namespace="q-same-cohort", priority=0, created=1).obj(),
              incoming=incoming(2))
    assert "q-other/other-1" not in [c.pod.key for c in candidates(s)]
    assert targets(s) is None
    found, why = plan(s)
    assert found == [] and why


def test_hierarchical_preemption_with_multiple_resources():
    """Kueue "hiearchical preemption with multiple resources": R(3 CPU, 0Gi) -> {C(4 CPU, 4Gi) -> {q(0),
    q_same_cohort(0)}, q_borrowing(0)}. Memory is short; C can hold the request, so q_borrowing (memory
    borrowed from C) goes; q_same_cohort (no advantage, equal priority) stays."""
    gi = 2**30
    s = state(Cohort("r").resource_group(FlavorQuotas("default-flavor").resource("cpu", "3").resource("memory", "0"))
                  .obj(),
              Cohort("c").parent("r")
                  .resource_group(FlavorQuotas("default-flavor").resource("cpu", "4").resource("memory", "4Gi")).obj(),
              q("q", "c", memory="0"), q("q-borrowing", "r", memory="0"), q("q-same-cohort", "c", memory="0"),
              running("admitted-borrowing", "lq", "3", namespace="q-borrowing",
                      priority=0, created=1).memory("1Gi").obj(),
              running("admitted-same-cohort", "lq", "1", namespace="q-same-cohort",
                      priority=-2, created=1).memory("3Gi").obj(),
              incoming=incoming(2, -2, memory="1Gi"))
    assert preemptor_of(s, "q", "in").needs == {MEM}
    assert s.ledger.quota_node("q-borrowing").usage[MEM] == gi
    assert targets(s) == {"q-borrowing/admitted-borrowing": RECLAIM}


def test_respect_lending_limits():
    """Kueue "respect lending limits" (issue 9 point 2, second case): R(0) -> {C(2) -> q(3, lendingLimit 2),
    q_borrowing(0)}. q keeps 1 CPU for itself and lends 2, so C's subtree holds 2 + 2 = 4, all used by
    q_borrowing. A 5-CPU pod of lower priority (-2 against 0) fits in q's 1 kept + C's 4 and reclaims it,
    although 5 is above q's nominal 3 (the request fits a Cohort below the root)."""
    s = state(co("r"), co("c", "r", 2), q("q", "c", 3, lending=2), q("q-borrowing", "r"),
              running("admitted-borrowing", "lq", "4", namespace="q-borrowing", priority=0, created=1).obj(),
              incoming=incoming(5, -2))
    node_q = s.ledger.quota_node("q")
    assert (node_q.guaranteed(FR), s.tree.cohorts["c"].subtree[FR], available(node_q, FR)) == (CPU, 4 * CPU, CPU)
    assert H.may_reclaim_in_hierarchy(node_q, FR, 5 * CPU)
    assert targets(s) == {"q-borrowing/admitted-borrowing": RECLAIM}
    found, why = plan(s)
    assert why == "" and [t.candidate.pod.key for t in found[0].targets] == ["q-borrowing/admitted-borrowing"]


def test_lending_limit_below_caps_what_a_subtree_holds():
    """Lending limits on every level: as above but C too has a lendingLimit (3 of its subtree's 4), so it
    keeps 1 CPU from R, and q_borrowing uses the 3 R holds. q's 5-CPU pod sees 1 kept by q + 1 kept by C
    now, and fits C's subtree (1 + 1 + the 3 lent) once q_borrowing is gone."""
    s = state(co("r"),
              Cohort("c").parent("r").resource_group(FlavorQuotas("default-flavor").resource("cpu", "2", lending="3"))
                  .obj(),
              q("q", "c", 3, lending=2), q("q-borrowing", "r"),
              running("admitted-borrowing", "lq", "3", namespace="q-borrowing", priority=0, created=1).obj(),
              incoming=incoming(5, -2))
    assert (s.tree.cohorts["c"].guaranteed(FR), s.tree.cohorts["r"].subtree[FR]) == (CPU, 3 * CPU)
    assert available(s.ledger.quota_node("q"), FR) == 2 * CPU
    assert targets(s) == {"q-borrowing/admitted-borrowing": RECLAIM}


def test_reclaim_in_complex_hierarchy():
    """Kueue "reclaim in complex hierarchy": r -> {c11 -> {c21 -> {c31 -> q5, c32 -> q4}, c22 -> q3, c23 -> q2},
    c12 -> q1}, every Cohort 4 CPUs, queues 0. q5's 7-CPU pod fits c21, so it has the advantage over
    everything reached above: the lowest first (q2's -10), after which c23 is back within its quota and
    q2's other pod no candidate any more, then q1's -6. q4's pods, reached below the advantage, stay."""
    cohorts = [co("r"), co("c11", "r", 4), co("c12", "r", 4), co("c21", "c11", 4), co("c22", "c11", 4),
               co("c23", "c11", 4), co("c31", "c21", 4), co("c32", "c21", 4)]
    queues = [q("q1", "c12"), q("q2", "c23"), q("q3", "c22"), q("q4", "c32"), q("q5", "c31")]
    pods = [running("b1", "lq", "4", namespace="q1", priority=-6, created=1).obj(),
            running("b2", "lq", "4", namespace="q1", priority=-5, created=1).obj(),
            running("b3", "lq", "4", namespace="q2", priority=-9, created=1).obj(),
            running("b4", "lq", "4", namespace="q2", priority=-10, created=1).obj(),
            running("b5", "lq", "4", namespace="q3", priority=-4, created=1).obj(),
            running("b6", "lq", "3", namespace="q3", priority=-3, created=1).obj(),
            running("b7", "lq", "2", namespace="q4", priority=4, created=1).obj(),
            running("b8", "lq", "3", namespace="q4", priority=2, created=1).obj()]
    s = state(*cohorts, *queues, *pods, incoming=incoming(7, -2, queue="q5"))
    variants = {c.pod.key: c.variant for c in candidates(s, "q5")}
    assert variants["q4/b7"] == variants["q4/b8"] == H.RECLAIM_WITHOUT_BORROWING
    assert {variants[k] for k in variants if not k.startswith("q4/")} == {H.HIERARCHICAL_RECLAIM}
    assert targets(s, "q5") == {"q2/b4": RECLAIM, "q1/b1": RECLAIM}


# ---- the quota arithmetic of the walk (core.hierarchy) ------------------------------------------------------

def test_reclaim_scopes_name_the_level_and_the_advantage():
    """collectCandidatesForHierarchicalReclaim: the sibling under C is reached at C without the advantage
    (C cannot hold the request), q_borrowing at R with it (R can)."""
    s = state(co("r", cpu=1), co("c", "r", 4), q("q", "c"), q("q-borrowing", "r"), q("q-same-cohort", "c"),
              running("b", "lq", "2", namespace="q-borrowing", priority=0, created=1).obj(),
              running("b2", "lq", "2", namespace="q-borrowing", priority=0, created=1).obj(),
              running("sc", "lq", "1", namespace="q-same-cohort", priority=0, created=1).obj(), incoming=incoming(3))
    scopes = H.reclaim_scopes(s.ledger.quota_node("q"), {FR: 3 * CPU}, {FR})
    assert [(x.queue.name, x.lca.name, x.advantage) for x in scopes] == [("q-same-cohort", "c", False),
                                                                          ("q-borrowing", "r", True)]


def test_may_reclaim_in_hierarchy_only_below_the_root():
    """FindHeightOfLowestSubtreeThatFits: a request above the ClusterQueue's nominal quota may preempt when a
    Cohort below the root can hold it, not when only the root could."""
    s = state(co("r", cpu=4), co("c", "r", 2), q("q", "c"), q("q-borrowing", "r"),
              running("b", "lq", "4", namespace="q-borrowing", priority=0, created=1).obj(), incoming=incoming(2))
    node_q = s.ledger.quota_node("q")
    assert H.may_reclaim_in_hierarchy(node_q, FR, 2 * CPU)
    assert not H.may_reclaim_in_hierarchy(node_q, FR, 3 * CPU)


def test_flat_cohort_keeps_the_classic_rule():
    """Without a sub-cohort nothing changes (seed 000 经典抢占): a queue at its nominal quota that would borrow
    reclaims from no other queue, whatever its priority; the borrower stays and the pod waits."""
    s = state(co("r"), q("q", "r", 2), q("q-borrowing", "r"), q("q-lender", "r", 2),
              running("own", "lq", "2", namespace="q", priority=0, created=1).obj(),
              running("b", "lq", "2", namespace="q-borrowing", priority=-5, created=1).obj(), incoming=incoming(2, 10))
    assert targets(s) == {"q/own": IN_CQ}
    assert [c.variant for c in candidates(s) if c.cluster_queue == "q-borrowing"] == [H.RECLAIM_WITHOUT_BORROWING]


# ---- preemption fences on top (YuniKorn, seed 002 抢占范围) -------------------------------------------------------

def fenced(obj: dict) -> dict:
    obj["metadata"].setdefault("annotations", {})[FENCE] = "true"
    return obj


def test_a_fence_stops_hierarchical_reclaim_going_out():
    """seed 002 law 7 "任务不能抢占其抢占范围外的任务": with C fenced, q's pod may not reclaim C's quota from
    q_borrowing outside C, hierarchical advantage or not: no candidate, nothing is evicted."""
    s = state(co("r"), fenced(co("c", "r", 2)), q("q", "c"), q("q-borrowing", "r"),
              running("admitted2", "lq", "2", namespace="q-borrowing", priority=0, created=1).obj(),
              incoming=incoming(2))
    assert candidates(s) == []
    assert targets(s) is None
    found, why = plan(s)
    assert found == [] and "no candidate" in why and "preemption fence on Cohort c" in why


def test_a_fence_never_stops_a_reclaim_coming_in():
    """seed 002 抢占范围 "它阻止向外 ... 移动,但不会阻止向内(或向下)移动": R -> {C(2) -> q(0), F(fenced) -> fb(0)}.
    fb, inside the fence, borrows C's 2 CPUs; q's pod, outside it, reclaims them."""
    s = state(co("r"), co("c", "r", 2), q("q", "c"), fenced(co("f", "r")), q("fb", "f"),
              running("fb-1", "lq", "2", namespace="fb", priority=0, created=1).obj(), incoming=incoming(2))
    assert targets(s) == {"fb/fb-1": RECLAIM}
    found, why = plan(s)
    assert why == "" and [t.candidate.pod.key for t in found[0].targets] == ["fb/fb-1"]


def test_a_fence_keeps_a_reclaim_inside_it():
    """The fence bounds the walk, not the tree below it: R(2) -> {F(2) -> {q(2), sib(0)}, other(0)}. sib uses
    q's and F's quota, other R's; q's request fits its own nominal, so it has the advantage over both.
    Unfenced, other's pod (lowest priority) goes; with F fenced, sib's (inside), never other's (outside)."""
    def tree(f):
        return state(co("r", cpu=2), f, q("q", "f", 2), q("sib", "f"), q("other", "r"),
                     running("sib-1", "lq", "2", namespace="sib", priority=-1, created=1).obj(),
                     running("other-1", "lq", "2", namespace="other", priority=-5, created=1).obj(),
                     running("sib-0", "lq", "2", namespace="sib", priority=-1, created=0).obj(), incoming=incoming(2))
    assert targets(tree(co("f", "r", 2))) == {"other/other-1": RECLAIM}
    s = tree(fenced(co("f", "r", 2)))
    assert sorted(c.pod.key for c in candidates(s)) == ["sib/sib-0", "sib/sib-1"]
    assert targets(s) == {"sib/sib-1": RECLAIM}
