"""Who goes first for a cohort tree's shared quota (app.core.borrowing, admission.served_first and
admission.reserved_for_heads): borrowing level before priority and age (issue 9 point 3), and the quota a
blocked StrictFIFO head keeps (issue 9 point 4).

Kueue sources followed: pkg/scheduler/scheduler.go (makeClassicalIterator sorts the heads on
assignment.Borrows(), the borrowing level, before priority and timestamp; reserveCapacityForUnreclaimablePreempt
and quotaResourcesToReserve), pkg/scheduler/preemption/classical FindHeightOfLowestSubtreeThatFits /
getNodeHeight, and preemption.CanAlwaysReclaim (reclaimWithinCohort: Any).
"""
from app.core.admission import decide
from app.core.borrowing import borrowing_level, resources_to_reserve, subtree_height

from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import CPU, all_usage, apply, decide_pod, delete, make_state, refused_by, workload_info

FR = ("default-flavor", "cpu")



# ---- point 3: borrowing level -----------------------------------------------------------------------------

def tree_state(*extra):
    """root → {c → {near (0 CPU), idle (2 CPUs)}, far (2 CPUs, used by a running pod)}.

    c's 2 idle CPUs are the only free quota of the tree: near borrows them from c (level 1, the height of c);
    far can reach them only through the root (level 2, the height of root)."""
    return make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
                      Namespace("team-near").obj(), Namespace("team-far").obj(), Namespace("team-idle").obj(),
                      Cohort("root").obj(), Cohort("c").parent("root").obj(),
                      ClusterQueue("near").cohort("c")
                          .resource_group(FlavorQuotas("default-flavor").resource("cpu", "0")).obj(),
                      ClusterQueue("idle").cohort("c")
                          .resource_group(FlavorQuotas("default-flavor").resource("cpu", "2")).obj(),
                      ClusterQueue("far").cohort("root")
                          .resource_group(FlavorQuotas("default-flavor").resource("cpu", "2")).obj(),
                      LocalQueue("lq", "team-near").cluster_queue("near").obj(),
                      LocalQueue("lq", "team-idle").cluster_queue("idle").obj(),
                      LocalQueue("lq", "team-far").cluster_queue("far").obj(),
                      Pod("far-running", "team-far").queue("lq").cpu("2").node("n1").obj(), *extra)


def test_borrowing_level_is_the_height_of_the_lowest_subtree_that_fits():
    """Kueue FindHeightOfLowestSubtreeThatFits / getNodeHeight: 0 within nominal quota; else the height of the
    nearest Cohort whose subtree holds the request (a Cohort of ClusterQueues is 1, its parent 2); the root when
    none does."""
    s = tree_state()
    assert subtree_height(s.tree.cohorts["c"]) == 1
    assert subtree_height(s.tree.cohorts["root"]) == 2
    idle = s.ledger.quota_node("idle")
    assert borrowing_level(idle, {FR: 2 * CPU}).height == 0
    near = borrowing_level(s.ledger.quota_node("near"), {FR: 2 * CPU})
    assert (near.height, near.cohort) == (1, "c")
    far = borrowing_level(s.ledger.quota_node("far"), {FR: 2 * CPU})
    assert (far.height, far.cohort) == (2, "root")
    beyond = borrowing_level(s.ledger.quota_node("near"), {FR: 3 * CPU})      # c cannot hold it: the root would
    assert (beyond.height, beyond.cohort) == (2, "root")


