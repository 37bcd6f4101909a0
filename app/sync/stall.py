"""The stall guard of one watch stream: one timer per stream, not one per event.

A watch that shows neither an event nor a bookmark for stall_timeout is stalled (Reflector.until_stalled). Timing
each line read took a timer armed and disarmed per event: at Kueue's scale test, tens of thousands of pod events a
minute (issue 32). Here one timer waits for the stall timeout after the last event seen; when it fires and an event
came meanwhile, it waits again from that event; when none came, it cancels the reading task, which reads that as
the stall (StallGuard.stalled)."""
from __future__ import annotations

import asyncio
import time
from typing import Callable


class StallGuard:
    """Armed for a stream's reads; `seen` says when the stream last showed something (monotonic seconds, or None)."""

    def __init__(self, limit: float, seen: Callable[[], float | None]):
        self.limit, self._seen = limit, seen
        self.fired = False
        self._task: asyncio.Task | None = None
        self._handle: asyncio.TimerHandle | None = None

    def __enter__(self) -> StallGuard:
        self._task = asyncio.current_task()
        self._arm(time.monotonic())
        return self

    def __exit__(self, *exc) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, now: float) -> None:
        seen = self._seen()
        silent = 0.0 if seen is None else max(0.0, now - seen)
        self._handle = asyncio.get_running_loop().call_later(max(0.0, self.limit - silent), self._check)

    def _check(self) -> None:
        self._handle = None
        seen, now = self._seen(), time.monotonic()
        if seen is not None and now - seen < self.limit:
            self._arm(now)              # something came since: wait from it
            return
        self.fired = True
        if self._task is not None:
            self._task.cancel()

    def stalled(self) -> bool:
        """In the reading task, on CancelledError: True when it was this guard's alone (its cancellation is taken
        back); one asked by anyone else (a shutdown) stands."""
        if not self.fired or self._task is None:
            return False
        self.fired = False
        return self._task.uncancel() == 0
