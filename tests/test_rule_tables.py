"""Rule tables, one per core/ rule module, with the boundary rows (issue 13, point 5): each row is a case of
the rule as Kueue's, YuniKorn's or the seeds' text states it, called directly, without a server."""
from __future__ import annotations

import pytest

from app.config import Configuration, WaitForPodsReady
from app.core.binding import room_refusal
from app.core.cleared import cleared_cause
from app.core.decisions import Refuse
from app.core.filtering import nodes_for
from app.core.gang_admission import check_group
from app.core.hierarchy import HIERARCHICAL_RECLAIM, RECLAIM_WHILE_BORROWING, RECLAIM_WITHOUT_BORROWING
from app.core.preemption.candidates import find_candidates
from app.core.preemption.classic import borrow_within_cohort
from app.core.preemption.fair_targets import (LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
                                             strategy_allows)
from app.core.preemption.laws import delay_left, guarantee_protected
from app.core.preemption.ordering import admission_key, newer, plan_key
from app.core.preemption.targets import Candidate, Plan, Preemptor, Target
from app.core.resource_node import QuotaNode
from app.core.rules import GROUP_INCOMPLETE
from app.core.readiness import all_ready, backoff_after, queue_order, refusal, timed_out
from app.core.workload import KUEUE_TOTAL, Readiness, RequeueRecord, Workload, group_of
from app.objects import kueue
from app.objects.annotations import FENCE
from app.objects.pod import PodInfo, decode_pod
from builders import (BASE_TIME, ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor,
                      cpu_queue)
from helpers import make_state, pod_info, preemptor_of

T0 = float(BASE_TIME)       # 2026-01-01T00:00:00Z


def pod(name: str = "p", priority: int | None = 0, created: float = T0, started: float | None = None) -> PodInfo:
    """A decoded pod: 1 CPU in namespace ns; created and started are times (T0 is the builders' BASE_TIME)."""
    built = Pod(name, "ns").cpu("1").priority(priority).created(created - T0)
    return decode_pod((built if started is None else built.node("n1").started(started - T0)).obj())


def preemptor(priority: int, policy: str = "LowerPriority", threshold: int | None = None) -> Preemptor:
    cq = kueue.ClusterQueue("cq", preemption=kueue.Preemption("LowerPriority", "Any", policy, threshold))
    return Preemptor(Workload.of_pod(pod("preemptor", priority)), cq, QuotaNode("cq", False), {}, set())


def candidate(priority: int, name: str = "c", queue: str = "other", admitted_at: float = T0, **kw) -> Candidate:
    return Candidate(pod(name, priority), queue, {}, admitted_at, **kw)


# ---- classic: borrowWithinCohort and maxPriorityThreshold (Kueue's classifyPreemptionVariant) ----------------------

@pytest.mark.parametrize("policy,threshold,victim,advantage,variant", [
    ("Never", None, 10, False, RECLAIM_WITHOUT_BORROWING),
    ("Never", None, 10, True, HIERARCHICAL_RECLAIM),               # the hierarchical advantage, whatever the policy
    ("LowerPriority", None, 10, False, RECLAIM_WHILE_BORROWING),
    ("LowerPriority", None, 100, False, RECLAIM_WITHOUT_BORROWING),  # the preemptor's own priority: not lower
    ("LowerPriority", None, 99, False, RECLAIM_WHILE_BORROWING),
    ("LowerPriority", 50, 50, False, RECLAIM_WHILE_BORROWING),      # exactly at maxPriorityThreshold: still may
    ("LowerPriority", 50, 51, False, RECLAIM_WITHOUT_BORROWING),    # above it: only without borrowing
    ("LowerPriority", 50, -5, False, RECLAIM_WHILE_BORROWING),
])
def test_borrow_within_cohort_classifies_each_candidate(policy, threshold, victim, advantage, variant):
    assert borrow_within_cohort(preemptor(100, policy, threshold), candidate(victim), advantage) == variant


# ---- fair sharing: preemptionStrategies ----------------------------------------------------------------------------

