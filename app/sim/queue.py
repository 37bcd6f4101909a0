"""kube-scheduler's scheduling queue, where it matters to decisions (../shared/scenarios/FORMAT.md, step 4),
as v1.36 really behaves (pkg/scheduler/backend/queue/scheduling_queue.go, schedule_one.go).

A failed attempt's rejecting plugins are the in-tree filters that rejected a node (a FitError); an
extender's FailedNodes add none, and an extender's Error makes no FitError at all. With no rejecting
plugin the pod goes to the backoff queue (determineSchedulingHintForInFlightPod: queueAfterBackoff).
With some, it waits in the unschedulable pool until an event one of their queueing hints accepts (during
the attempt or after it), or for podMaxInUnschedulablePodsDuration (5 minutes); then it is tried again
once its backoff is over: 1 s, doubling with each failed attempt up to 10 s.
"""
from __future__ import annotations

INITIAL_BACKOFF = 1.0            # podInitialBackoffSeconds
MAX_BACKOFF = 10.0               # podMaxBackoffSeconds
MAX_UNSCHEDULABLE = 300.0        # podMaxInUnschedulablePodsDuration

# Cluster events the simulated cluster makes (kube-scheduler's labels), and which of them each in-tree
# filter's queueing hint answers Queue for (its EventsToRegister and hint functions, v1.36). An update of an
# assigned or unscheduled pod's metadata or status is UpdatePodOther: no default plugin accepts it.
ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE, ASSIGNED_POD_DELETE = "AssignedPodAdd", "AssignedPodUpdate", "AssignedPodDelete"
UNSCHEDULED_POD_ADD, UNSCHEDULED_POD_UPDATE, UNSCHEDULED_POD_DELETE = \
    "UnscheduledPodAdd", "UnscheduledPodUpdate", "UnscheduledPodDelete"
NOMINATED_POD_DELETE = "NominatedPodDelete"      # a pending pod with a nominatedNodeName deleted
HINTS = {
    # isSchedulableAfterPodEvent: any deletion of a scheduled (or nominated) pod may free room.
    "NodeResourcesFit": frozenset({ASSIGNED_POD_DELETE, NOMINATED_POD_DELETE}),
    "TaintToleration": frozenset(),              # Node added or its taints changed; the pod's own tolerations
    "NodeAffinity": frozenset(),                 # Node added or its labels changed
    "NodeUnschedulable": frozenset(),            # Node added or its spec.unschedulable changed
}


def deletion(pod) -> str:
    """The event a pod's deletion is to kube-scheduler: of a bound pod, of a pending one it nominated a node
    for, or of another pending one."""
    return ASSIGNED_POD_DELETE if pod.node_name else NOMINATED_POD_DELETE if pod.nominated_node \
        else UNSCHEDULED_POD_DELETE


def rejector(reason: str) -> str:
    """The in-tree filter plugin behind one of the simulator's node failure reasons."""
    if reason.startswith("Insufficient"):
        return "NodeResourcesFit"
    if "taint" in reason:
        return "TaintToleration"
    if "unschedulable" in reason:
        return "NodeUnschedulable"
    return "NodeAffinity"


def worth_requeuing(rejectors: frozenset[str], events) -> bool:
    """isPodWorthRequeuing over these events: no rejector (queueAfterBackoff), or a hint of one accepts one."""
    return not rejectors or any(e in HINTS.get(p, ()) for p in rejectors for e in events)


class SchedulingQueue:
    def __init__(self):
        self.active: set[str] = set()
        self.backoff: dict[str, float] = {}          # pod key -> when its backoff is over (moved, waiting it out)
        self.unschedulable: dict[str, float] = {}    # pod key -> since when
        self.rejectors: dict[str, frozenset[str]] = {}   # pod key -> the plugins that rejected it last
        self.failures: dict[str, int] = {}           # pod key -> failed attempts
        self.failed_at: dict[str, float] = {}

    def add(self, key: str) -> None:
        """A new pod (or one nominated after preemption): tried at once."""
        self._forget_waiting(key)
        self.active.add(key)

    def failed(self, key: str, now: float, rejectors: frozenset[str] = frozenset(), during=()) -> None:
        """An attempt failed at now, rejected by these in-tree plugins (none for an extender's Error or
        FailedNodes alone); during: the events that came while it was in flight."""
        self.failures[key] = self.failures.get(key, 0) + 1
        self.failed_at[key] = now
        self.active.discard(key)
        self.rejectors[key] = rejectors
        if worth_requeuing(rejectors, during):
            self.backoff[key] = self.backoff_over(key)
        else:
            self.unschedulable[key] = now

    def backoff_over(self, key: str) -> float:
        n = self.failures.get(key, 0)
        if not n:
            return 0.0
        return self.failed_at[key] + min(MAX_BACKOFF, INITIAL_BACKOFF * 2 ** min(n - 1, 16))

    def changed(self, now: float, events) -> None:
        """Cluster events: every unschedulable pod one of whose rejectors' hints accepts one moves, to be
        tried once its backoff is over."""
        for key in list(self.unschedulable):
            if worth_requeuing(self.rejectors.get(key, frozenset()), events):
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

    def waiting(self) -> set[str]:
        """The pods waiting for a retry, in the backoff queue or the unschedulable pool."""
        return self.backoff.keys() | self.unschedulable.keys()

    def retry_now(self) -> None:
        """Try every waiting pod at once (the simulator's last pass: would a retry change anything?)."""
        self.active.update(self.waiting())
        self.backoff.clear()
        self.unschedulable.clear()

    def forget(self, key: str) -> None:
        """The pod is bound or gone."""
        self.active.discard(key)
        self._forget_waiting(key)
        self.failures.pop(key, None)
        self.failed_at.pop(key, None)
        self.rejectors.pop(key, None)

    def _forget_waiting(self, key: str) -> None:
        self.backoff.pop(key, None)
        self.unschedulable.pop(key, None)
