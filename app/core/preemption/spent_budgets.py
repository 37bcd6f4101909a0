"""PodDisruptionBudgets in preemption: a pod whose budget allows no more disruptions is a last resort.

Seed 002 (YuniKorn) takes such a pod only when no other victim set exists, and kube-scheduler counts
it as a violation in the preempt answer.
"""
from __future__ import annotations

from ...objects.disruption_budget import PodDisruptionBudget
from ..view import BudgetsView


def spent_budgets(state: BudgetsView) -> set[str]:
    """UIDs of pods whose PodDisruptionBudget allows no more disruptions (taken only as a last resort),
    from the running figures state/ keeps per budget."""
    spent: set[str] = set()
    for pdb, covered, healthy in state.budgets.figures():
        if covered and disruptions_allowed(pdb, len(covered), healthy) <= 0:
            spent.update(covered)
    return spent


def disruptions_allowed(pdb: PodDisruptionBudget, expected: int, healthy: int) -> int:
    """The PodDisruptionBudget's disruptionsAllowed, as the disruption controller computes it (expected:
    the pods it covers). Neither field set: no limit."""
    if pdb.min_available is not None:
        return healthy - pdb.min_available.scaled(expected)
    if pdb.max_unavailable is not None:
        return pdb.max_unavailable.scaled(expected) - (expected - healthy)
    return 1
