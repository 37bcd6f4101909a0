"""Which ClusterQueue fair-sharing preemption takes from next: Kueue's TargetClusterQueueOrdering
(pkg/scheduler/preemption/fairsharing/ordering.go, least_common_ancestor.go).

From the root of the preemptor's Cohort tree it walks down, at each level into the child with the
highest share (a Cohort over a ClusterQueue on a tie), until it reaches a ClusterQueue: so a team
whose sub-cohort borrows most loses first, and inside it the queue that borrows most. A ClusterQueue
is left out once it borrows nothing (the preemptor's own queue only once it has no candidate left) or
has no candidate; a Cohort once it borrows nothing and is not above the preemptor, or once all its
children are left out. Two queues of equal share: the one whose next candidate comes first in
candidate order; two Cohorts of equal share: the first by name (Kueue takes whichever its set
yields). Shares are compared as Kueue's CompareDRS does; the preemptor's workload is charged
meanwhile (the caller does), so every share above it counts it.
"""
from __future__ import annotations

from ..dominant_share import NEGATIVE, Share, share_of
from ..resource_node import QuotaNode
from ..view import PolicyView
from .targets import Candidate


def share(state: PolicyView, node: QuotaNode, pools: dict | None = None) -> Share:
    """The node's share, with its own fairSharing.weight (1 for a Cohort without an object)."""
    spec = state.cohorts.get(node.name) if node.is_cohort else state.cluster_queues.get(node.name)
    return share_of(node, spec.fair_weight if spec else 1.0, pools=pools)


class TargetOrdering:
    """The ClusterQueues to take from, highest share first (see the module). The caller pops or drops the
    queue it was given before asking for the next."""

    def __init__(self, state: PolicyView, preemptor: QuotaNode, candidates: list[Candidate],
                 pools: dict | None = None):
        self.state = state
        self.pools = {} if pools is None else pools       # each Cohort's lendable (core.dominant_share.share_of)
        self.children: dict[QuotaNode, list[QuotaNode]] = {}
        self.known: dict[QuotaNode, Share] = {}            # shares as they stand; changed() forgets some
        self.preemptor = preemptor
        self.above_preemptor: set[QuotaNode] = set()
        node = preemptor.parent
        while node is not None:
            self.above_preemptor.add(node)
            node = node.parent
        self.queued: dict[str, list[Candidate]] = {}
        for c in candidates:
            self.queued.setdefault(c.cluster_queue, []).append(c)
        self.pruned: set[QuotaNode] = set()

    def __iter__(self):
        if self.preemptor.parent is None:
            while self.preemptor not in self.pruned and self.queued.get(self.preemptor.name):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while root not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def pop(self, queue: QuotaNode) -> Candidate:
        return self.queued[queue.name].pop(0)

    def has_candidate(self, queue: QuotaNode) -> bool:
        return bool(self.queued.get(queue.name))

    def drop(self, queue: QuotaNode) -> None:
        self.pruned.add(queue)

    def changed(self, queue: QuotaNode) -> None:
        """A workload of queue was removed: its share and its Cohorts' are to be computed again."""
        node = queue
        while node is not None:
            self.known.pop(node, None)
            node = node.parent

    def _share(self, node: QuotaNode) -> Share:
        s = self.known.get(node)
        if s is None:
            s = self.known[node] = share(self.state, node, self.pools)
        return s

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_cq, best_cq_share = None, NEGATIVE
        best_cohort, best_cohort_share = None, NEGATIVE
        children = self.children.get(cohort)
        if children is None:
            children = self.children[cohort] = sorted(cohort.children, key=lambda n: n.name)
        for child in children:
            if child in self.pruned:
                continue
            s = self._share(child)
            if not child.is_cohort:
                if (child is not self.preemptor and not s.borrowing) or not self.has_candidate(child):
                    self.pruned.add(child)
                elif s.key > best_cq_share.key or (s.key == best_cq_share.key and self._first(child, best_cq)):
                    best_cq, best_cq_share = child, s
            elif not s.borrowing and child not in self.above_preemptor:
                self.pruned.add(child)
            elif s.key > best_cohort_share.key:
                best_cohort, best_cohort_share = child, s
        if best_cq is None and best_cohort is None:
            self.pruned.add(cohort)
            return None
        if best_cohort is not None and best_cohort_share.key >= best_cq_share.key:
            return self._next(best_cohort)
        return best_cq

    def _first(self, queue: QuotaNode, other: QuotaNode) -> bool:
        """queue's next candidate comes before other's in candidate order."""
        return self.queued[queue.name][0].rank < self.queued[other.name][0].rank


def almost_lcas(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """Kueue's getAlmostLCAs: the ancestors of a and b (or themselves) just below their lowest common
    Cohort, whose shares fair sharing compares: two teams are compared as their sub-cohorts."""
    chain = set()
    node = a
    while node is not None:
        chain.add(node)
        node = node.parent
    below_b = b
    while below_b.parent is not None and below_b.parent not in chain:
        below_b = below_b.parent
    common = below_b.parent
    below_a = a
    while below_a.parent is not None and below_a.parent is not common:
        below_a = below_a.parent
    return below_a, below_b
