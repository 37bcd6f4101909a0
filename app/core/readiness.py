"""waitForPodsReady (seed 003): a workload whose pods are not all Ready in time is evicted whole
and requeued with an exponential backoff; after backoffLimitCount requeues it is deactivated.

A workload is a pod group, or a single pod. Requeues are counted per pod group, or per owner
(a controller recreates evicted pods as new pods of the same workload), or per pod.

Its times are on the wall clock (ClusterState.clock), not the monotonic timer: Kueue keeps them as API
timestamps (the Workload's Admitted and PodsReady conditions' lastTransitionTime, requeueState.requeueAt)
and judges them by its wall clock, and Quotient shows them as times (backoffUntil, admittedAt).
"""
from __future__ import annotations

from ..objects.meta import format_time
from ..objects.pod import PodInfo
from .decisions import Evict, Requeue
from .rules import PODS_READY_TIMEOUT
from .view import AdmissionView, ReadinessView
from .workload import Readiness, RequeueRecord, Workload, WorkloadKey, group_of, job_key, pod_key


def unit_of(pod: PodInfo) -> WorkloadKey:
    """What becomes ready together: the pod group; else the Job that owns the pod (Kueue admits a Job
    as one workload, so its pods are Ready together or not); else the pod itself."""
    group = group_of(pod)
    if group:
        return group
    if pod.owner is not None and pod.owner.kind == "Job" and pod.owner.uid:
        return job_key(pod)
    return pod_key(pod)


def requeue_key(pod: PodInfo) -> str:
    """What requeues are counted against, by its printed name: the group, else the owning controller, else
    the pod."""
    group = group_of(pod)
    if group:
        return str(group)
    if pod.owner is not None and pod.owner.name:
        return f"{pod.namespace}/{pod.owner.kind}/{pod.owner.name}"
    return pod.key


def all_ready(bound: list[PodInfo], members: list[PodInfo], finished: int, group_size: int | None) -> bool:
    """Kueue's PodsReady condition for a workload: all its pods bound and Ready. A pod group needs its size
    bound, counting members that Succeeded (Kueue counts them as ready); a Job's pods (or one pod) need
    every pod that exists bound."""
    if group_size is not None:
        complete = len(bound) + finished >= group_size
    else:
        complete = len(bound) == len(members)
    return complete and all(m.ready for m in bound)


def timed_out(r: Readiness, cfg, now: float) -> str:
    """Why the workload must be evicted now, or "" (Kueue's timeout, then recoveryTimeout)."""
    if r.ready_at is None and now - r.admitted_at >= cfg.timeout:
        return f"its pods were not all Ready within waitForPodsReady.timeout {cfg.timeout:g}s of admission"
    if r.unready_at is not None and cfg.recovery_timeout is not None and now - r.unready_at >= cfg.recovery_timeout:
        return (f"its pods lost readiness and did not recover within waitForPodsReady.recoveryTimeout "
                f"{cfg.recovery_timeout:g}s")
    return ""


def backoff_after(q: RequeueRecord | None, cfg, now: float) -> tuple[int, float, bool]:
    """(count, at, deactivated) after one more PodsReadyTimeout eviction: back off (exponentially, up to
    backoffMaxSeconds), or deactivate past backoffLimitCount."""
    count = (q.count if q is not None else 0) + 1
    if cfg.backoff_limit_count is not None and count > cfg.backoff_limit_count:
        return count, q.at if q is not None else 0.0, True
    return count, now + cfg.backoff(count), False


def after_eviction(q: RequeueRecord, cfg, now: float) -> None:
    """Count one more PodsReadyTimeout eviction on the record (backoff_after)."""
    q.count, q.at, q.deactivated = backoff_after(q, cfg, now)


def refusal(q: RequeueRecord | None, cfg, now: float, key: str) -> tuple[str, bool]:
    """(why a workload may not be admitted now, whether that is for good), or ("", False)."""
    if q is None:
        return "", False
    if q.deactivated:
        return (f"workload {key} is deactivated after {q.count} PodsReadyTimeout evictions "
                f"(backoffLimitCount {cfg.backoff_limit_count}); reactivate it with "
                f"POST /debug/workloads/{key}/reactivate", True)
    if q.at > now:
        return (f"workload {key} was requeued after PodsReadyTimeout eviction #{q.count}; it waits out a "
                f"{cfg.backoff(q.count):g}s backoff, until {format_time(q.at)}", False)
    return "", False


def queue_order(pod: PodInfo, record: RequeueRecord | None, cfg) -> tuple:
    """The pod's place in its ClusterQueue (BestEffortFIFO and StrictFIFO alike): priority high first, then
    its queue time, then its name. The queue time is its creationTimestamp; a workload requeued after a
    PodsReadyTimeout is a new pod created at the eviction, so with requeuingStrategy.timestamp Eviction (the
    default) it goes behind, and with Creation it keeps its workload's original place (seed 003)."""
    return _place(pod.priority or 0, pod.created, pod.key, record, cfg)


def workload_order(state: AdmissionView, workload: Workload) -> tuple:
    """queue_order of a workload (a pod group's: its highest priority, its oldest creation, its name), against
    the requeue record of the workload its template member counts under: where it stands among the pending pods."""
    cfg = state.config.wait_for_pods_ready
    record = state.requeues.get(requeue_key(workload.template)) if cfg is not None else None
    return _place(workload.priority, workload.created, workload.key_text, record, cfg)


def _place(priority: int, created: float | None, name: str, record: RequeueRecord | None, cfg) -> tuple:
    created = created or 0.0
    if cfg is not None and cfg.timestamp == "Creation" and record is not None and record.first_created is not None:
        created = record.first_created
    return (-priority, created, name)


def timeouts(state: ReadinessView, now: float) -> list[Requeue]:
    """Every workload whose pods were not all Ready in time (or lost readiness for recoveryTimeout): evicted
    whole and requeued with backoff (seed 003). Its members' holds and reservations end with it, before
    anything is written: none of them can bind meanwhile (filter and bind see the backoff). Units that
    count against one requeue key (the pods of one ReplicaSet, each its own unit) are counted one after
    the other, each on top of the last: in the order given, the last Requeue of a key holds its total."""
    cfg = state.config.wait_for_pods_ready
    if cfg is None:
        return []
    out: list[Requeue] = []
    counted: dict[str, RequeueRecord] = {}          # requeue key -> the record as the units so far left it
    for unit, record in state.readiness.items():
        why = timed_out(record, cfg, now)
        if not why:
            continue
        members = state.pods_ready.unit_members(unit)
        if not members:
            out.append(Requeue(unit, "", 0, 0.0, False, None, "", (), ()))
            continue
        key = requeue_key(members[0])
        q = counted.get(key) or state.requeues.get(key)
        count, at, deactivated = backoff_after(q, cfg, now)
        message = f"evicted whole and requeued: {why}"
        evictions = tuple(Evict(m, PODS_READY_TIMEOUT, message, "ready",
                                record={"workload": key, "requeues": count, "deactivated": deactivated})
                          for m in members if m.node_name)
        first = q.first_created if q is not None else min(
            (m.created for m in members if m.created is not None), default=None)
        owner = q.owner_uid if q is not None else (members[0].owner.uid if members[0].owner is not None else "")
        out.append(Requeue(unit, key, count, at, deactivated, first, owner, tuple(members), evictions))
        counted[key] = RequeueRecord(count, at, deactivated, first, owner)
    return out
