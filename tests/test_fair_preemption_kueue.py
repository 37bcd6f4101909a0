"""Fair-sharing preemption decided as Kueue's own tests decide it (issue 34, decisions 1 and 2).

Each case is a translation of a case of Kueue's TestFairPreemptions
(pkg/scheduler/preemption/preemption_fair_test.go, kubernetes-sigs/kueue main): the same quota tree,
weights, workloads (one pod each, priority as given, 1 CPU = Kueue's unit workload) and incoming
workload, and the same preempted set with the same reasons. Kueue runs these cases with its default
strategies (LessThanOrEqualToFinalShare, then LessThanInitialShare) and its default feature gates
(FairSharingPreemptWithinNominal on).
"""
from __future__ import annotations

import pytest

from app.config import Configuration
from app.core.admission import assign
from app.core.dominant_share import MAX_SHARE, dominant_resource_share
from app.core.preemption.candidates import find_candidates
from app.core.preemption.quota_targets import quota_targets
from app.core.preemption.targets import Preemptor
from app.core.resource_node import available
from app.core.rules import IN_CLUSTER_QUEUE, IN_COHORT_FAIR_SHARING, IN_COHORT_RECLAMATION
from app.observe.status import cluster_queue_statuses
from app.observe.views import cluster_queue_view

from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor
from helpers import all_usage, make_state, workload_info

STRATEGIES = {
    "default": ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
    "final-share": ("LessThanOrEqualToFinalShare",),
    "initial-share": ("LessThanInitialShare",),
}


def queue(name: str, cpu, cohort: str, weight=None, reclaim: str | None = None, within: str | None = None) -> dict:
    cq = ClusterQueue(name).cohort(cohort).resource_group(FlavorQuotas("default-flavor").resource("cpu", str(cpu)))
    if weight is not None:
        cq.spec(fairSharing={"weight": weight})
    policy = {k: v for k, v in (("reclaimWithinCohort", reclaim), ("withinClusterQueue", within)) if v}
    if policy:
        cq.preemption(policy)
    return cq.obj()


def cohort(name: str, cpu=None, parent: str | None = None, weight=None) -> dict:
    c = Cohort(name).parent(parent)
    if cpu is not None:
        c.resource_group(FlavorQuotas("default-flavor").resource("cpu", str(cpu)))
    if weight is not None:
        c.spec(fairSharing={"weight": weight})
    return c.obj()


def tree(queues: list[dict], cohorts: list[dict], running: dict[str, list[tuple[str, int]]],
         incoming: tuple[str, str, int], strategies=STRATEGIES["default"]):
    """The quota tree, a LocalQueue per ClusterQueue (namespace = queue name), the running pods
    {queue: [(name, priority[, CPUs, 1 if not given])]}, and the incoming pod."""
    objects = [ResourceFlavor("default-flavor").obj(), Node("n1").cpu("1000").obj(), *cohorts, *queues]
    for q in queues:
        name = q["metadata"]["name"]
        objects.append(LocalQueue("lq", name).cluster_queue(name).obj())
    for q, pods in running.items():     # the first listed is the most recently admitted (Kueue: the lowest UID)
        objects += [Pod(name, q).queue("lq").cpu(str(cpu)).priority(prio).created(50 - i).node("n1").obj()
                    for i, (name, prio, cpu) in enumerate((*p, 1)[:3] for p in pods)]
    q, name, cpu = incoming
    objects.append(Pod(name, q).queue("lq").cpu(str(cpu)).created(100).obj())
    return make_state(*objects, config=Configuration(fair_sharing=True, preemption_strategies=tuple(strategies)))


def preempted(state, ns: str, name: str) -> dict[str, str] | None:
    """{victim: reason} for the pending pod's quota, as core.preemption chooses it; the state is left as found."""
    p = workload_info(state, ns, name)
    _, cq = state.store.queue_of(p.template)
    a = assign(state, p, cq)
    pre = Preemptor(p, cq, state.ledger.quota_node(cq.name), a.usage, set(a.flavors.values()))
    before = all_usage(state)
    needs = {fr for fr, v in pre.usage.items() if v > available(pre.node, fr)}
    targets = quota_targets(state, pre, find_candidates(state, pre, needs, set()))
    assert all_usage(state) == before
    return None if targets is None else {t.candidate.pod.name: t.reason for t in targets}


