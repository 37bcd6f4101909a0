"""The usage overlay: charges and removals a decision simulates ("would it fit if these were gone, or
those ahead of it admitted"), on the decisions' mirror of the quota tree (ClusterState.quota_tree), each
taken back before the decision ends. The live tree is never touched by a decision; this and the state's
own charges go through the one charging primitive, core.resource_node.charge."""
from __future__ import annotations

from .resource_node import FR, QuotaNode, charge
from .view import QuotaNodes


class Overlay:
    """Simulated charges keyed by what they stand for (a candidate, a pod ahead); a context manager that
    takes every one back on exit, the last first."""

    def __init__(self, view: QuotaNodes):
        self.view = view
        self._applied: dict[object, tuple[QuotaNode | None, dict[FR, int], int]] = {}

    def charge(self, key, cluster_queue: str, usage: dict[FR, int], sign: int = 1) -> None:
        """Charge usage (sign -1: remove it) to the ClusterQueue's node, and above it as core.resource_node does."""
        node = self.view.ledger.quota_node(cluster_queue)
        if node is not None:
            charge(node, usage, sign)
        self._applied[key] = (node, usage, sign)

    def take_back(self, key) -> None:
        node, usage, sign = self._applied.pop(key)
        if node is not None:
            charge(node, usage, -sign)

    def undo(self) -> None:
        for key in reversed(list(self._applied)):
            self.take_back(key)

    @property
    def applied(self):
        """The keys charged and not yet taken back, in order."""
        return self._applied.keys()

    def __enter__(self) -> "Overlay":
        return self

    def __exit__(self, *exc) -> None:
        self.undo()
