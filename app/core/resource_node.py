"""The quota tree: nominal, borrowing and lending limits over ClusterQueues and Cohorts.

This is Kueue's hierarchical resource-node arithmetic (pkg/cache resource_node.go):
each node keeps its SubtreeQuota and Usage per (flavor, resource). A child lends
to its parent everything above its guaranteed quota (nominal - lendingLimit) and
stores there the usage above it. `available` walks up the tree, capping what a
node may take from its parent by its borrowingLimit. With team-a 9 and team-b 12
CPUs in one cohort this gives 21, 10 with borrowingLimit 1 on team-a, and 10
with lendingLimit 1 on team-b, the seed's worked numbers.

Each node keeps two usages. `usage` is what decisions plan with: running pods and
reservations (filter passed, bind pending; preemptors waiting), with the victims a
preemption chose taken out as they are going. `bound` is the truth the quota
invariant is checked on: pods really on a node (terminating victims included), no
reservation. A bind may charge only what `bound` still has room for.
"""
from __future__ import annotations

from dataclasses import dataclass, field

FR = tuple[str, str]  # (flavor, resource)


@dataclass(slots=True)
class Limits:
    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(eq=False, slots=True)
class QuotaNode:
    """A ClusterQueue (leaf) or a Cohort (inner node) of the quota tree."""
    name: str
    is_cohort: bool
    parent: "QuotaNode | None" = None
    children: list["QuotaNode"] = field(default_factory=list)
    quotas: dict[FR, Limits] = field(default_factory=dict)
    subtree: dict[FR, int] = field(default_factory=dict)
    usage: dict[FR, int] = field(default_factory=dict)
    bound: dict[FR, int] = field(default_factory=dict)

    def used(self, bound: bool = False) -> dict[FR, int]:
        return self.bound if bound else self.usage

    def guaranteed(self, fr: FR) -> int:
        """Quota this node keeps for itself: SubtreeQuota - lendingLimit (0 without a limit)."""
        q = self.quotas.get(fr)
        if q is None or q.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - q.lending_limit)

    def root(self) -> "QuotaNode":
        node = self
        while node.parent is not None:
            node = node.parent
        return node


def available(node: QuotaNode, fr: FR, bound: bool = False) -> int:
    """How much of fr this node may still use, counting what its ancestors can lend
    (bound=True: against the pods really running, reservations not counted)."""
    if node.parent is None:
        return max(0, node.subtree.get(fr, 0) - node.used(bound).get(fr, 0))
    usage = node.used(bound).get(fr, 0)
    guaranteed = node.guaranteed(fr)
    local = max(0, guaranteed - usage)
    from_parent = available(node.parent, fr, bound)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        stored_in_parent = node.subtree.get(fr, 0) - guaranteed
        used_in_parent = max(0, usage - guaranteed)
        from_parent = min(stored_in_parent - used_in_parent + q.borrowing_limit, from_parent)
    # Guaranteed quota is never stored in the parent, so an over-committed parent
    # (quota lowered under running pods) cannot take it away.
    return local + max(0, from_parent)


def potential_available(node: QuotaNode, fr: FR) -> int:
    """The most this node could ever use of fr if nothing else were running."""
    if node.parent is None:
        return node.subtree.get(fr, 0)
    total = node.guaranteed(fr) + potential_available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        total = min(node.subtree.get(fr, 0) + q.borrowing_limit, total)
    return total


def add_usage(node: QuotaNode, fr: FR, value: int, bound: bool = False) -> None:
    """Charge value to node; what exceeds its guaranteed quota is charged to the parent too."""
    used = node.used(bound)
    local = max(0, node.guaranteed(fr) - used.get(fr, 0))
    used[fr] = used.get(fr, 0) + value
    if node.parent is not None and value > local:
        add_usage(node.parent, fr, value - local, bound)


def remove_usage(node: QuotaNode, fr: FR, value: int, bound: bool = False) -> None:
    """Release value from node, and from the parent what had been stored there."""
    used = node.used(bound)
    stored_in_parent = used.get(fr, 0) - node.guaranteed(fr)
    used[fr] = used.get(fr, 0) - value
    if node.parent is not None and stored_in_parent > 0:
        remove_usage(node.parent, fr, min(value, stored_in_parent), bound)


def charge(node: QuotaNode, usage: dict[FR, int], sign: int = 1, bound: bool = False) -> None:
    """Charge a workload's usage to node (sign -1: release it): the one way usage changes, for the live
    tree (state/) and for a decision's simulations (core.overlay) alike."""
    change = add_usage if sign > 0 else remove_usage
    for fr, v in usage.items():
        change(node, fr, v, bound)


def compute_subtree(node: QuotaNode) -> None:
    """Recompute SubtreeQuota bottom-up: own nominal plus what each child lends."""
    node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
    for child in node.children:
        compute_subtree(child)
        for fr, quota in child.subtree.items():
            node.subtree[fr] = node.subtree.get(fr, 0) + quota - child.guaranteed(fr)


def borrowing(node: QuotaNode, fr: FR, extra: int = 0) -> bool:
    """True when node's usage (plus extra) goes above its own nominal quota."""
    return node.usage.get(fr, 0) + extra > node.subtree.get(fr, 0)


def local_available(node: QuotaNode, fr: FR) -> int:
    """Guaranteed quota (kept from the parent by a lendingLimit) still unused: Kueue's LocalAvailable."""
    return max(0, node.guaranteed(fr) - node.usage.get(fr, 0))


def lowest_subtree_that_fits(node: QuotaNode, fr: FR, value: int) -> QuotaNode | None:
    """The nearest Cohort whose subtree holds node's usage plus value (Kueue's
    FindHeightOfLowestSubtreeThatFits); None when node need not borrow (or has no Cohort), the root
    when no subtree holds it."""
    if node.parent is None or not borrowing(node, fr, value):
        return None
    remaining = value - local_available(node, fr)
    tracking = node.parent
    while tracking.parent is not None and borrowing(tracking, fr, remaining):
        remaining -= local_available(tracking, fr)
        tracking = tracking.parent
    return tracking


def lendable(node: QuotaNode, fr: FR) -> int:
    """What node offers to its parent: SubtreeQuota - guaranteed."""
    return node.subtree.get(fr, 0) - node.guaranteed(fr)


def limit(node: QuotaNode, fr: FR) -> int | None:
    """The most node may use of fr on its own level: a root its SubtreeQuota, a child with a
    borrowingLimit SubtreeQuota + borrowingLimit; None when only its ancestors bound it."""
    q = node.quotas.get(fr)
    if node.parent is None:
        return node.subtree.get(fr, 0)
    if q is not None and q.borrowing_limit is not None:
        return node.subtree.get(fr, 0) + q.borrowing_limit
    return None


def over_quota(roots, bound: bool = True) -> list[tuple[QuotaNode, FR, int, int]]:
    """Every (node, flavor/resource, used, limit) of the trees under roots where the usage is above
    what Kueue lets that node use: the quota invariant, empty when it holds."""
    out, stack = [], list(roots)
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        for fr, used in node.used(bound).items():
            cap = limit(node, fr)
            if cap is not None and used > cap:
                out.append((node, fr, used, cap))
    return out
