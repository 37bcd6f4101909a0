"""Virtual removal of candidates from the quota tree, always taken back: how a preemption search asks
"would the preemptor fit if these were gone"."""
from __future__ import annotations

from ..quota import FR, QuotaNode, add_usage, available, borrowing, remove_usage


class Removals:
    """Candidates virtually removed from the quota tree; undo() puts every one back."""

    def __init__(self, state):
        self.state, self.done = state, []

    def remove(self, c) -> None:
        node = self.state.quota_node(c.cluster_queue)
        if node is not None:
            for fr, v in c.usage.items():
                remove_usage(node, fr, v)
        self.done.append(c)

    def restore(self, c) -> None:
        node = self.state.quota_node(c.cluster_queue)
        if node is not None:
            for fr, v in c.usage.items():
                add_usage(node, fr, v)
        self.done.remove(c)

    def undo(self) -> None:
        for c in list(reversed(self.done)):
            self.restore(c)


def quota_fits(pre, allow_borrowing: bool) -> bool:
    """The preemptor's usage fits its ClusterQueue now (without borrowing unless allowed)."""
    for fr, v in pre.usage.items():
        if not allow_borrowing and borrowing(pre.node, fr, v):
            return False
        if v > available(pre.node, fr):
            return False
    return True


def borrows_after(pre) -> bool:
    """Whether the preemptor's ClusterQueue would be above its nominal quota once the pod is admitted."""
    return any(borrowing(pre.node, fr, v) for fr, v in pre.usage.items())


def is_borrowing(node: QuotaNode, needs: set[FR]) -> bool:
    """The queue uses more than its own quota of a resource the preemptor needs."""
    return any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in needs)


def given_back(rm: Removals, pre, targets: list, allow_borrowing: bool) -> list:
    """Minimise (seed 000: "反向遍历初始目标列表"): walking the targets backwards, give back each one
    the preemptor still fits without."""
    for i in range(len(targets) - 2, -1, -1):
        rm.restore(targets[i].candidate)
        if quota_fits(pre, allow_borrowing):
            del targets[i]
        else:
            rm.remove(targets[i].candidate)
    return targets
