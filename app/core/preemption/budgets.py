"""PodDisruptionBudgets in preemption: a pod whose budget allows no more disruptions is a last resort.

Seed 002 (YuniKorn) takes such a pod only when no other victim set exists, and kube-scheduler counts
it as a violation in the preempt answer.
"""
from __future__ import annotations

from ..selectors import decode_selector


def spent_budgets(state) -> set[str]:
    """UIDs of pods whose PodDisruptionBudget allows no more disruptions (taken only as a last resort)."""
    spent: set[str] = set()
    for pdb in state.extra.get("PodDisruptionBudget", {}).values():
        meta, spec = pdb.get("metadata") or {}, pdb.get("spec") or {}
        try:
            selector = decode_selector(spec.get("selector"))
        except ValueError:
            continue
        ns = meta.get("namespace") or "default"
        covered = [p for p in state.pods.values() if p.namespace == ns and p.node_name and not p.terminal
                   and selector.matches(p.labels)]
        healthy = sum(1 for p in covered if p.ready or p.phase == "Running")
        if disruptions_allowed(spec, len(covered), healthy) <= 0:
            spent.update(p.uid for p in covered)
    return spent


def disruptions_allowed(spec: dict, expected: int, healthy: int) -> int:
    """The PodDisruptionBudget's disruptionsAllowed, as the disruption controller computes it."""
    def amount(value, total: int) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return -(-int(value[:-1]) * total // 100)
        return int(value)
    try:
        if spec.get("minAvailable") is not None:
            return healthy - amount(spec["minAvailable"], expected)
        if spec.get("maxUnavailable") is not None:
            return amount(spec["maxUnavailable"], expected) - (expected - healthy)
    except (TypeError, ValueError):
        return 1
    return 1
