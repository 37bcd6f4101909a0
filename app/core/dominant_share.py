"""Fair sharing's share value, as Kueue computes it (dominant resource share, weighted).

A ClusterQueue's (or Cohort's) share is, over the resources it borrows, the largest of
borrowed / lendable (per mille), divided by its .spec.fairSharing.weight; lendable is what its
parent could ever hand out, counted over every flavor of the whole Cohort tree. Nothing borrowed:
0, whatever the weight; weight 0 and borrowing: the largest share there is. Admission prefers the
lowest share, preemption takes from the highest (Kueue's pkg/cache/scheduler/fair_sharing.go:
dominantResourceShare, calculateLendable, CompareDRS).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from .resource_node import FR, QuotaNode, potential_available

MAX_SHARE = sys.maxsize


@dataclass(frozen=True, slots=True)
class Share:
    """Kueue's DRS: the unweighted ratio of the dominant resource (per mille, a float as Kueue's), the
    weight, the resource, key, what Kueue's CompareDRS compares (a weight-0 node that borrows ranks above
    every other, two of them by their unweighted ratios; the rest by ratio / weight), and whether the
    node uses more than its quota of anything (Kueue's IsBorrowing; the ratio may be 0 even so)."""
    ratio: float = 0.0
    weight: float = 1.0
    dominant: str = ""
    key: tuple = (0, 0.0)
    borrowing: bool = False

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    @property
    def rounded(self) -> int:
        """The weighted share as a whole number per mille, MAX_SHARE (MaxInt64) for a weight-0 borrower. Rounded
        down; Kueue rounds its status.fairSharing.weightedShare up and reports the exact value as its metric."""
        return MAX_SHARE if self.zero_weight_borrows else math.floor(self.key[1])


def _share(ratio: float, weight: float, dominant: str = "", borrowing: bool = False) -> Share:
    if weight == 0 and ratio != 0:
        return Share(ratio, weight, dominant, (1, ratio), borrowing)
    return Share(ratio, weight, dominant, (0, ratio / weight if ratio else 0.0), borrowing)


NEGATIVE = _share(-1.0, 1.0)        # Kueue's NegativeDRS: below every share, where a search starts


def lendable(cohort: QuotaNode) -> dict[str, int]:
    """Per resource, all that the cohort could hand out, over every flavor of its whole tree (Kueue's
    calculateLendable: the root's flavor/resources, each the cohort's potential available)."""
    out: dict[str, int] = {}
    for (flavor, resource) in cohort.root().subtree:
        out[resource] = out.get(resource, 0) + potential_available(cohort, (flavor, resource))
    return out


def share_of(node: QuotaNode, weight: float, extra: dict[FR, int] | None = None,
             pools: dict | None = None) -> Share:
    """The node's Share (with extra usage added to it if given). pools, if given, keeps each parent's
    lendable for the next call: it depends on quotas only, not on usage."""
    w = max(0.0, float(weight))
    if node.parent is None:
        return _share(0.0, w)
    borrowed: dict[str, int] = {}
    extra = extra or {}
    for fr in set(node.subtree) | set(extra):
        amount = node.usage.get(fr, 0) + extra.get(fr, 0) - node.subtree.get(fr, 0)
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
    if not borrowed:
        return _share(0.0, w)
    if pools is None:
        pool = lendable(node.parent)
    else:
        pool = pools.get(node.parent)
        if pool is None:
            pool = pools[node.parent] = lendable(node.parent)
    best, dominant = 0.0, ""
    for resource in sorted(borrowed):
        if pool.get(resource, 0) > 0:
            ratio = borrowed[resource] * 1000.0 / pool[resource]
            if ratio > best:
                best, dominant = ratio, resource
    return _share(best, w, dominant, True)


def dominant_resource_share(node: QuotaNode, weight: float,
                            extra: dict[FR, int] | None = None) -> tuple[int, str]:
    """(weighted share as Kueue reports it, the resource that dominates it) for node, with extra usage
    added if given."""
    s = share_of(node, weight, extra)
    return s.rounded, s.dominant
