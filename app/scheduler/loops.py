"""The scheduler's background loops (the reconcile, the look for refusals that cleared), and whether each
still finishes its rounds: a loop stuck in an await makes /livez fail."""
from __future__ import annotations

import asyncio
import logging
from time import monotonic

from .ungate import UNGATE_INTERVAL

log = logging.getLogger("quotient.api")
CLEARED_INTERVAL = 1.0     # seconds between two looks for refusals that cleared
STALL_ROUNDS = 6        # a loop that has not finished a round for this many intervals is stuck
MIN_STALL = 60.0        # seconds, whatever the interval: a long round under load (slow API writes) is no stall


class Loops:
    """When each background loop last finished a round. A loop stuck in an await (an API call that
    never answers, a lock never released) makes /livez fail, so the kubelet restarts the process
    instead of leaving a replica that answers the verbs but never evicts or publishes again."""

    def __init__(self, clock=monotonic):
        self.clock = clock
        self.intervals: dict[str, float] = {}
        self.finished: dict[str, float] = {}

    def start(self, what: str, interval: float) -> None:
        self.intervals[what] = interval
        self.finished[what] = self.clock()

    def finish(self, what: str) -> None:
        self.finished[what] = self.clock()

    def age(self, what: str) -> float:
        """Seconds since `what` last finished a round (or started)."""
        return self.clock() - self.finished.get(what, self.clock())

    def stuck(self) -> str | None:
        """Why the process is not live, or None."""
        for what, interval in self.intervals.items():
            limit = max(MIN_STALL, STALL_ROUNDS * interval)
            age = self.age(what)
            if age > limit:
                return f"{what} loop has not finished a round for {age:.0f}s (limit {limit:.0f}s)"
        return None


async def every(interval: float, work, what: str, loops: Loops, leading=None) -> None:
    loops.start(what, interval)
    while True:
        await asyncio.sleep(interval)
        if leading is None or leading():     # standbys keep their state but decide and write nothing
            try:
                done = work()
                if asyncio.iscoroutine(done):
                    await done
            except Exception:   # a bug must not stop the loop: it is logged and tried again next time
                log.exception("%s failed", what)
        loops.finish(what)


def start(scheduler, interval: float, loops: Loops, leading=None) -> list[asyncio.Task]:
    """The reconcile every interval, the gated pods' admission every UNGATE_INTERVAL, and the look for cleared
    refusals at least every CLEARED_INTERVAL; only on the leader (leading) when there is an election."""
    return [asyncio.create_task(every(interval, scheduler.reconcile, "reconcile", loops, leading)),
            asyncio.create_task(every(UNGATE_INTERVAL, scheduler.ungate, "ungate", loops, leading)),
            asyncio.create_task(every(min(CLEARED_INTERVAL, interval), scheduler.note_cleared, "refusals",
                                      loops, leading))]