def test_pod_borrowing_from_its_parent_cohort_goes_before_older_higher_priority_pod_borrowing_from_root():
    """Kueue scheduler_test.go hierarchical-cohort ordering (makeClassicalIterator: borrowing level, then priority,
    then timestamp): the pod that borrows only from its own parent Cohort c is admitted before an older,
    higher-priority pod that would borrow from the root for the same quota."""
    s = tree_state(Pod("far-pending", "team-far").queue("lq").cpu("2").priority(100).obj(),
                   Pod("near-pending", "team-near").queue("lq").cpu("2").priority(0).created(60).obj())
    before = all_usage(s)
    v = decide(s, workload_info(s, "team-far", "far-pending"))
    refused_by(v, "BorrowingLevelOrder", "ClusterQueue far would borrow from cohort root", "team-near/near-pending",
               "borrows only from cohort c")
    assert all_usage(s) == before                        # the virtual charges were taken back
    near = decide(s, workload_info(s, "team-near", "near-pending"))
    assert near.admit is True, near.reason
    # once near's pod runs, the quota is gone for far, which now simply does not fit
    apply(s, Pod("near-pending", "team-near").queue("lq").cpu("2").priority(0).created(60).node("n1").obj())
    assert decide(s, workload_info(s, "team-far", "far-pending")).rule == "QuotaExceeded"


def test_equal_borrowing_level_does_not_hold_a_borrower_back():
    """Only a lower borrowing level goes first: two pods that both borrow from c compete as before (kube-scheduler's
    own order, priority then age, decides)."""
    s = tree_state(ClusterQueue("near2").cohort("c").resource_group(FlavorQuotas("default-flavor").resource("cpu", "0"))
                       .obj(),
                   Namespace("team-near2").obj(),
                   LocalQueue("lq", "team-near2").cluster_queue("near2").obj(),
                   Pod("other-near", "team-near2").queue("lq").cpu("2").obj())
    assert decide_pod(s, Pod("near-pending", "team-near").queue("lq").cpu("2").created(60).obj()).admit is True


def test_borrower_from_root_proceeds_when_the_nearer_pod_leaves_enough():
    """The nearer pod only goes first for quota both need: a 1-CPU pod in near leaves c one CPU for far."""
    s = tree_state(Pod("near-small", "team-near").queue("lq").cpu("1").created(60).obj())
    v = decide_pod(s, Pod("far-pending", "team-far").queue("lq").cpu("1").priority(100).obj())
    assert v.admit is True, v.reason
    s = tree_state(Pod("near-small", "team-near").queue("lq").cpu("1").created(60).obj())
    refused_by(decide_pod(s, Pod("far-big", "team-far").queue("lq").cpu("2").priority(100).obj()),
               "BorrowingLevelOrder", "team-near/near-small")


# ---- point 4: a blocked StrictFIFO head keeps the cohort's room -------------------------------------------

def reserve_state(strategy="StrictFIFO", reclaim="LowerPriority", a_limit=None, *extra):
    """cq-a (6 CPUs, StrictFIFO) and cq-b (2 CPUs) in cohort co (8 CPUs). a-run (4 CPUs) and b-run (2 CPUs) run;
    a-head (6 CPUs) is cq-a's head: it does not fit (2 CPUs free) and has no candidates (a-run has its
    priority, b-run is within cq-b's nominal quota)."""
    quota = {"cpu": "6"} if a_limit is None else {"cpu": ("6", a_limit, None)}
    return make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(), Namespace("team-b").obj(),
                      ClusterQueue("cq-a").cohort("co")
                          .resource_group(FlavorQuotas("default-flavor").resources_from(quota))
                      .queueing_strategy(strategy)
                      .preemption({"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": reclaim}).obj(),
                      ClusterQueue("cq-b").cohort("co")
                          .resource_group(FlavorQuotas("default-flavor").resource("cpu", "2")).obj(),
                      LocalQueue("lq", "team-a").cluster_queue("cq-a").obj(),
                      LocalQueue("lq", "team-b").cluster_queue("cq-b").obj(),
                      Pod("a-run").queue("lq").cpu("4").priority(100).node("n1").obj(),
                      Pod("b-run", "team-b").queue("lq").cpu("2").priority(100).node("n1").obj(),
                      Pod("a-head").queue("lq").cpu("6").priority(100).obj(), *extra)


