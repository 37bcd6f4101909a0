"""The quota half of preemption: which targets let the preemptor's quota fit, by classic preemption or
fair sharing, and whether classic preemption may reclaim at all (Kueue's mayReclaimInHierarchy)."""
from __future__ import annotations

from ..hierarchy import may_reclaim_in_hierarchy
from .classic import classic_targets
from .fair_targets import fair_targets
from .targets import Candidate, Preemptor, Target
from ..view import PolicyView


def quota_targets(state: PolicyView, pre: Preemptor, candidates: list[Candidate]) -> list[Target] | None:
    """The pods whose removal lets the preemptor's quota fit ([] when it fits already; None: never)."""
    needs = pre.needs
    if not needs:
        return []
    policy = pre.cq.preemption
    can_borrow = policy.borrow_within_cohort != "Never" or state.config.fair_sharing
    if not can_borrow and any(pre.usage[fr] > pre.node.subtree.get(fr, 0)
                              and not may_reclaim_in_hierarchy(pre.node, fr, pre.usage[fr]) for fr in needs):
        return None        # classic preemption needs the request within nominal quota (seed 000), or
        #                    within a Cohort of its own below the root (Kueue's mayReclaimInHierarchy)
    usable = [c for c in candidates if any(fr in c.usage for fr in needs)] if len(needs) < len(pre.usage) \
        else candidates
    if state.config.fair_sharing:
        return fair_targets(state, pre, usable, needs)
    return classic_targets(state, pre, usable, needs)