# ---- decision 1: a zero fair-sharing weight within nominal quota ------------------------------------------------

@pytest.mark.parametrize("strategies", STRATEGIES)
def test_cq_with_zero_weight_can_reclaim_nominal_quota(strategies):
    """Kueue preemption_fair_test.go TestFairPreemptions "cq with zero weight can reclaim nominal quota": a
    (1 CPU, fairSharing.weight 0, reclaimWithinCohort Any) and b (0 CPUs, weight 1) in Cohort ROOT; b runs b1
    (1 CPU, borrowed from a). a1 (1 CPU) is within a's nominal quota, so a borrows nothing and its share is 0
    (Kueue's dominantResourceShare, whatever the weight), and FairSharingPreemptWithinNominal reclaims b1 as
    InCohortReclamation. Quotient gave a weight-0 queue the maximum share even within its quota: no victim."""
    s = tree([queue("a", 1, "ROOT", weight="0", reclaim="Any"), queue("b", 0, "ROOT", weight="1")], [],
             {"b": [("b1", 0)]}, ("a", "a1", 1), STRATEGIES[strategies])
    assert preempted(s, "a", "a1") == {"b1": IN_COHORT_RECLAMATION}


@pytest.mark.parametrize("strategies", STRATEGIES)
def test_cohort_with_zero_weight_can_reclaim_nominal_quota(strategies):
    """Kueue preemption_fair_test.go TestFairPreemptions "cohort with zero weight can reclaim nominal quota":
    Cohort A (1 CPU, weight 0) under ROOT holds a (0 CPUs, weight 0, reclaimWithinCohort Any); b (0 CPUs) in
    ROOT runs b1 on A's CPU. a1 makes a borrow (no within-nominal shortcut), but A, the node compared with b,
    stays within its quota: share 0, not the maximum, so b1 goes for fair sharing (0 <= b's 0 after)."""
    s = tree([queue("a", 0, "A", weight="0", reclaim="Any"), queue("b", 0, "ROOT", weight="1")],
             [cohort("A", 1, "ROOT", weight="0")], {"b": [("b1", 0)]}, ("a", "a1", 1), STRATEGIES[strategies])
    assert preempted(s, "a", "a1") == {"b1": IN_COHORT_FAIR_SHARING}


def test_zero_weight_share_is_zero_within_quota_and_the_maximum_when_borrowing():
    """Kueue fair_sharing.go dominantResourceShare / DRS.PreciseWeightedShare: a node that borrows nothing
    has share 0 whatever its weight; a weight-0 node that borrows has the largest share there is (the view
    and status show "max", the metric MaxInt64, as Kueue's roundedWeightedShare)."""
    s = tree([queue("a", 1, "ROOT", weight="0", reclaim="Any"), queue("b", 0, "ROOT", weight="0")], [],
             {"b": [("b1", 0)]}, ("a", "a1", 1))
    assert dominant_resource_share(s.ledger.quota_node("a"), 0.0) == (0, "")
    assert dominant_resource_share(s.ledger.quota_node("b"), 0.0) == (MAX_SHARE, "cpu")
    # what an admin reads: the view (/debug/queues, the UI) and the ClusterQueue status Quotient writes
    assert cluster_queue_view(s, "a")["fairSharing"] == {"weight": 0.0, "share": 0, "dominantResource": None}
    assert cluster_queue_view(s, "b")["fairSharing"] == {"weight": 0.0, "share": "max", "dominantResource": "cpu"}
    statuses = cluster_queue_statuses(s)
    assert statuses["a"]["status"]["fairSharing"] == {"weightedShare": 0}
    assert statuses["b"]["status"]["fairSharing"] == {"weightedShare": MAX_SHARE}