@pytest.mark.parametrize("strategy,preemptor_new,target_old,target_new,allowed", [
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, 300, 900, 300, True),      # equal to the target's share after: allowed
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, 301, 900, 300, False),
    (LESS_THAN_INITIAL_SHARE, 899, 900, 0, True),
    (LESS_THAN_INITIAL_SHARE, 900, 900, 0, False),                  # equal to the target's share before: not
])
def test_fair_sharing_strategies_at_their_boundaries(strategy, preemptor_new, target_old, target_new, allowed):
    assert strategy_allows(strategy, preemptor_new, target_old, target_new) is allowed


# ---- ordering: LowerOrNewerEqualPriority's "newer", admission order, victim groups --------------------------------

@pytest.mark.parametrize("candidate_created,preemptor_created,is_newer", [
    (T0 + 1, T0, True),
    (T0 + 0.9, T0, False),              # the same second, as the API records it: not newer
    (T0, T0 + 0.5, False),
    (T0 - 1, T0, False),
    (None, T0, False),
])
def test_newer_compares_creation_at_one_second(candidate_created, preemptor_created, is_newer):
    assert newer(candidate_created, preemptor_created) is is_newer


def test_admission_order_breaks_ties_by_start_then_creation_then_name():
    a = admission_key(T0, pod("a", started=T0 + 2, created=T0))
    b = admission_key(T0, pod("b", started=T0 + 1, created=T0 + 5))
    c = admission_key(T0, pod("c", started=T0 + 2, created=T0))
    assert sorted([a, b, c], reverse=True) == [c, a, b]          # most recently admitted first


@pytest.mark.parametrize("groups,best", [
    ({"n1": [candidate(1, rank=0)], "n2": [candidate(1, rank=1)]}, "n1"),                          # earlier in order
    ({"n1": [candidate(1, rank=0), candidate(1, rank=1)], "n2": [candidate(1, rank=5)]}, "n2"),   # fewer victims
    ({"n1": [candidate(1, rank=0, last_resort=True)], "n2": [candidate(1, rank=3), candidate(1, rank=4)]}, "n2"),
    ({"n1": [candidate(5, rank=0)], "n2": [candidate(5, rank=0)]}, "n1"),                          # then node name
])
def test_victim_groups_are_ordered_as_yunikorn_chooses_a_node(groups, best):
    plans = [Plan(node, [Target(c, "InCohortReclamation") for c in cs]) for node, cs in groups.items()]
    assert min(plans, key=plan_key).node == best


# ---- candidates: withinClusterQueue and reclaimWithinCohort (Kueue's findCandidates) ------------------------------

def within_state(policy: str, victim_priority: int, victim_created: float):
    """cq (4 CPUs) full with victim (4 CPUs); p (2 CPUs, priority 100, created at 10 s) waits in it."""
    return make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
                      cpu_queue("cq", 4, preemption={"withinClusterQueue": policy}),
                      LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                      Pod("victim").queue("lq").cpu("4").priority(victim_priority).created(victim_created).node("n1")
                      .obj(),
                      Pod("p").queue("lq").cpu("2").priority(100).created(10).obj())


def candidate_names(state) -> set[str]:
    pre = preemptor_of(state, "team-a", "p")
    return {c.pod.name for c in find_candidates(state, pre, pre.relevant, set())}


@pytest.mark.parametrize("policy,victim_priority,victim_created,taken", [
    ("Never", 0, 0, False),
    ("LowerPriority", 99, 0, True),
    ("LowerPriority", 100, 20, False),                      # equal priority: never under LowerPriority
    ("LowerOrNewerEqualPriority", 99, 0, True),
    ("LowerOrNewerEqualPriority", 100, 11, True),           # equal priority, one second newer
    ("LowerOrNewerEqualPriority", 100, 10, False),          # the same second (the API server's resolution): a tie
    ("LowerOrNewerEqualPriority", 100, 9, False),           # older
    ("LowerOrNewerEqualPriority", 101, 20, False),          # higher, however new
])
def test_within_cluster_queue_policy_at_its_boundaries(policy, victim_priority, victim_created, taken):
    assert candidate_names(within_state(policy, victim_priority, victim_created)) == ({"victim"} if taken else set())


