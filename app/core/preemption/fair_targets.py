"""Kueue's fair sharing preemption (seed 000 公平共享, FindFairPreemptionTargets and its
preemptionStrategies LessThanOrEqualToFinalShare and LessThanInitialShare), over hierarchical cohorts."""
from __future__ import annotations

from ..resource_node import FR, QuotaNode
from ..rules import IN_CLUSTER_QUEUE, IN_COHORT_FAIR_SHARING, IN_COHORT_RECLAMATION
from .fair_order import TargetOrdering, almost_lcas, share
from .laws import guarantee_protected
from .removals import Removals, given_back, quota_fits
from .targets import Candidate, Preemptor, Target
from ..view import PolicyView

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
PREEMPTOR = object()        # the overlay's key for the preemptor's own charge


def strategy_allows(name: str, preemptor_new, target_old, target_new) -> bool:
    """Kueue's preemptionStrategies (seed 000 抢占策略): LessThanOrEqualToFinalShare compares the
    preemptor's share with the target's after the removal, LessThanInitialShare with the target's before."""
    if name == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return preemptor_new <= target_new
    return preemptor_new < target_old


class _Run:
    """One search: the preemptor charged (Kueue's SimulateUsageAddition, so every share above it counts
    it) and the candidates removed so far, all on one overlay."""

    def __init__(self, state: PolicyView, pre: Preemptor):
        self.state, self.pre = state, pre
        self.rm = Removals(state)
        self.rm.charge(PREEMPTOR, pre.cq.name, pre.usage)
        self.targets: list[Target] = []
        self.pools: dict = {}           # each Cohort's lendable, the same all search long

    def fits(self) -> bool:
        """The preemptor fits now (Kueue's workloadFitsForFairSharing: its own charge taken off to ask)."""
        self.rm.take_back(PREEMPTOR)
        try:
            return quota_fits(self.pre, True)
        finally:
            self.rm.charge(PREEMPTOR, self.pre.cq.name, self.pre.usage)

    def take(self, c: Candidate, reason: str, ordering: TargetOrdering) -> bool:
        """c goes for reason; whether the preemptor fits now."""
        self.rm.remove(c)
        ordering.changed(self.state.ledger.quota_node(c.cluster_queue))
        self.targets.append(Target(c, reason))
        return self.fits()

    def shares(self, queue: QuotaNode) -> tuple[QuotaNode, tuple, tuple]:
        """Kueue's ComputeShares: (the target's almost-LCA, the preemptor's almost-LCA share, its own)."""
        mine, theirs = almost_lcas(self.pre.node, queue)
        return theirs, share(self.state, mine, self.pools).key, share(self.state, theirs, self.pools).key

    def share_without(self, c: Candidate, theirs: QuotaNode) -> tuple:
        """Kueue's ComputeTargetShareAfterRemoval."""
        self.rm.remove(c)
        try:
            return share(self.state, theirs, self.pools).key
        finally:
            self.rm.restore(c)


def fair_targets(state: PolicyView, pre: Preemptor, candidates: list[Candidate],
                 needs: set[FR]) -> list[Target] | None:
    """Kueue's FindFairPreemptionTargets (its fairPreemptions, seed 000 算法概述): while the pod does not fit,
    take from the ClusterQueue the TargetOrdering gives (the highest share, from the root down) the first
    workload the first strategy allows; then try the next strategy on what was passed over; then minimise
    backwards."""
    run = _Run(state, pre)
    strategies = state.config.preemption_strategies
    try:
        fits, retry = _first_strategy(run, candidates, needs, strategies[0])
        if not fits and len(strategies) > 1:
            fits = _second_strategy(run, retry)
        run.rm.take_back(PREEMPTOR)
        return given_back(run.rm, pre, run.targets, True) if fits else None
    finally:
        run.rm.undo()


def _first_strategy(run: _Run, candidates: list[Candidate], needs: set[FR], strategy: str) \
        -> tuple[bool, list[Candidate]]:
    """Kueue's runFirstFsStrategy: (fits, the candidates the strategy passed over). A preemptor within its
    nominal quota in what it needs reclaims regardless of shares (FairSharingPreemptWithinNominal, on by
    default in Kueue)."""
    pre = run.pre
    within_nominal = all(pre.node.usage.get(fr, 0) <= pre.node.subtree.get(fr, 0) for fr in needs)
    ordering = TargetOrdering(run.state, pre.node, candidates, run.pools)
    retry: list[Candidate] = []
    for queue in ordering:
        if queue is pre.node:                              # the preemptor's own queue: priority alone
            if run.take(ordering.pop(queue), IN_CLUSTER_QUEUE, ordering):
                return True, retry
            continue
        if within_nominal:
            c = ordering.pop(queue)
            if not guarantee_protected(run.state, c) and run.take(c, IN_COHORT_RECLAMATION, ordering):
                return True, retry
            continue
        theirs, preemptor_new, target_old = run.shares(queue)
        while ordering.has_candidate(queue):
            c = ordering.pop(queue)
            if guarantee_protected(run.state, c):
                continue            # YuniKorn's law 2, as in the classic path
            if strategy_allows(strategy, preemptor_new, target_old, run.share_without(c, theirs)):
                if run.take(c, IN_COHORT_FAIR_SHARING, ordering):
                    return True, retry
                break               # shares changed: the ordering decides again
            retry.append(c)
    return False, retry


def _second_strategy(run: _Run, retry: list[Candidate]) -> bool:
    """Kueue's runSecondFsStrategy (rule S2-b): LessThanInitialShare does not depend on the workload, so
    each ClusterQueue, in the ordering's turn, gives its first passed-over candidate if the rule allows."""
    ordering = TargetOrdering(run.state, run.pre.node, retry, run.pools)
    for queue in ordering:
        _, preemptor_new, target_old = run.shares(queue)
        c = ordering.pop(queue)
        if strategy_allows(LESS_THAN_INITIAL_SHARE, preemptor_new, target_old, None) \
                and run.take(c, IN_COHORT_FAIR_SHARING, ordering):
            return True
        ordering.drop(queue)
    return False
