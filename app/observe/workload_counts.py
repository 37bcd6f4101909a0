"""Workloads as Kueue counts them, for /metrics: a Job's pods or a pod group's members are one workload, a lone pod
is one. Kueue's gauges and counters count Workload objects (a 4-pod Job admitted is one admission), and
dashboards and alerts written for Kueue compare them with those numbers.

The key of a workload is a WorkloadKey: core.workload.group_of(pod), or the pod itself with its uid. It is only
compared and counted, never printed. What a workload is, per ClusterQueue, follows
Kueue's cache (pkg/cache/scheduler/clusterqueue.go) and queue manager (pkg/cache/queue/metrics.go): admitted when
one of its pods is charged (bound), reserving when one holds a reservation and none is charged, pending when
none holds anything; pending is "inadmissible" when Quotient refused it and the refusal still holds (it waits for
a change in the cluster: Kueue's inadmissible workloads, not retried until something could make them fit),
else "active".
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.workload import POD, WorkloadKey, group_of

EPISODES_KEPT = 4096       # workloads remembered by Episodes before those whose pods are all gone are forgotten


def workload_key(pod) -> WorkloadKey:
    """The workload a pod is part of (its group or Job, else itself, by its uid as Kueue makes a Workload per pod
    object): the key Kueue's counts are per."""
    return group_of(pod) or WorkloadKey(POD, pod.namespace, pod.name, pod.uid)


def workload_key_of(pods, uid: str) -> WorkloadKey:
    """workload_key of the pod with this uid; a pod the store no longer has is a workload of its own, by uid."""
    pod = pods.get(uid)
    return workload_key(pod) if pod is not None else WorkloadKey(POD, "", "", uid)


def priority_class(pod) -> str:
    """Kueue's priority_class label (workload/patching.PriorityClassName): the WorkloadPriorityClass the pod's
    label names, else its PriorityClass, else ""."""
    return pod.workload_priority_class or pod.priority_class or ""


@dataclass(slots=True)
class QueueWorkloads:
    active: int = 0            # pending, to be tried
    inadmissible: int = 0      # pending, refused and waiting for a change
    reserving: int = 0         # holding a reservation, none of its pods bound yet
    admitted: int = 0          # one of its pods (or more) bound and charged


def counts(state, refusals=None) -> dict[str, QueueWorkloads]:
    """ClusterQueue -> its workloads by where they stand, each counted once whatever its number of pods."""
    pods, reservations = state.pods, state.reservations
    out = {name: QueueWorkloads() for name in state.cluster_queues}
    admitted: dict[str, set[WorkloadKey]] = {}
    for name, uids in state.admitted.by_queue.items():
        admitted[name] = {workload_key_of(pods, u) for u in uids}
    reserving: dict[str, set[WorkloadKey]] = {}
    for uid, r in reservations.items():
        key = workload_key_of(pods, uid)
        if key not in admitted.get(r.charge.cluster_queue, ()):
            reserving.setdefault(r.charge.cluster_queue, set()).add(key)
    for name, found in out.items():
        found.admitted = len(admitted.get(name, ()))
        held = reserving.get(name, set())
        found.reserving = len(held)
        taken = admitted.get(name, set()) | held
        refused: dict[WorkloadKey, bool] = {}       # pending workload -> refused and still waiting for a change
        for _, uid in state.pending.get(name, ()):
            if uid in reservations:
                continue
            key = workload_key_of(pods, uid)
            if key in taken:
                continue
            refused[key] = refused.get(key, False) or (refusals is not None and refusals.holds(uid))
        found.inadmissible = sum(refused.values())
        found.active = len(refused) - found.inadmissible
    return out


class Episodes:
    """Counts an event once per workload: the first of its pods met counts, and the pods it had then (its members
    the state knows, the pod itself) count no more for that event. The workload made again after an eviction has
    new pods and counts anew, as Kueue counts a Workload admitted or evicted again."""

    def __init__(self):
        self._by: dict[WorkloadKey, set[str]] = {}     # workload -> the uids of its pods when it was counted
        self._limit = EPISODES_KEPT

    def first(self, state, pod) -> bool:
        key = workload_key(pod)
        seen = self._by.get(key)
        if seen is not None and pod.uid in seen:
            return False
        if len(self._by) >= self._limit:
            self._forget_gone(state)
            self._limit = max(EPISODES_KEPT, 2 * len(self._by))     # a walk per as many workloads again at most
        self._by[key] = set(state.store.groups.get(key, ())) | {pod.uid}
        return True

    def _forget_gone(self, state) -> None:
        pods = state.pods
        for key in [k for k, uids in self._by.items() if not any(u in pods for u in uids)]:
            del self._by[key]
