"""Kueue's classic preemption (seed 000 经典抢占 目标 1-4, over hierarchical cohorts): borrowWithinCohort,
maxPriorityThreshold, candidateIsValid and the one or two runs over the candidates."""
from __future__ import annotations

from ..hierarchy import HIERARCHICAL_RECLAIM, RECLAIM_WHILE_BORROWING, RECLAIM_WITHOUT_BORROWING, borrows_up_to
from ..resource_node import FR
from .laws import guarantee_protected
from .removals import Removals, given_back, quota_fits
from .targets import Candidate, Preemptor, Target, reason_of
from ..view import QuotaNodes


def borrow_within_cohort(pre: Preemptor, c: Candidate, advantage: bool) -> str:
    """Kueue's classifyPreemptionVariant for another queue's candidate: the hierarchical advantage lets it
    go whatever the preemptor borrows; otherwise borrowWithinCohort decides: with policy Never, or for a
    candidate of the preemptor's priority or above, or above maxPriorityThreshold, only a reclaim that
    leaves the preemptor within its nominal quota; else also while the preemptor borrows."""
    policy, prio, mine = pre.cq.preemption, c.pod.priority or 0, pre.workload.priority
    if advantage:
        return HIERARCHICAL_RECLAIM
    if policy.borrow_within_cohort == "Never" or prio >= mine or (
            policy.max_priority_threshold is not None and prio > policy.max_priority_threshold):
        return RECLAIM_WITHOUT_BORROWING
    return RECLAIM_WHILE_BORROWING


def candidate_is_valid(state: QuotaNodes, pre: Preemptor, c: Candidate, needs: set[FR], borrow: bool) -> bool:
    """Kueue's candidateIsValid, checked as targets are taken: another queue's candidate only while its
    queue (and every Cohort over it below the level it was reached at) still uses more than its quota; one
    reclaimable only without borrowing not in a run that lets the preemptor borrow; and, with
    guaranteeProtection, never one that would take its queue below its nominal quota (YuniKorn's law 2)."""
    if not c.cluster_queue or c.cluster_queue == pre.cq.name:
        return True
    if borrow and c.variant == RECLAIM_WITHOUT_BORROWING:
        return False
    node = state.ledger.quota_node(c.cluster_queue)
    if node is None or not borrows_up_to(node, c.lca, needs):
        return False
    return not guarantee_protected(state, c)


def minimal_run(state: QuotaNodes, pre: Preemptor, candidates: list[Candidate], needs: set[FR],
                allow_borrowing: bool) -> list[Target] | None:
    """One run of Kueue's classicalPreemptions: take the candidates still valid in order until the quota
    fits, then give back (walking backwards) every one it still fits without."""
    rm = Removals(state)
    targets: list[Target] = []
    try:
        fits = False
        for c in candidates:
            if not candidate_is_valid(state, pre, c, needs, allow_borrowing):
                continue            # e.g. its queue no longer borrows once earlier targets are gone
            rm.remove(c)
            targets.append(Target(c, reason_of(pre, c)))
            if quota_fits(pre, allow_borrowing):
                fits = True
                break
        return given_back(rm, pre, targets, allow_borrowing) if fits else None
    finally:
        rm.undo()


def under_nominal(pre: Preemptor, needs: set[FR]) -> bool:
    return all(pre.node.usage.get(fr, 0) < pre.node.subtree.get(fr, 0) for fr in needs)


def classic_targets(state: QuotaNodes, pre: Preemptor, candidates: list[Candidate],
                    needs: set[FR]) -> list[Target] | None:
    """Kueue's classicalPreemptions: one or two runs over the candidates, with and without letting the
    preemptor borrow. Only the own queue's candidates, or classic reclaim while the queue is at its
    nominal quota already: a run with borrowing, where other queues' pods go only under the hierarchical
    advantage. No such advantage over any of them: first without borrowing (taking from every borrowing
    queue), then with. Otherwise (borrowWithinCohort, or the advantage) first with borrowing, then without."""
    others = [c for c in candidates if c.cluster_queue != pre.cq.name]
    forbidden = pre.cq.preemption.borrow_within_cohort == "Never"
    if not others or (forbidden and not under_nominal(pre, needs)):
        runs = (True,)
    elif forbidden and not any(c.variant == HIERARCHICAL_RECLAIM for c in others):
        runs = (False, True)
    else:
        runs = (True, False)
    for borrow in runs:
        targets = minimal_run(state, pre, candidates, needs, borrow)
        if targets:
            return targets
    return None
