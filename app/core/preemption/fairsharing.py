"""Kueue's fair sharing preemption (seed 000 公平共享, FindFairPreemptionTargets and its
preemptionStrategies LessThanOrEqualToFinalShare and LessThanInitialShare), over hierarchical cohorts."""
from __future__ import annotations

import heapq

from ..fairsharing import dominant_resource_share
from ..quota import FR, QuotaNode
from .laws import guarantee_protected
from .removals import Removals, given_back, is_borrowing, quota_fits
from .targets import IN_CLUSTER_QUEUE, IN_COHORT_FAIR_SHARING, Candidate, Preemptor, Target
from ..view import ClusterView

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


def share(state: ClusterView, node: QuotaNode, extra=None) -> int:
    """The node's weighted dominant resource share (with extra usage added if given)."""
    spec = state.cohorts.get(node.name) if node.is_cohort else state.cluster_queues.get(node.name)
    return dominant_resource_share(node, spec.fair_weight if spec else 1.0, extra)[0]


def compared(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """The ancestors of a and b just below their lowest common cohort: hierarchical fair sharing
    compares shares level by level, so two teams are compared as their sub-cohorts."""
    chain = []
    node = a
    while node is not None:
        chain.append(node)
        node = node.parent
    on_a = set(map(id, chain))
    below_b = b
    while below_b.parent is not None and id(below_b.parent) not in on_a:
        below_b = below_b.parent
    common = below_b.parent
    below_a = a
    while below_a.parent is not None and below_a.parent is not common:
        below_a = below_a.parent
    return below_a, below_b


def strategy_allows(name: str, preemptor_new: int, target_old: int, target_new: int) -> bool:
    """Kueue's preemptionStrategies (seed 000 抢占策略): LessThanOrEqualToFinalShare compares the
    preemptor's share with the target's after the removal, LessThanInitialShare with the target's before."""
    if name == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return preemptor_new <= target_new
    return preemptor_new < target_old


def fair_targets(state: ClusterView, pre: Preemptor, candidates: list[Candidate],
                 needs: set[FR]) -> list[Target] | None:
    """Kueue's FindFairPreemptionTargets (seed 000 算法概述): while the pod does not fit, take from the
    ClusterQueue with the highest share a workload the first strategy allows; then try the next
    strategy on what was passed over; then minimise backwards."""
    rm = Removals(state)
    targets: list[Target] = []
    strategies = state.config.preemption_strategies
    by_queue: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_queue.setdefault(c.cluster_queue, []).append(c)

    def sides(name: str) -> tuple[QuotaNode, QuotaNode]:
        return compared(pre.node, state.quota_node(name))

    def preemptor_share(mine: QuotaNode) -> int:
        return share(state, mine, pre.usage)     # the preemptor's side, with the pod admitted

    try:
        fits, passed_over = False, []
        heap = [(-share(state, sides(n)[1]), n) for n in by_queue]
        heapq.heapify(heap)
        while heap and not fits:
            _, name = heapq.heappop(heap)
            queue = by_queue[name]
            if name == pre.cq.name:                       # the preemptor's own queue: priority alone
                c = queue.pop(0)
                rm.remove(c)
                targets.append(Target(c, IN_CLUSTER_QUEUE))
                fits = quota_fits(pre, True)
                if queue:
                    heapq.heappush(heap, (-share(state, pre.node), name))
                continue
            mine, theirs = sides(name)
            # Both stay as they are while this queue's candidates are tried: mine and theirs are
            # separate branches, a share's denominator (lendable) ignores usage, and a rejected
            # candidate is restored exactly.
            my_share, old_share = preemptor_share(mine), share(state, theirs)
            for i, c in enumerate(queue):
                if guarantee_protected(state, c):
                    continue            # YuniKorn's law 2, as in the classic path
                rm.remove(c)
                if strategy_allows(strategies[0], my_share, old_share, share(state, theirs)):
                    targets.append(Target(c, IN_COHORT_FAIR_SHARING))
                    del queue[: i + 1]
                    fits = quota_fits(pre, True)
                    if queue and is_borrowing(state.quota_node(name), needs):
                        heapq.heappush(heap, (-share(state, theirs), name))
                    break
                rm.restore(c)
                passed_over.append(c)
        if not fits and len(strategies) > 1:
            for name in sorted({c.cluster_queue for c in passed_over}, key=lambda n: -share(state, sides(n)[1])):
                mine, theirs = sides(name)
                left = [c for c in passed_over if c.cluster_queue == name and c not in rm.done]
                if left and strategy_allows(strategies[1], preemptor_share(mine), share(state, theirs), 0):
                    rm.remove(left[0])
                    targets.append(Target(left[0], IN_COHORT_FAIR_SHARING))
                    fits = quota_fits(pre, True)
                if fits:
                    break
        return given_back(rm, pre, targets, True) if fits else None
    finally:
        rm.undo()