def cohort_state(policy: str, victim_priority: int, fence_on: str | None = None, guarantee: bool = False,
                 b_cpu=(4, 4)):
    """Cohort co: a (4 CPUs, reclaimWithinCohort policy) idle, b (4 CPUs) borrowing all of a's with b-0 and b-1
    (4 CPUs each unless b_cpu says otherwise); p (a, 2 CPUs, priority 100) waits. fence_on puts the preemption
    fence on a or on co."""
    a = ClusterQueue("a").cohort("co").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4"))
    co = Cohort("co")
    if fence_on:
        {"a": a, "co": co}[fence_on].annotation(FENCE, "true")
    config = Configuration(guarantee_protection=True) if guarantee else None
    return make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(), Namespace("team-b").obj(),
                      co.obj(), a.preemption({"reclaimWithinCohort": policy}).obj(), cpu_queue("b", 4, "co"),
                      LocalQueue("lq", "team-a").cluster_queue("a").obj(),
                      LocalQueue("lq", "team-b").cluster_queue("b").obj(),
                      *(Pod(f"b-{i}", "team-b").queue("lq").cpu(str(cpu)).priority(victim_priority).created(i)
                        .node("n1").obj() for i, cpu in enumerate(b_cpu)),
                      Pod("p").queue("lq").cpu("2").priority(100).created(10).obj(), config=config)


@pytest.mark.parametrize("policy,victim_priority,taken", [
    ("Never", 0, set()),
    ("LowerPriority", 99, {"b-0", "b-1"}),
    ("LowerPriority", 100, set()),                          # equal priority: not lower
    ("Any", 1000, {"b-0", "b-1"}),                          # any priority, as b borrows
])
def test_reclaim_within_cohort_policy_at_its_boundaries(policy, victim_priority, taken):
    assert candidate_names(cohort_state(policy, victim_priority)) == taken


@pytest.mark.parametrize("fence_on,taken", [
    (None, {"b-0", "b-1"}),
    ("a", set()),                                           # law 7: victims stay inside a's fence
    ("co", {"b-0", "b-1"}),                                 # b is inside co's fence with a
])
def test_the_preemption_fence_bounds_the_reclaim(fence_on, taken):
    assert candidate_names(cohort_state("Any", 0, fence_on)) == taken


@pytest.mark.parametrize("b_cpu,protected", [
    ((4, 4), False),                                        # b at 8 of 4: taking b-0 leaves it at its nominal 4
    ((4, 1), True),                                         # b at 5: taking b-0 leaves 1 < 4
])
def test_guarantee_protection_keeps_a_queue_at_its_nominal_quota(b_cpu, protected):
    """YuniKorn's law 2 (guaranteeProtection): a victim whose queue would drop below its nominal quota is kept."""
    state = cohort_state("Any", 0, guarantee=True, b_cpu=b_cpu)
    pre = preemptor_of(state, "team-a", "p")
    victim = next(c for c in find_candidates(state, pre, pre.relevant, set()) if c.pod.name == "b-0")
    assert guarantee_protected(state, victim) is protected


# ---- gang admission: when a group may be admitted at all ------------------------------------------------------------

@pytest.mark.parametrize("queues,total,rule", [
    (("lq", "lq"), "2", None),
    (("lq", "lq", "lq"), "2", None),                        # more members than the total: complete
    (("lq",), "2", GROUP_INCOMPLETE),                       # one short: waits, holds nothing
    (("lq", "lq2"), "2", "GroupQueueMismatch"),
    (("lq", "lq"), None, "GroupSizeUnknown"),
])
def test_a_group_is_admitted_only_complete_in_one_queue(queues, total, rule):
    members = []
    for i, queue in enumerate(queues):
        member = Pod(f"g-{i}").queue(queue).cpu("1").created(i).label("kueue.x-k8s.io/pod-group-name", "g")
        members.append((member if total is None else member.annotation(KUEUE_TOTAL, total)).obj())
    state = make_state(ResourceFlavor("default-flavor").obj(), Node("n1").obj(), cpu_queue("cq", 8),
                       LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                       LocalQueue("lq2", "team-a").cluster_queue("cq").obj(), *members)
    infos = [pod_info(state, "team-a", m["metadata"]["name"]) for m in members]
    refusal_ = check_group(state, infos[0], group_of(infos[0]), infos)
    assert (refusal_.rule if refusal_ else None) == rule


