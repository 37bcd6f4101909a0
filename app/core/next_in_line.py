"""waitForPodsReady at admission: a requeued workload's backoff, and blockAdmission, with its order: which
workload is admitted next, across every ClusterQueue.

With blockAdmission Kueue admits one workload at a time: once the admitted ones are all Ready, its next scheduling
cycle takes the heads of every ClusterQueue and admits the first that fits in its order (pkg/scheduler/scheduler.go,
classicalIterator: within nominal quota before borrowing, higher priority, then the queue time; a workload requeued
after a PodsReadyTimeout is ordered by its eviction time with requeuingStrategy.timestamp Eviction, by its creation
with Creation). Kueue's podsready integration test "Should unblock admission of new workloads in other
ClusterQueues once the admitted workload exceeds timeout" has it: the timed-out workload's requeued pod, back
after a 1 s backoff, does not take the turn of the other ClusterQueue's workload that waits longer.

kube-scheduler asks about the pods one by one and after each refusal's backoff (up to 10 s), so the workload that
goes next keeps its place while kube-scheduler brings it, now or once its backoff ends (PresenceView.expected); one
it is not bringing (parked, gone from its queue) keeps nothing, and the next one goes.
"""
from __future__ import annotations

import itertools
from weakref import WeakKeyDictionary

from ..objects.pod import PodInfo
from .admission import Verdict, decide, pending_workloads
from .readiness import refusal, requeue_key, unit_of, workload_order
from .view import GateView
from .workload import GROUP, Workload, group_of

_heads: WeakKeyDictionary = WeakKeyDictionary()     # state -> ((generation, second), the heads then)


def admission_gate(state: GateView, pod: PodInfo) -> str:
    """waitForPodsReady at admission: a requeued workload's backoff, a deactivated workload, and
    blockAdmission (no admission while an admitted workload is not yet all Ready). "" when none holds."""
    cfg = state.config.wait_for_pods_ready
    if cfg is None:
        return ""
    key = requeue_key(pod)
    why = refusal(state.requeues.get(key), cfg, state.clock(), key)[0]
    if why or not cfg.block_admission:
        return why
    return block_admission(state, pod)


def block_admission(state: GateView, pod: PodInfo) -> str:
    """waitForPodsReady.blockAdmission: why pod waits for another workload to be all Ready, or ""."""
    mine = unit_of(pod)
    unready = (unit for unit, r in state.readiness.items() if r.ready_at is None or r.unready_at is not None)
    reserved = (unit_of(other) for other in map(state.pods.get, state.reservations)
                if other is not None and other.queue_name)         # admitted at filter, not bound yet
    blocker = next((unit for unit in itertools.chain(unready, reserved) if unit != mine), None)
    if blocker is None:
        return next_in_line(state, pod)
    return (f"waitForPodsReady.blockAdmission: workload {blocker.shown} is admitted and "
            "not all Ready; nothing else is admitted meanwhile")


def next_in_line(state: GateView, pod: PodInfo) -> str:
    """Why pod's workload waits for another one that goes first in blockAdmission's order, or "" (it goes first, it
    would not be admitted now anyway, or no other admissible workload is expected)."""
    unit = _workload_of(state, pod)
    mine = decide(state, unit)
    if not mine.admit or not mine.managed:
        return ""
    place, own = _order(state, unit, mine), group_of(pod) or pod.uid
    for other, verdict in heads(state):
        if (group_of(other.template) or other.uid) != own and _order(state, other, verdict) < place:
            return (f"waitForPodsReady.blockAdmission: workloads are admitted one at a time, in Kueue's order "
                    f"across ClusterQueues (within nominal quota first, then priority, then queue time: a requeued "
                    f"workload's eviction time with requeuingStrategy.timestamp Eviction); {_shown(other)} of "
                    f"ClusterQueue {verdict.cluster_queue} comes before this pod's workload and is admitted next")
    return ""


def heads(state: GateView) -> list[tuple[Workload, Verdict]]:
    """Each ClusterQueue's first pending workload that kube-scheduler brings and that would be admitted now, with
    its verdict: worked out once per state generation and second (note_cleared asks for every refused pod)."""
    stamp = (state.generation, int(state.timer()))
    cached = _heads.get(state)
    if cached is None or cached[0] != stamp:
        found = (_first_admissible(state, cq) for cq in state.cluster_queues.values())
        cached = _heads[state] = (stamp, [head for head in found if head is not None])
    return cached[1]


def _workload_of(state: GateView, pod: PodInfo) -> Workload:
    """What admission decides on for pod's workload: its group's members still to place, or itself."""
    key = group_of(pod)
    members = [m for m in state.store.members(key) if not m.node_name] if key else []
    return Workload.of_group(key, members) if members else Workload.of_pod(pod)


def _first_admissible(state: GateView, cq) -> tuple[Workload, Verdict] | None:
    """Kueue's head of the ClusterQueue: its first pending workload that kube-scheduler brings and that would be
    admitted now (under BestEffortFIFO one that does not fit is set aside; under StrictFIFO it blocks those
    behind it), with its verdict."""
    passed_over: set = set()
    for other in pending_workloads(state, cq):
        shape = other.shape
        if shape in passed_over or not _expected(state, other):
            continue
        verdict = decide(state, other)
        if verdict.admit and verdict.managed:
            return other, verdict
        if cq.queueing_strategy == "StrictFIFO":
            return None
        passed_over.add(shape)
    return None


def _expected(state: GateView, workload: Workload) -> bool:
    key = group_of(workload.template)
    pods = state.store.members(key) if key else [workload.template]
    return any(state.queues.expected(m.uid) for m in pods if not m.node_name)


def _order(state: GateView, workload: Workload, verdict: Verdict) -> tuple:
    borrows = bool(verdict.assignment is not None and verdict.assignment.borrowing)
    return borrows, workload_order(state, workload)


def _shown(workload: Workload) -> str:
    key = group_of(workload.template)
    if key is None:
        return f"pod {workload.key_text}"
    return f"pod group {key}" if key.kind == GROUP else f"Job {key}"     # (a Job by its printed name, as ever)
