"""Whether the live source may be believed: ready, stale (a relist pending, a watch silent too long), alive.

/readyz asks `ready` and `readiness`; filter and bind ask `staleness` through sync.freshness. A watch that shows
neither an event nor a bookmark for stall_timeout has stalled; while a kind waits for a relist or is silent beyond
that limit the source is stale, naming it. SourceHealth is the part of a WatchSource that answers these questions,
from each kind's ReflectorState (seen, stale, reconnecting, absent: sync.reflector) and the source's heartbeat.
"""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .reflector import ReflectorState


class SourceHealth:
    """Health of a WatchSource: its watched kinds' states, whether the first lists are in, and its heartbeat."""

    def __init__(self, kinds: dict[str, ReflectorState], stall_timeout: float, heartbeat: float):
        self.kinds = kinds                  # each watched kind's state, in the order the first bulk pass applies them
        self.stall_timeout = stall_timeout
        self.heartbeat = heartbeat          # seconds between beats
        self.listed = False                 # the first lists of every resource applied
        self.task: asyncio.Task | None = None   # the source's loop
        self.beat = 0.0                     # monotonic time of the last beat
        # Watches that broke (a cut connection, an error, a 410), all kinds together: a write decided before one
        # is not sent again after it, as the API server may have restarted from a backup (sync.freshness).
        self.breaks = 0

    def started(self, task: asyncio.Task) -> None:
        """task is the source's loop, running from now."""
        self.task, self.beat = task, time.monotonic()

    async def beating(self) -> None:
        """Beat every heartbeat seconds while the event loop turns."""
        while True:
            self.beat = time.monotonic()
            await asyncio.sleep(self.heartbeat)

    @property
    def ready(self) -> bool:
        """True once the first list of every resource has been applied, no resource awaits a relist, and none
        has been silent for longer than stall_timeout."""
        return self.listed and not self.stale() and not self.silent()

    @property
    def readiness(self) -> str:
        """Why the source is not ready ("" when it is): the initial lists, the kinds a relist waits for, or
        the kinds whose watch has shown nothing for too long."""
        if not self.listed:
            return "initial lists not yet applied"
        why = self.staleness(reconnecting=False)     # a watch reconnecting is not a replica to take out
        return f"stale: {why}" if why else ""

    def stale(self) -> dict[str, str]:
        """kind -> why it must be listed again, for the kinds awaiting a relist."""
        return {kind: k.stale for kind, k in self.kinds.items() if k.stale}

    def silent(self) -> dict[str, float]:
        """kind -> seconds since its watch last showed anything (a list, an event or a bookmark), for the
        kinds silent longer than stall_timeout (a kind the API server does not serve is never silent)."""
        if not self.listed:
            return {}
        now = time.monotonic()
        ages = {kind: now - (now if k.seen is None else k.seen) for kind, k in self.kinds.items() if not k.absent}
        return {kind: age for kind, age in ages.items() if age > self.stall_timeout}

    def staleness(self, kind: str | None = None, reconnecting: bool = True) -> str:
        """"" when every source is fresh; else, for each stale kind, why: how long its watch has shown
        nothing, the relist it waits for (the server refused to go on from its resourceVersion, or the
        watch stalled), or (reconnecting) the watch whose connection broke and is not back yet; kind: that
        kind only."""
        if self._fresh(reconnecting):
            return ""
        silent = self.silent()
        if kind is not None:
            silent = {k: v for k, v in silent.items() if k == kind}
        stale = self.stale()
        parts = [f"the {k} watch has shown nothing for {silent[k]:.0f}s (limit {self.stall_timeout:g}s)"
                 for k in sorted(silent)]
        parts += [f"the {k} list is being read again ({why})" for k, why in sorted(stale.items())
                  if k not in silent and kind in (None, k)]
        if reconnecting:
            broken = {k: s.reconnecting for k, s in self.kinds.items() if s.reconnecting}
            parts += [f"the {k} watch is reconnecting ({why})" for k, why in sorted(broken.items())
                      if k not in silent and k not in stale and kind in (None, k)]
        return "; ".join(parts) + ("; Quotient relists it" if len(parts) == 1 else "; Quotient relists them") \
            if parts else ""

    def _fresh(self, reconnecting: bool) -> bool:
        """No kind is silent, awaiting a relist or (reconnecting) reconnecting: staleness's answer, "", in one pass
        over the kinds (filter asks it of every pod of a queue)."""
        horizon = time.monotonic() - self.stall_timeout if self.listed else None
        for k in self.kinds.values():
            if k.stale or (reconnecting and k.reconnecting):
                return False
            if horizon is not None and not k.absent and k.seen is not None and k.seen < horizon:
                return False
        return True

    @property
    def alive(self) -> bool:
        """The loop is running and its heartbeat is recent (the event loop is not stuck)."""
        task = self.task
        if task is None or task.done():
            return False
        return time.monotonic() - self.beat < 3 * self.heartbeat
