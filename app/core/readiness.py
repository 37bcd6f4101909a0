"""waitForPodsReady (seed 003): a workload whose pods are not all Ready in time is evicted whole
and requeued with an exponential backoff; after backoffLimitCount requeues it is deactivated.

A workload is a pod group, or a single pod. Requeues are counted per pod group, or per owner
(a controller recreates evicted pods as new pods of the same workload), or per pod.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..objects.meta import format_time
from ..objects.pod import PodInfo
from .gangs import group_of

PODS_READY_TIMEOUT = "PodsReadyTimeout"


def unit_of(pod: PodInfo) -> str:
    """What becomes ready together: the pod group; else the Job that owns the pod (Kueue admits a Job
    as one workload, so its pods are Ready together or not); else the pod itself."""
    group = group_of(pod)
    if group:
        return group
    if pod.owner is not None and pod.owner.kind == "Job" and pod.owner.uid:
        return f"job:{pod.namespace}/{pod.owner.name}:{pod.owner.uid}"
    return f"pod:{pod.key}"


def shown(unit: str) -> str:
    """A unit as an admin names it: namespace/group, namespace/Job/name, namespace/pod."""
    if unit.startswith("job:"):
        ns_name = unit[4:].rsplit(":", 1)[0]
        ns, name = ns_name.split("/", 1)
        return f"{ns}/Job/{name}"
    return unit.removeprefix("pod:")


def requeue_key(pod: PodInfo) -> str:
    """What requeues are counted against: the group, else the owning controller, else the pod."""
    group = group_of(pod)
    if group:
        return group
    if pod.owner is not None and pod.owner.name:
        return f"{pod.namespace}/{pod.owner.kind}/{pod.owner.name}"
    return pod.key


@dataclass(slots=True)
class Readiness:
    """When a workload was admitted (its first pod bound) and when it became, or stopped being, all Ready."""
    admitted_at: float
    ready_at: float | None = None
    unready_at: float | None = None
    finished: int = 0              # members that Succeeded: Kueue counts them as ready


@dataclass(slots=True)
class Requeue:
    count: int = 0
    at: float = 0.0                # no admission before this time (backoff)
    deactivated: bool = False
    first_created: float | None = None
    owner_uid: str = ""            # a new controller of the same name starts afresh


def timed_out(r: Readiness, cfg, now: float) -> str:
    """Why the workload must be evicted now, or "" (Kueue's timeout, then recoveryTimeout)."""
    if r.ready_at is None and now - r.admitted_at >= cfg.timeout:
        return f"its pods were not all Ready within waitForPodsReady.timeout {cfg.timeout:g}s of admission"
    if r.unready_at is not None and cfg.recovery_timeout is not None and now - r.unready_at >= cfg.recovery_timeout:
        return (f"its pods lost readiness and did not recover within waitForPodsReady.recoveryTimeout "
                f"{cfg.recovery_timeout:g}s")
    return ""


def after_eviction(q: Requeue, cfg, now: float) -> None:
    """Count one more PodsReadyTimeout eviction: back off, or deactivate past backoffLimitCount."""
    q.count += 1
    if cfg.backoff_limit_count is not None and q.count > cfg.backoff_limit_count:
        q.deactivated = True
        return
    q.at = now + cfg.backoff(q.count)


def refusal(q: Requeue | None, cfg, now: float, key: str) -> tuple[str, bool]:
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
