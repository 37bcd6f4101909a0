"""The admission gates being removed (scheduler.ungate): each removal issued and not yet shown by the watch, and
counts (for /metrics)."""
from __future__ import annotations

import asyncio

from ..objects.offered_nodes import OfferedNodes

REISSUE_AFTER = 5.0        # seconds: a gate removal whose watch event has not come by then is written again
RECLAIM_RETRY = 1.0        # seconds between two searches for victims for one gated head that found none (the ungate
                           # pass's or the reconcile's): as often as kube-scheduler retries a refused pod at the soonest
                           # (podInitialBackoffSeconds)


class Gates:
    """The gate removals issued and not yet shown by the watch, and counts for /metrics."""

    def __init__(self):
        self.issued: dict[str, float] = {}           # uid -> when its removal was issued (state.timer)
        self.group_tried: dict[object, float] = {}   # WorkloadKey -> when last decided
        self.no_victims: dict[str, float] = {}       # head uid -> when a search for victims last found none
        self._last_pass: tuple[int, float] = (-1, float("-inf"))    # (state.generation, state.timer) then
        self._shown_at = float("-inf")
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

    def track(self, task: asyncio.Task) -> None:
        """A removal being written: kept until it ends (settle waits for it)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def quiet(self, generation: int, now: float, within: float) -> bool:
        """Nothing in the state changed since the last pass, less than `within` ago (what only time changes, a
        refusal's memo or a hold running out, is seen after `within`); else this pass is noted as the last."""
        last_generation, at = self._last_pass
        if generation == last_generation and now - at < within:
            return True
        self._last_pass = (generation, now)
        return False

    def forget_shown(self, pods: dict, now: float, every: float = 1.0) -> None:
        """Forget the removals the watch has shown (the pod ungated or gone), once a second at most."""
        if now - self._shown_at < every:
            return
        self._shown_at = now
        for uid in [u for u in self.issued if u not in pods or not pods[u].gated]:
            del self.issued[uid]
        for uid in [u for u in self.no_victims if u not in pods]:
            del self.no_victims[uid]
        for key in [k for k, at in self.group_tried.items() if now - at > 60.0]:
            del self.group_tried[key]          # a group gone while gated (or decided long ago: decided anew)

    def may_reclaim(self, uid: str, now: float, retry: float) -> bool:
        """A head searches for victims again only `retry` after a search that found none: quota frees many times
        a second in a busy cohort, and each search weighs every admitted pod."""
        return now - self.no_victims.get(uid, float("-inf")) >= retry

    def found_no_victims(self, uid: str, now: float) -> None:
        self.no_victims[uid] = now