# ---- cleared refusals: what a wait was waiting for -----------------------------------------------------------------

@pytest.mark.parametrize("rule,reason,holds_then,hold_now,cause", [
    ("QuotaExceeded", "cpu request 2 > 0 available", set(), False, "QuotaFreed"),
    ("ClusterQueueStopped", "stopPolicy Hold", set(), False, "QueueChanged"),
    ("NoFlavorNodes", "none of the nodes offered", set(), False, ""),   # kube-scheduler watches nodes itself
    ("WaitingForVictims", "victims still running", set(), False, "HoldExpired"),
    ("RoomHeld", "the room is held", {"uid-team-a-other"}, False, "HoldReleased"),
    ("RoomHeld", "the room is held", {"uid-team-a-other"}, True, ""),   # the hold it met still stands
])
def test_a_refusal_clears_when_its_cause_is_gone(rule, reason, holds_then, hold_now, cause):
    """p (2 CPUs) in cq (4 CPUs, nothing running) would be admitted now; each row is why it was refused, and
    whether the hold kept for other (a preemptor) still stands."""
    state = make_state(ResourceFlavor("default-flavor").obj(), Node("n1").obj(), cpu_queue("cq", 4),
                       LocalQueue("lq", "team-a").cluster_queue("cq").obj(), Pod("p").queue("lq").cpu("2").obj(),
                       Pod("other").queue("lq").cpu("1").obj())
    if hold_now:
        other = pod_info(state, "team-a", "other")
        state.workloads.hold_for_preemptor(other.uid, "n1", other.requests, None, {})
    assert cleared_cause(state, pod_info(state, "team-a", "p"), rule, reason, holds_then) == cause


# ---- binding: room held on a node for others ------------------------------------------------------------------------

@pytest.mark.parametrize("cpu,refused_", [("4", False), ("4001m", True)])
def test_bind_counts_the_room_held_for_others_to_the_millicpu(cpu, refused_):
    """n1 has 8 CPUs; a hold keeps 4 of them for a preemptor, so a pod of 4 CPUs binds and one of 4001m does not."""
    state = make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("8").obj(), cpu_queue("cq", 16),
                       LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                       Pod("holder").queue("lq").cpu("4").obj(), Pod("p").queue("lq").cpu(cpu).obj())
    holder = pod_info(state, "team-a", "holder")
    state.workloads.hold_for_preemptor(holder.uid, "n1", holder.requests, None, {})
    reason = room_refusal(state, pod_info(state, "team-a", "p"), "n1")
    assert bool(reason) is refused_ and (not reason or "room held there for other pods" in reason)


# ---- filtering: which of the passing nodes a pod may take -------------------------------------------------------

@pytest.mark.parametrize("passing,hold_for,p_cpu,taken", [
    ([], None, "4", "NoFlavorNodes"),
    (["n1", "n2"], None, "4", ["n1", "n2"]),                # no hold anywhere: all of them
    (["n1", "n2"], "p", "4", ["n1"]),                       # a preemptor: only the node held for it
    (["n1"], "p", "4", ["n1"]),
    (["n1", "n2"], "other", "4", ["n1", "n2"]),             # n1 keeps 4 of its 8 CPUs for other: 4 still fit
    (["n1", "n2"], "other", "5", ["n2"]),                   # 5 do not
    (["n1"], "other", "5", "RoomHeld"),
])
def test_nodes_for_at_the_held_room_boundary(passing, hold_for, p_cpu, taken):
    state = make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("8").obj(), Node("n2").cpu("8").obj(),
                       cpu_queue("cq", 32), LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
                       Pod("other").queue("lq").cpu("4").obj(), Pod("p").queue("lq").cpu(p_cpu).obj())
    if hold_for:
        holder = pod_info(state, "team-a", hold_for)
        state.workloads.hold_for_preemptor(holder.uid, "n1", holder.requests, None, {})
    got = nodes_for(state, pod_info(state, "team-a", "p"), frozenset({"default-flavor"}), passing, 2)
    assert (got.rule if isinstance(got, Refuse) else got) == taken