def test_strict_fifo_head_that_cannot_surely_reclaim_keeps_the_cohort_free_quota():
    """Kueue scheduler.go reserveCapacityForUnreclaimablePreempt (integration test "Reserving Resources in
    Cohort"): the head needs preemption, has no candidates, and cq-a cannot always reclaim (LowerPriority), so
    the 2 free CPUs are kept for it; a borrower of cq-b is refused, naming the head, instead of being admitted
    now and evicted when a-run finishes. Then the head is admitted without any eviction."""
    s = reserve_state()
    head = decide(s, workload_info(s, "team-a", "a-head"))
    assert (head.admit, head.rule, head.assignment.mode) == (False, "QuotaExceeded", "Preempt")
    before = all_usage(s)
    v = decide_pod(s, Pod("b-borrow", "team-b").queue("lq").cpu("2").priority(0).created(30).obj())
    refused_by(v, "StrictFIFOReservation", "ClusterQueue cq-a keeps 6 cpu", "team-a/a-head",
               "reclaimWithinCohort LowerPriority, not Any", "cq-b")
    assert all_usage(s) == before
    delete(s,
           Pod("a-run").queue("lq").cpu("4").priority(100).node("n1").obj())       # the head's own running pod finishes
    assert decide(s, workload_info(s, "team-a", "a-head")).admit is True


def test_a_queue_that_can_always_reclaim_keeps_nothing():
    """preemption.CanAlwaysReclaim: with reclaimWithinCohort Any the head takes its quota back when it needs it,
    so the borrower is admitted meanwhile (Kueue reserves nothing)."""
    s = reserve_state(reclaim="Any")
    assert decide_pod(s, Pod("b-borrow", "team-b").queue("lq").cpu("2").priority(0).created(30).obj()).admit is True


def test_a_best_effort_fifo_head_keeps_nothing():
    """Issue 9 point 4 is about StrictFIFO: a BestEffortFIFO queue lets the pods behind its head go, so its head
    does not hold the cohort either."""
    s = reserve_state(strategy="BestEffortFIFO")
    assert decide_pod(s, Pod("b-borrow", "team-b").queue("lq").cpu("2").priority(0).created(30).obj()).admit is True


def test_pods_within_their_own_nominal_quota_are_not_held_back():
    """The reservation holds borrowers back: a pod within its own ClusterQueue's nominal quota is admitted
    (it could reclaim that quota anyway)."""
    s = reserve_state()
    delete(s, Pod("b-run", "team-b").queue("lq").cpu("2").priority(100).node("n1").obj())
    assert decide(s, workload_info(s, "team-a", "a-head")).assignment.mode == "Preempt"     # still blocked
    assert decide_pod(s, Pod("b-small", "team-b").queue("lq").cpu("2").priority(0).created(30).obj()).admit is True
    refused_by(decide_pod(s, Pod("b-more", "team-b").queue("lq").cpu("1").priority(0).created(31).obj()),
               "StrictFIFOReservation", "team-a/a-head")


def test_resources_to_reserve_follows_kueue_quota_resources_to_reserve():
    """Kueue quotaResourcesToReserve: a borrowing head keeps all it asks without a borrowing limit, else up to
    nominal + borrowingLimit - usage; a head within nominal keeps up to nominal - usage."""
    s = reserve_state(a_limit="1")
    a = s.ledger.quota_node("cq-a")                      # nominal 6, borrowingLimit 1, 4 used
    assert resources_to_reserve(a, {FR: 6 * CPU}, borrows=True) == {FR: 3 * CPU}
    assert resources_to_reserve(a, {FR: 6 * CPU}, borrows=False) == {FR: 2 * CPU}
    s = reserve_state()
    assert resources_to_reserve(s.ledger.quota_node("cq-a"), {FR: 6 * CPU}, borrows=True) == {FR: 6 * CPU}
