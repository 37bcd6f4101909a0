"""Hierarchical reclaim: which ClusterQueues of a Cohort tree a preemptor may reclaim quota from, and how.

Kueue's classical preemption over hierarchical cohorts (pkg/scheduler/preemption/classical/
hierarchical_preemption.go and candidate_generator.go): walking from the preemptor's ClusterQueue up to
the root, once a subtree's quota can hold the request the preemptor has the "hierarchical advantage" over
every workload of that subtree that uses more than its own quota: it may reclaim it (reclaimWithinCohort
still decides by priority) even though its own ClusterQueue borrows from that subtree to fit. Workloads
reached below that level are "priority candidates": borrowWithinCohort decides whether they may go while
the preemptor borrows. Subtrees within their nominal quota in the resources to free are never entered.
"""
from __future__ import annotations

from dataclasses import dataclass

from .resource_node import FR, QuotaNode, local_available, lowest_subtree_that_fits

HIERARCHICAL_RECLAIM = "HierarchicalReclaim"            # the preemptor's subtree owns the quota the victim uses
RECLAIM_WITHOUT_BORROWING = "ReclaimWithoutBorrowing"   # only if the preemptor's queue then borrows nothing
RECLAIM_WHILE_BORROWING = "ReclaimWhileBorrowing"       # borrowWithinCohort: even while the preemptor borrows


@dataclass(slots=True)
class Scope:
    """A ClusterQueue whose workloads the preemptor may reclaim from."""
    queue: QuotaNode
    lca: QuotaNode | None           # the Cohort it was reached at: the queue must borrow on the way up to it
    #                                 (None: only the queue itself is checked, as fair sharing does)
    advantage: bool                 # the hierarchical advantage


def within_nominal(node: QuotaNode, frs) -> bool:
    """Kueue's IsWithinNominalInResources: the node uses no more than its own (subtree) quota in any of frs."""
    return all(node.usage.get(fr, 0) <= node.subtree.get(fr, 0) for fr in frs)


def fits_in_quota(node: QuotaNode, requests: dict[FR, int]) -> tuple[bool, dict[FR, int]]:
    """Kueue's QuantitiesFitInQuota: whether requests fit the node's own subtree quota, and what is left of
    them for its parent once the node's unused guaranteed quota is counted."""
    fits = all(node.usage.get(fr, 0) + v <= node.subtree.get(fr, 0) for fr, v in requests.items())
    return fits, {fr: max(0, v - local_available(node, fr)) for fr, v in requests.items()}


def reclaim_scopes(cq: QuotaNode, requests: dict[FR, int], frs) -> list[Scope]:
    """Every other ClusterQueue of cq's Cohort tree that uses more than its quota in frs (and is not inside
    a subtree within its own), with the level it was reached at and whether cq has the hierarchical
    advantage there: Kueue's collectCandidatesForHierarchicalReclaim."""
    found: list[Scope] = []
    advantage, remaining = fits_in_quota(cq, requests)
    below, node = cq, cq.parent
    while node is not None:
        _collect(node, node, below, frs, advantage, found)
        fits, remaining = fits_in_quota(node, remaining)
        advantage = advantage or fits
        below, node = node, node.parent
    return found


def _collect(cohort: QuotaNode, lca: QuotaNode, skip: QuotaNode, frs, advantage: bool, into: list[Scope]) -> None:
    """The borrowing ClusterQueues under cohort, leaving out skip (the subtree already walked) and every
    subtree within its nominal quota (what it uses is its own)."""
    for child in cohort.children:
        if child is skip or within_nominal(child, frs):
            continue
        if child.is_cohort:
            _collect(child, lca, skip, frs, advantage, into)
        else:
            into.append(Scope(child, lca, advantage))


def borrows_up_to(queue: QuotaNode, lca: QuotaNode | None, frs) -> bool:
    """Kueue's candidateIsValid path check: the queue, and every Cohort over it below lca, still uses more
    than its own quota in frs (lca None: the queue alone)."""
    if within_nominal(queue, frs):
        return False
    node = queue.parent if lca is not None else None
    while node is not None and node is not lca:
        if within_nominal(node, frs):
            return False
        node = node.parent
    return True


def may_reclaim_in_hierarchy(cq: QuotaNode, fr: FR, value: int) -> bool:
    """Whether a Cohort below the root could hold value of fr for cq (Kueue's FindHeightOfLowestSubtreeThatFits,
    as the flavor assigner uses it): then cq may preempt although value exceeds its nominal quota, since
    what it needs belongs to its own part of the tree."""
    if cq.parent is None:
        return False
    subtree = lowest_subtree_that_fits(cq, fr, value)
    return subtree is None or subtree.parent is not None      # the root: no Cohort below it holds it