# ---- laws: the preemption delay -------------------------------------------------------------------------------------

@pytest.mark.parametrize("delay,age,left", [(30.0, 0, 30.0), (30.0, 29, 1.0), (30.0, 30, 0.0), (30.0, 45, -15.0),
                                            (0.0, 0, 0.0)])
def test_the_preemption_delay_counts_from_the_pods_creation(delay, age, left):
    cq = kueue.ClusterQueue("cq", preemption_delay=delay)
    assert delay_left(cq, pod(created=T0), T0 + age) == left


# ---- readiness: waitForPodsReady's timeouts, backoff and requeuing order -----------------------------------------

@pytest.mark.parametrize("admitted_ago,ready_ago,unready_ago,timed", [
    (299, None, None, False),
    (300, None, None, True),                 # exactly at timeout: evicted
    (1000, 900, None, False),                # Ready in time
    (1000, 900, 179, False),
    (1000, 900, 180, True),                  # unready for exactly recoveryTimeout
])
def test_timeouts_at_their_boundaries(admitted_ago, ready_ago, unready_ago, timed):
    now = T0 + 10_000
    r = Readiness(now - admitted_ago, None if ready_ago is None else now - ready_ago,
                  None if unready_ago is None else now - unready_ago)
    assert bool(timed_out(r, WaitForPodsReady(timeout=300.0, recovery_timeout=180.0), now)) is timed


def bound(name: str, ready: bool) -> PodInfo:
    return decode_pod(Pod(name, "ns").cpu("1").node("n1").ready(ready).obj())


@pytest.mark.parametrize("ready,unbound,finished,group_size,expected", [
    ((True, True), 0, 1, 3, True),               # a group of 3: 2 Ready and 1 Succeeded
    ((True, True), 0, 0, 3, False),              # a group of 3 with 2 bound
    ((True, True, True), 0, 0, 3, True),
    ((True, False), 0, 0, None, False),          # a Job's pods: one not Ready
    ((True, True), 1, 0, None, False),           # a Job's pods: one not bound yet
    ((True,), 0, 0, None, True),                 # one pod
])
def test_a_workload_is_ready_when_all_its_pods_are_bound_and_ready(ready, unbound, finished, group_size, expected):
    running = [bound(f"m-{i}", r) for i, r in enumerate(ready)]
    waiting = [pod(f"w-{i}") for i in range(unbound)]
    assert all_ready(running, running + waiting, finished, group_size) is expected


@pytest.mark.parametrize("limit,previous,count,deactivated,wait", [
    (None, 0, 1, False, 60.0),
    (None, 6, 7, False, 3600.0),             # 60 * 2^6 = 3840, capped at backoffMaxSeconds
    (2, 1, 2, False, 120.0),                 # the backoffLimitCount-th requeue still happens
    (2, 2, 3, True, None),                   # one more: deactivated
    (0, 0, 1, True, None),
])
def test_backoff_then_deactivation_past_backoff_limit_count(limit, previous, count, deactivated, wait):
    cfg, now = WaitForPodsReady(backoff_limit_count=limit), T0
    q = RequeueRecord(count=previous, at=T0 - 5) if previous else None
    got = backoff_after(q, cfg, now)
    assert got[0] == count and got[2] is deactivated
    if wait is not None:
        assert got[1] == now + wait
    why, for_good = refusal(RequeueRecord(*got), cfg, now, "ns/Job/x")
    assert for_good is deactivated and bool(why) is (deactivated or got[1] > now)


@pytest.mark.parametrize("timestamp,first_created,order_created", [
    ("Eviction", T0, T0 + 60),               # a requeued workload goes behind: its new pod's creation
    ("Creation", T0, T0),                    # keeps its workload's first place
    ("Creation", None, T0 + 60),             # never requeued: its own creation
])
def test_requeuing_strategy_timestamp_decides_the_queue_order(timestamp, first_created, order_created):
    record = RequeueRecord(count=1, first_created=first_created)
    key = queue_order(pod("x-r1", priority=5, created=T0 + 60), record, WaitForPodsReady(timestamp=timestamp))
    assert key == (-5, order_created, "ns/x-r1")
