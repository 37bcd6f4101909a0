"""Rule tables, one per core/ rule module, with the boundary rows (issue 13, point 5): each row is a case of
the rule as Kueue's, YuniKorn's or the seeds' text states it, called directly, without a server."""
from __future__ import annotations

import pytest

from app.config import WaitForPodsReady
from app.core.hierarchy import HIERARCHICAL_RECLAIM, RECLAIM_WHILE_BORROWING, RECLAIM_WITHOUT_BORROWING
from app.core.preemption.classic import borrow_within_cohort
from app.core.preemption.fairsharing import (LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
                                             strategy_allows)
from app.core.preemption.laws import delay_left
from app.core.preemption.ordering import admission_key, newer, plan_key
from app.core.preemption.targets import Candidate, Plan, Preemptor, Target
from app.core.quota import QuotaNode
from app.core.readiness import Readiness, RequeueRecord, backoff_after, queue_order, refusal, timed_out
from app.objects.kueue import ClusterQueue, Preemption
from app.objects.pod import PodInfo

T0 = 1_767_225_600.0        # 2026-01-01T00:00:00Z


def pod(name: str = "p", priority: int | None = 0, created: float | None = T0, **kw) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ns", name=name, labels={}, annotations={}, requests={"cpu": 1000},
                   priority=priority, created=created, **kw)


def preemptor(priority: int, policy: str = "LowerPriority", threshold: int | None = None) -> Preemptor:
    cq = ClusterQueue("cq", preemption=Preemption("LowerPriority", "Any", policy, threshold))
    return Preemptor(pod("preemptor", priority), cq, QuotaNode("cq", False), {}, set())


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


# ---- laws: the preemption delay -------------------------------------------------------------------------------------

@pytest.mark.parametrize("delay,age,left", [(30.0, 0, 30.0), (30.0, 29, 1.0), (30.0, 30, 0.0), (30.0, 45, -15.0),
                                            (0.0, 0, 0.0)])
def test_the_preemption_delay_counts_from_the_pods_creation(delay, age, left):
    cq = ClusterQueue("cq", preemption_delay=delay)
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
