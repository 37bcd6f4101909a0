"""Who goes first for a cohort's shared quota: borrowing level, and what a blocked StrictFIFO head reserves.

Kueue orders the heads it admits in one cycle by borrowing level before priority
and age (pkg/scheduler/scheduler.go makeClassicalIterator, on
flavorassigner Assignment.Borrows()): the level is the height of the lowest
subtree of the cohort tree that holds the request
(preemption/classical FindHeightOfLowestSubtreeThatFits), 0 when the
ClusterQueue's own nominal quota holds it. A pod that borrows only from its
parent Cohort therefore goes before one that would borrow from the root.

A head that needs preemption but has no candidates keeps, for the rest of the
cycle, the quota it will need unless its ClusterQueue can always reclaim
(reclaimWithinCohort: Any): scheduler.go reserveCapacityForUnreclaimablePreempt
and quotaResourcesToReserve. Pure quota-tree arithmetic; no state.
"""
from __future__ import annotations

from dataclasses import dataclass

from .resource_node import FR, QuotaNode, lowest_subtree_that_fits


@dataclass(frozen=True, slots=True)
class BorrowingLevel:
    height: int = 0        # 0: within the ClusterQueue's own nominal quota
    cohort: str = ""       # the nearest Cohort whose subtree holds the request ("" at height 0)

    def where(self) -> str:
        """Where the quota comes from, as an admin reads it."""
        return f"cohort {self.cohort}" if self.height else "its own nominal quota"


def subtree_height(node: QuotaNode) -> int:
    """Kueue's getNodeHeight: the distance to the furthest leaf (a Cohort of ClusterQueues is 1)."""
    height = min(len(node.children), 1)
    for child in node.children:
        if child.is_cohort:
            height = max(height, subtree_height(child) + 1)
    return height


def borrowing_level(node: QuotaNode, usage: dict[FR, int]) -> BorrowingLevel:
    """The borrowing level of a request: the highest over its (flavor, resource) pairs."""
    level = BorrowingLevel()
    for fr, value in usage.items():
        subtree = lowest_subtree_that_fits(node, fr, value)
        if subtree is not None and subtree_height(subtree) > level.height:
            level = BorrowingLevel(subtree_height(subtree), subtree.name)
    return level


def resources_to_reserve(node: QuotaNode, usage: dict[FR, int], borrows: bool) -> dict[FR, int]:
    """Kueue's quotaResourcesToReserve for a head that needs preemption: up to nominal + borrowing limit
    when it borrows (all of it without a limit), else up to what is left of its nominal quota."""
    reserved: dict[FR, int] = {}
    for fr, value in usage.items():
        q = node.quotas.get(fr)
        nominal = q.nominal if q is not None else 0
        used = node.usage.get(fr, 0)
        if borrows:
            amount = value if q is None or q.borrowing_limit is None else \
                min(value, nominal + q.borrowing_limit - used)
        else:
            amount = min(value, nominal - used)
        if amount > 0:
            reserved[fr] = amount
    return reserved
