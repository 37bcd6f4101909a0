"""Fair sharing's share value, as Kueue computes it (dominant resource share, weighted).

A ClusterQueue's (or Cohort's) share is, over the resources it borrows, the
largest of borrowed / lendable in its cohort (per mille), divided by its
.spec.fairSharing.weight. Nothing borrowed: 0; weight 0: the largest share
there is. Admission prefers the lowest share, preemption takes from the highest.
"""
from __future__ import annotations

import sys

from .quota import FR, QuotaNode, potential_available

MAX_SHARE = sys.maxsize


def lendable(cohort: QuotaNode) -> dict[str, int]:
    """Per resource, all that the cohort could hand out across its flavors."""
    out: dict[str, int] = {}
    for (flavor, resource) in cohort.subtree:
        out[resource] = out.get(resource, 0) + potential_available(cohort, (flavor, resource))
    return out


def dominant_resource_share(node: QuotaNode, weight: float,
                            extra: dict[FR, int] | None = None) -> tuple[int, str]:
    """(weighted share, the resource that dominates it) for node, with extra usage added if given."""
    if node.parent is None:
        return 0, ""
    if weight <= 0:
        return MAX_SHARE, ""
    borrowed: dict[str, int] = {}
    extra = extra or {}
    for fr in set(node.subtree) | set(extra):
        amount = node.usage.get(fr, 0) + extra.get(fr, 0) - node.subtree.get(fr, 0)
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
    if not borrowed:
        return 0, ""
    pool = lendable(node.parent)
    best, dominant = -1, ""
    for resource in sorted(borrowed):
        if pool.get(resource, 0) > 0:
            ratio = borrowed[resource] * 1000 // pool[resource]
            if ratio > best:
                best, dominant = ratio, resource
    if best < 0:
        return 0, ""
    return int(best * 1000 // round(weight * 1000)), dominant
