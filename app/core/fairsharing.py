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
from fractions import Fraction

from .quota import FR, QuotaNode, potential_available

MAX_SHARE = sys.maxsize


@dataclass(frozen=True, slots=True)
class Share:
    """Kueue's DRS: the unweighted ratio of the dominant resource (exact), the weight, the resource."""
    ratio: Fraction = Fraction(0)
    weight: Fraction = Fraction(1)
    dominant: str = ""

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    @property
    def key(self) -> tuple:
        """What CompareDRS compares: a weight-0 node that borrows ranks above every other, two of them
        by their unweighted ratios; the rest by ratio / weight."""
        if self.zero_weight_borrows:
            return (1, self.ratio)
        return (0, self.ratio / self.weight if self.ratio else Fraction(0))

    @property
    def rounded(self) -> int:
        """The weighted share as a whole number per mille, MAX_SHARE (MaxInt64) for a weight-0 borrower. Rounded
        down; Kueue rounds its status.fairSharing.weightedShare up and reports the exact value as its metric."""
        if self.zero_weight_borrows:
            return MAX_SHARE
        return math.floor(self.key[1])


NEGATIVE = Share(ratio=Fraction(-1))        # Kueue's NegativeDRS: below every share, where a search starts


def lendable(cohort: QuotaNode) -> dict[str, int]:
    """Per resource, all that the cohort could hand out, over every flavor of its whole tree (Kueue's
    calculateLendable: the root's flavor/resources, each the cohort's potential available)."""
    out: dict[str, int] = {}
    for (flavor, resource) in cohort.root().subtree:
        out[resource] = out.get(resource, 0) + potential_available(cohort, (flavor, resource))
    return out


def weight_of(weight: float) -> Fraction:
    """A fairSharing.weight as an exact number (its decimal spelling: 0.99 is 99/100); never negative."""
    return max(Fraction(0), Fraction(str(weight)))


def share_of(node: QuotaNode, weight: float, extra: dict[FR, int] | None = None) -> Share:
    """The node's Share (with extra usage added to it if given)."""
    w = weight_of(weight)
    if node.parent is None:
        return Share(weight=w)
    borrowed: dict[str, int] = {}
    extra = extra or {}
    for fr in set(node.subtree) | set(extra):
        amount = node.usage.get(fr, 0) + extra.get(fr, 0) - node.subtree.get(fr, 0)
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
    if not borrowed:
        return Share(weight=w)
    pool = lendable(node.parent)
    best, dominant = Fraction(0), ""
    for resource in sorted(borrowed):
        if pool.get(resource, 0) > 0:
            ratio = Fraction(borrowed[resource] * 1000, pool[resource])
            if ratio > best:
                best, dominant = ratio, resource
    return Share(best, w, dominant)


def dominant_resource_share(node: QuotaNode, weight: float,
                            extra: dict[FR, int] | None = None) -> tuple[int, str]:
    """(weighted share as Kueue reports it, the resource that dominates it) for node, with extra usage
    added if given."""
    s = share_of(node, weight, extra)
    return s.rounded, s.dominant
