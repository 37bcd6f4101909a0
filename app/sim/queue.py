"""kube-scheduler's scheduling queue, where it matters to decisions (../shared/scenarios/FORMAT.md, step 4).

A pod that fails waits in the unschedulable pool until a change kube-scheduler itself watches (a pod or
a node added, changed or deleted; not a Kueue object) or until podMaxInUnschedulablePodsDuration
(5 minutes), then is tried again once its backoff is over: 1 s, doubling with each failed attempt up to
10 s (pkg/scheduler/backend/queue/scheduling_queue.go, v1.36). A pod an extender refused has no
rejecting plugin, so any such change moves it.
"""
from __future__ import annotations

INITIAL_BACKOFF = 1.0            # podInitialBackoffSeconds
MAX_BACKOFF = 10.0               # podMaxBackoffSeconds
MAX_UNSCHEDULABLE = 300.0        # podMaxInUnschedulablePodsDuration


class SchedulingQueue:
    def __init__(self):
        self.active: set[str] = set()
        self.backoff: dict[str, float] = {}          # pod key -> when its backoff is over (moved, waiting it out)
        self.unschedulable: dict[str, float] = {}    # pod key -> since when
        self.failures: dict[str, int] = {}           # pod key -> failed attempts
        self.failed_at: dict[str, float] = {}

    def add(self, key: str) -> None:
        """A new pod (or one nominated after preemption): tried at once."""
        self._forget_waiting(key)
        self.active.add(key)

    def failed(self, key: str, now: float, moved: bool = False) -> None:
        """An attempt failed at now; moved: a change came during the attempt, so it backs off at once
        instead of waiting in the unschedulable pool (kube-scheduler's moveRequestCycle)."""
        self.failures[key] = self.failures.get(key, 0) + 1
        self.failed_at[key] = now
        self.active.discard(key)
        if moved:
            self.backoff[key] = self.backoff_over(key)
        else:
            self.unschedulable[key] = now

    def backoff_over(self, key: str) -> float:
        n = self.failures.get(key, 0)
        if not n:
            return 0.0
        return self.failed_at[key] + min(MAX_BACKOFF, INITIAL_BACKOFF * 2 ** min(n - 1, 16))

    def changed(self, now: float) -> None:
        """A pod or node changed: every unschedulable pod moves, to be tried once its backoff is over."""
        for key in list(self.unschedulable):
            self._move(key, now)

    def _move(self, key: str, now: float) -> None:
        del self.unschedulable[key]
        over = self.backoff_over(key)
        if over <= now:
            self.active.add(key)
        else:
            self.backoff[key] = over

    def due(self, now: float) -> None:
        """Time passed: backoffs that are over go active, pods unschedulable for 5 minutes are moved."""
        for key, over in list(self.backoff.items()):
            if over <= now:
                del self.backoff[key]
                self.active.add(key)
        for key, since in list(self.unschedulable.items()):
            if now - since >= MAX_UNSCHEDULABLE:
                self._move(key, now)

    def next_time(self) -> float | None:
        """When the queue next has something to do by itself (a backoff over, a 5-minute flush)."""
        times = list(self.backoff.values()) + [since + MAX_UNSCHEDULABLE for since in self.unschedulable.values()]
        return min(times) if times else None

    def waiting(self) -> bool:
        """Pods that only the 5-minute flush (or a change) would try again."""
        return bool(self.unschedulable) and not self.backoff and not self.active

    def retry_now(self) -> None:
        """Try every unschedulable pod at once (the simulator's last pass: would a retry change anything?)."""
        self.active.update(self.unschedulable)
        self.unschedulable.clear()

    def forget(self, key: str) -> None:
        """The pod is bound or gone."""
        self.active.discard(key)
        self._forget_waiting(key)
        self.failures.pop(key, None)
        self.failed_at.pop(key, None)

    def _forget_waiting(self, key: str) -> None:
        self.backoff.pop(key, None)
        self.unschedulable.pop(key, None)
