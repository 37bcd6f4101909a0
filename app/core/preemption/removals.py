"""Virtual removal of candidates (core.overlay), always taken back: how a preemption search asks "would the
preemptor fit if these were gone"."""
from __future__ import annotations

from ..overlay import Overlay
from ..resource_node import FR, QuotaNode, available, borrowing


class Removals(Overlay):
    """Candidates virtually removed from the decisions' quota tree; undo() puts every one back."""

    def remove(self, c) -> None:
        self.charge(c, c.cluster_queue, c.usage, -1)

    def restore(self, c) -> None:
        self.take_back(c)

    @property
    def done(self):
        return self.applied


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
