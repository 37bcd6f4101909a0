"""Whether the live source may be believed: ready, stale (a relist pending, a watch silent too long), alive.

/readyz asks `ready` and `readiness`; filter and bind ask `staleness` through sync.freshness. A watch that shows
neither an event nor a bookmark for stall_timeout has stalled; while a kind waits for a relist or is silent beyond
that limit the source is stale, naming it. SourceHealth is WatchSource's part that answers these questions from
the reflectors' bookkeeping (seen, stale, reconnecting, absent) and the source's heartbeat.
"""
from __future__ import annotations

import time


class SourceHealth:
    """Health of a WatchSource, from the attributes it keeps: _ready, resources, seen, absent, stale, reconnecting,
    stall_timeout, _task, _beat, heartbeat."""

    @property
    def ready(self) -> bool:
        """True once the first list of every resource has been applied, no resource awaits a relist, and none
        has been silent for longer than stall_timeout."""
        return self._ready and not self.stale and not self.silent()

    @property
    def readiness(self) -> str:
        """Why the source is not ready ("" when it is): the initial lists, the kinds a relist waits for, or
        the kinds whose watch has shown nothing for too long."""
        if not self._ready:
            return "initial lists not yet applied"
        why = self.staleness(reconnecting=False)     # a watch reconnecting is not a replica to take out
        return f"stale: {why}" if why else ""

    def silent(self) -> dict[str, float]:
        """kind -> seconds since its watch last showed anything (a list, an event or a bookmark), for the
        kinds silent longer than stall_timeout (a kind the API server does not serve is never silent)."""
        if not self._ready:
            return {}
        now = time.monotonic()
        ages = {r.kind: now - self.seen.get(r.kind, now) for r in self.resources if r.kind not in self.absent}
        return {kind: age for kind, age in ages.items() if age > self.stall_timeout}

    def staleness(self, kind: str | None = None, reconnecting: bool = True) -> str:
        """"" when every source is fresh; else, for each stale kind, why: how long its watch has shown
        nothing, the relist it waits for (the server refused to go on from its resourceVersion, or the
        watch stalled), or (reconnecting) the watch whose connection broke and is not back yet; kind: that
        kind only."""
        silent = self.silent()
        if kind is not None:
            silent = {k: v for k, v in silent.items() if k == kind}
        parts = [f"the {k} watch has shown nothing for {silent[k]:.0f}s (limit {self.stall_timeout:g}s)"
                 for k in sorted(silent)]
        parts += [f"the {k} list is being read again ({why})" for k, why in sorted(self.stale.items())
                  if k not in silent and kind in (None, k)]
        if reconnecting:
            parts += [f"the {k} watch is reconnecting ({why})" for k, why in sorted(self.reconnecting.items())
                      if k not in silent and k not in self.stale and kind in (None, k)]
        return "; ".join(parts) + ("; Quotient relists it" if len(parts) == 1 else "; Quotient relists them") \
            if parts else ""

    @property
    def alive(self) -> bool:
        """The loop is running and its heartbeat is recent (the event loop is not stuck)."""
        task = self._task
        if task is None or task.done():
            return False
        return time.monotonic() - self._beat < 3 * self.heartbeat