# ---- decision 2: the target ClusterQueue chosen from the root down ----------------------------------------------

def hierarchical_state(strategies=STRATEGIES["default"]):
    """Kueue's "hierarchical preemption" tree, (usage, quota, subtree quota) per node:

                   ROOT(20,5,20)
                /       |        \\
         LEFT(5,5,7)  c(5,1,1)   RIGHT(10,5,7)
          /      \\               /      \\
      a(0,1,1)  b(5,1,1)      d(5,1,1)   e(5,1,1)

    a and LEFT have fairSharing.weight 2, e 0.99; b, c, d and e run five pods each, priorities 1..5."""
    return tree([queue("a", 1, "LEFT", weight="2", reclaim="Any"), queue("b", 1, "LEFT"), queue("c", 1, "ROOT"),
                 queue("d", 1, "RIGHT"), queue("e", 1, "RIGHT", weight="0.99")],
                [cohort("ROOT", 5), cohort("LEFT", 5, "ROOT", weight="2"), cohort("RIGHT", 5, "ROOT")],
                {q: [(f"{q}{i}", i) for i in range(1, 6)] for q in "bcde"}, ("a", "unit", 5), strategies)


def test_hierarchical_preemption():
    """Kueue preemption_fair_test.go TestFairPreemptions "hierarchical preemption": a's 5-CPU workload is
    placed by walking down from ROOT to the child with the highest weighted share at each level (Kueue's
    TargetClusterQueueOrdering): c (200) first, then RIGHT over c on a tie, and e (weight 0.99) over d in it,
    then c again; then d, e and c fail LessThanOrEqualToFinalShare (a pod less would leave RIGHT, or c, below
    LEFT's 75), and b, compared with a itself inside LEFT (100), gives two. Victims b1, b2, c1, c2, e1, all for fair sharing. Quotient compared shares only among the
    children of the lowest common ancestor and took b's first (b and c both 200, b by name)."""
    s = hierarchical_state()
    assert preempted(s, "a", "unit") == {v: IN_COHORT_FAIR_SHARING for v in ("b1", "b2", "c1", "c2", "e1")}


# ---- the other zero-weight cases of TestFairPreemptions ----------------------------------------------------------

def test_zero_weight_borrowing_preemptor_cannot_preempt_from_a_borrowing_cq_with_a_non_zero_weight():
    """Kueue preemption_fair_test.go TestFairPreemptions "zero weight borrowing preemptor cannot preempt from a
    borrowing CQ with a non-zero weight": a (1 CPU, weight 0) runs a1, b (1 CPU, weight 1) runs b1 and b2; a's
    next pod makes a borrow: its share is the highest there is, above b's whatever b loses. No target."""
    s = tree([queue("a", 1, "all", weight="0", reclaim="Any"), queue("b", 1, "all", weight="1")], [],
             {"a": [("a1", 0)], "b": [("b1", 0), ("b2", 0)]}, ("a", "a_incoming", 1))
    assert preempted(s, "a", "a_incoming") is None


@pytest.mark.parametrize("weight", ["0", "1"])
def test_borrowing_preemptor_preempts_from_a_borrowing_cq_of_the_same_weight(weight):
    """Kueue preemption_fair_test.go TestFairPreemptions "zero weight borrowing preemptor can preempt from a
    borrowing CQ which also has zero weight" and "non-zero weight borrowing preemptor preempts from a borrowing
    CQ": Cohort all (3 CPUs), a (1 CPU, reclaimWithinCohort Any) and b (0 CPUs), both of that weight; b runs
    b1..b3. a_incoming (2 CPUs) makes a borrow 1 (ratio 250 of 4 lendable); b borrows 3 (750), 500 after losing
    one: allowed. Two weight-0 borrowers compare by their unweighted ratios (Kueue's CompareDRS)."""
    s = tree([queue("a", 1, "all", weight=weight, reclaim="Any"), queue("b", 0, "all", weight=weight)],
             [cohort("all", 3)], {"b": [("b1", 0), ("b2", 0), ("b3", 0)]}, ("a", "a_incoming", 2))
    assert preempted(s, "a", "a_incoming") == {"b1": IN_COHORT_FAIR_SHARING}


