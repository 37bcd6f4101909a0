"""The admission gates being removed (scheduler.ungate): each removal issued and not yet shown by the watch, and
counts (for /metrics)."""
from __future__ import annotations

import asyncio

from ..objects.offered_nodes import OfferedNodes

REISSUE_AFTER = 5.0        # seconds: a gate removal whose watch event has not come by then is written again


class Gates:
    """The gate removals issued and not yet shown by the watch, and counts for /metrics."""

    def __init__(self):
        self.issued: dict[str, float] = {}           # uid -> when its removal was issued (state.timer)
        self.group_tried: dict[object, float] = {}   # WorkloadKey -> when last decided
        self.ungated = 0
        self.failed = 0
        self._tasks: set[asyncio.Task] = set()
        self._offered: tuple[object, OfferedNodes] | None = None

    def offered(self, state) -> OfferedNodes:
        """Every node, as kube-scheduler offers a pod whose node filters pass everywhere: the quota decision does
        not depend on which node (filter narrows to the flavor's nodes later)."""
        key = (state.ledger.membership_generation, len(state.nodes))
        if self._offered is None or self._offered[0] != key:
            self._offered = (key, OfferedNodes(sorted(state.nodes)))
        return self._offered[1]

    def due(self, uid: str, now: float) -> bool:
        at = self.issued.get(uid)
        return at is None or now - at > REISSUE_AFTER

    async def settle(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
