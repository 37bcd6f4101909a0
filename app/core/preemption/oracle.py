"""The flavor assigner's preemption oracle (Kueue's PreemptionOracle.SimulatePreemption), and the
candidate searches it made, reused by the decision that follows it (one decision is their lifetime)."""
from __future__ import annotations

from dataclasses import replace

from ...objects.kueue import ClusterQueue
from ..flavors import NO_CANDIDATES, PREEMPT, RECLAIM
from ..resource_node import FR
from .candidates import find_candidates
from .quota_targets import quota_targets
from .removals import Removals, borrows_after
from .targets import Candidate, Preemptor
from ..view import PreemptionView
from ..workload import Workload


class CandidateSearches:
    """The candidate searches one decision's preemption oracle made, for that same decision's plans to reuse
    (choose.plans): made with the oracle, kept by the Assignment the decision returns, and gone with it. A
    search is reused only in the state it was made in (state.generation)."""

    __slots__ = ("_found",)

    def __init__(self):
        self._found: dict[tuple, tuple[int, list[Candidate]]] = {}

    def remember(self, state: PreemptionView, pre: Preemptor, candidates: list[Candidate]) -> None:
        self._found[_search_key(pre)] = (state.generation, candidates)

    def before(self, state: PreemptionView, pre: Preemptor, spent: set[str]) -> list[Candidate] | None:
        """The candidates the oracle found for this very preemptor and usage, in this very state (the same
        decision, a moment before): the search over every running pod is made once, not twice. The oracle does
        not look at PodDisruptionBudgets, as Kueue's; a candidate whose budget is spent is marked last resort
        here, as find_candidates would. None when there is nothing to reuse."""
        found = self._found.get(_search_key(pre))
        if found is None or found[0] != state.generation:
            return None
        if not spent:
            return list(found[1])
        return [c if c.last_resort or not any(m.uid in spent for m in c.pods()) else replace(c, last_resort=True)
                for c in found[1]]


class PreemptionOracle:
    """Kueue's PreemptionOracle.SimulatePreemption: what the quota half of preemption would find for pod in one
    flavor. Called as oracle(flavor, usage) it answers (possibility, borrowing): NoCandidates (no target set frees
    the quota, or this pod may not preempt at all), Preempt (some target is in the pod's own ClusterQueue) or
    Reclaim (all are taken back from the cohort), and whether the pod would borrow once those targets are gone.
    It simulates on the decisions' tree (core.overlay) and takes everything back. One is made per decision
    (admission.assign); the candidate searches it makes are kept in `searched`."""

    def __init__(self, state: PreemptionView, workload: Workload, cq: ClusterQueue):
        self.state, self.workload, self.cq = state, workload, cq
        self.barred = state.config.preemption_mode in ("None", "Priority") or \
            workload.template.preemption_policy == "Never"
        self.searched: CandidateSearches | None = None       # made at the first search (most decisions make none)

    def __call__(self, flavor: str, usage: dict[FR, int]) -> tuple[str, bool]:
        state, cq = self.state, self.cq
        pre = Preemptor(self.workload, cq, state.ledger.quota_node(cq.name), usage, {flavor})
        in_cohort = pre.node.parent is not None          # without a cohort there is nothing to borrow
        candidates = []
        if not self.barred:
            candidates = find_candidates(state, pre, pre.relevant, set())
            if self.searched is None:
                self.searched = CandidateSearches()
            self.searched.remember(state, pre, candidates)
        targets = quota_targets(state, pre, candidates) if candidates else None
        if not targets:
            return NO_CANDIDATES, in_cohort and borrows_after(pre)
        rm = Removals(state)
        try:
            for t in targets:
                rm.remove(t.candidate)
            borrows = in_cohort and borrows_after(pre)
        finally:
            rm.undo()
        return (PREEMPT if any(t.candidate.cluster_queue == cq.name for t in targets) else RECLAIM), borrows


def _search_key(pre: Preemptor) -> tuple:
    return pre.workload.uid, pre.cq.name, frozenset(pre.usage.items()), frozenset(pre.relevant)
