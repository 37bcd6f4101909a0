"""Each LocalQueue's workloads and quota, counted as Kueue counts them, for its .status and its local_queue_* metrics.

A workload is what Kueue makes one Workload of: a Job's pods or a pod group's members are one
(app.core.workload.group_of), a lone pod is one (its uid). Kueue's cache keeps these per LocalQueue
(pkg/cache/scheduler/localqueue.go: reservingWorkloads, admittedWorkloads, totalReserved, admittedUsage); here
they are read off the state in one pass when a status is written or Prometheus scrapes. A workload that holds
quota (a pod bound, or reserved by filter until its bind) reserves it; one with a bound pod is admitted (Kueue
admits a workload whole, so a Job whose first pods are bound is admitted); a pending workload is one none of
whose pods holds quota.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.workload import WorkloadKey
from .workload_counts import workload_key

FR = tuple[str, str]      # (flavor, resource)


@dataclass(slots=True)
class LocalQueueStats:
    pending: set[WorkloadKey] = field(default_factory=set)      # workloads none of whose pods holds quota
    reserving: set[WorkloadKey] = field(default_factory=set)    # workloads holding quota (admitted ones too)
    admitted: set[WorkloadKey] = field(default_factory=set)     # workloads with a bound pod
    reserved: dict[FR, int] = field(default_factory=dict)   # quota held: bound pods and reservations
    used: dict[FR, int] = field(default_factory=dict)       # quota of bound pods
    pending_pods: dict[WorkloadKey, list[str]] = field(default_factory=dict)   # pending workload -> its pods' uids


def _add(into: dict[FR, int], usage: dict[FR, int]) -> None:
    for fr, v in usage.items():
        into[fr] = into.get(fr, 0) + v


def local_queue_stats(state) -> dict[str, LocalQueueStats]:
    """LocalQueue key (namespace/name) -> its workloads and quota; every LocalQueue has an entry."""
    out = {key: LocalQueueStats() for key in state.local_queues}

    def stats_of(pod) -> LocalQueueStats | None:
        return out.get(f"{pod.namespace}/{pod.queue_name}") if pod is not None and pod.queue_name else None

    for uid, charge in state.admitted.items():
        pod = state.pods.get(uid)
        s = stats_of(pod)
        if s is None:
            continue
        key = workload_key(pod)
        s.admitted.add(key)
        s.reserving.add(key)
        _add(s.used, charge.usage)
        _add(s.reserved, charge.usage)
    for uid, r in state.reservations.items():
        pod = state.pods.get(uid)
        s = stats_of(pod)
        if s is None:
            continue
        s.reserving.add(workload_key(pod))
        _add(s.reserved, r.charge.usage)
    for items in state.pending.values():       # the whole queue, not the maxQueueScan window decisions walk
        for _, uid in items:
            pod = state.pods.get(uid)
            s = stats_of(pod)
            if s is None or uid in state.reservations:
                continue
            key = workload_key(pod)
            if key not in s.reserving:
                s.pending.add(key)
                s.pending_pods.setdefault(key, []).append(uid)
    return out