def test_candidates_skipped_by_the_first_strategy_are_still_available_to_the_second_strategy():
    """Kueue preemption_fair_test.go TestFairPreemptions "candidates skipped by the first strategy are still
    available to the second strategy": ROOT holds Cohort A (1 CPU, weight 0) with p (2 CPUs, the preemptor) and
    y (2 CPUs), and x (1 CPU). p runs p1 (2), y y1 and y2 (2 each), x x1 and x2. Against x, p is compared as A,
    which borrows on weight 0: no x candidate passes the first strategy. y1 goes (p against y inside A), A then
    borrows nothing, and the second strategy takes x1 from what the first passed over."""
    s = tree([queue("p", 2, "A", weight="1", reclaim="Any"), queue("y", 2, "A", weight="1"),
              queue("x", 1, "ROOT", weight="1")], [cohort("A", 1, "ROOT", weight="0")],
             {"p": [("p1", 0, 2)], "y": [("y1", 0, 2), ("y2", 0, 2)], "x": [("x1", 0), ("x2", 0)]},
             ("p", "p_incoming", 1))
    assert preempted(s, "p", "p_incoming") == {"y1": IN_COHORT_FAIR_SHARING, "x1": IN_COHORT_FAIR_SHARING}


# ---- the walk down the tree: what it never enters ----------------------------------------------------------------

@pytest.mark.parametrize("right_cpu,b1,reclaim,incoming", [(1, ("b1", -1, 1), "Any", 5),
                                                           (3, ("b1", 100, 4), "LowerPriority", 4)])
def test_preemption_within_the_cluster_queue_when_the_other_side_is_protected(right_cpu, b1, reclaim, incoming):
    """Kueue preemption_fair_test.go TestFairPreemptions "borrowing cq in non-borrowing cohort is protected"
    (RIGHT 1 CPU, b1 1 CPU: RIGHT borrows nothing, so b, though borrowing, is never reached) and "forced to
    preempt within clusterqueue because borrowing workload too important" (RIGHT 3 CPUs, b1 4 CPUs of priority
    100, reclaimWithinCohort LowerPriority: b1 may not go): a (5 CPUs, weight 10) runs a1..a3 (priority -1);
    the incoming workload takes a's own three."""
    s = tree([queue("a", 5, "ROOT", weight="10", reclaim=reclaim, within="LowerPriority"),
              queue("b", 0, "RIGHT", weight="0.1")], [cohort("ROOT"), cohort("RIGHT", right_cpu, "ROOT", weight="0.1")],
             {"a": [("a1", -1), ("a2", -1), ("a3", -1)], "b": [b1]}, ("a", "unit", incoming))
    assert preempted(s, "a", "unit") == {v: IN_CLUSTER_QUEUE for v in ("a1", "a2", "a3")}


def test_deep_preemption():
    """Kueue preemption_fair_test.go TestFairPreemptions "deep preemption": ROOT holds A, B, C, each three
    Cohorts deep; a (0 CPUs) sits in AAA, b (0 CPUs) in BBB, and Cohort CCCC gives the tree's one CPU. b runs
    b1 on it. A (weight 1.01) is compared with B (0.99) just below ROOT: b1 goes for a1."""
    chain = [cohort("ROOT")]
    for top, weight in (("A", "1.01"), ("B", "0.99"), ("C", None)):
        names = [top, top * 2, top * 3] + ([top * 4] if top == "C" else [])
        for i, name in enumerate(names):
            chain.append(cohort(name, 1 if name == "CCCC" else None, names[i - 1] if i else "ROOT",
                                weight=weight if i == 0 else None))
    s = tree([queue("a", 0, "AAA", reclaim="Any"), queue("b", 0, "BBB")], chain, {"b": [("b1", 0)]}, ("a", "a1", 1))
    assert preempted(s, "a", "a1") == {"b1": IN_COHORT_FAIR_SHARING}
