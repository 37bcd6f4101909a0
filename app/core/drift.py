"""A pod that changes after Quotient decided on it: what filter decided on, so bind refuses a pod changed since
(Decided, changed_since), and a bound pod the API shows taking its ClusterQueue above quota (Overrun).

The API takes such changes without asking Quotient: a queue-name label moved (Kueue's pod webhook refuses it on a
pod that is no longer gated, jobframework's validateUpdateForQueueName; an extender has no webhook and cannot),
requests grown through the pods/resize subresource (in-place resize, on by default since Kubernetes 1.33), a
pod group label changed. Between filter and bind, bind refuses and kube-scheduler tries the pod again, so filter
decides on what it is now. Once bound, the charge follows what the API shows, and a ClusterQueue taken above
its quota that way admits nothing more until it is back within (CLUSTER_QUEUE_OVER_QUOTA), the admission reported.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..objects.pod import PodInfo
from .workload import WorkloadKey, group_of
from ..objects.quantity import format_quantity
from .resource_node import QuotaNode
from .rules import CHANGED_SINCE_FILTER, CLUSTER_QUEUE_OVER_QUOTA


@dataclass(frozen=True, slots=True)
class Decided:
    """What filter decided on: the requests quota counts, the queue label and its ClusterQueue, the pod group
    and the workload's priority."""
    requests: tuple[tuple[str, int], ...]
    queue: str
    cluster_queue: str
    group: WorkloadKey | None
    priority: int | None


def decided_on(pod: PodInfo, requests: dict[str, int], cluster_queue: str) -> Decided:
    return Decided(tuple(sorted(requests.items())), pod.queue_name, cluster_queue, group_of(pod), pod.priority)


def changed_since(before: Decided, now: Decided, pod: str) -> str:
    """Why a pod may not be bound on filter's decision any more ("" when nothing it was decided on changed)."""
    out = []
    if now.queue != before.queue or now.cluster_queue != before.cluster_queue:
        out.append(f"queue {before.queue or '(none)'} -> {now.queue or '(none)'}"
                   + (f" (ClusterQueue {before.cluster_queue} -> {now.cluster_queue or '(none)'})"
                      if now.cluster_queue != before.cluster_queue else ""))
    was, size = dict(before.requests), dict(now.requests)
    for r in sorted(set(was) | set(size)):
        if was.get(r, 0) != size.get(r, 0):
            out.append(f"{r} {format_quantity(was.get(r, 0), r)} -> {format_quantity(size.get(r, 0), r)}")
    if now.group != before.group:
        out.append(f"pod group {before.group or '(none)'} -> {now.group or '(none)'}")
    if now.priority != before.priority:
        out.append(f"priority {before.priority} -> {now.priority}")
    if not out:
        return ""
    return (f"{CHANGED_SINCE_FILTER}: pod {pod} changed since filter admitted it ({'; '.join(out)}): it is not bound "
            "on a decision made for another pod; kube-scheduler tries it again and filter decides on what it is now")


@dataclass(slots=True)
class Overrun:
    """A bound pod whose change (moved to this ClusterQueue, resized, bound by another) the API took while it
    takes the ClusterQueue or its Cohort above quota: why, and since when."""
    pod: str            # namespace/name
    cluster_queue: str
    reason: str
    since: float

    def refusal(self) -> str:
        return f"{CLUSTER_QUEUE_OVER_QUOTA}: {self.reason}: no pod is admitted until it is back within quota"


def usage_note(node: QuotaNode, frs) -> str:
    """How far above quota the ClusterQueue runs, per (flavor, resource): "cpu 4 of nominal 2 (+ borrowing limit
    0)"; the flavor named when the ClusterQueue has more than one."""
    flavors = {f for f, _ in node.quotas}
    out = []
    for fr in frs:
        flavor, resource = fr
        q = node.quotas.get(fr)
        nominal = format_quantity(q.nominal if q else 0, resource)
        limit = "no cohort to borrow from" if node.parent is None else "no borrowing limit" \
            if q is None or q.borrowing_limit is None else \
            f"+ borrowing limit {format_quantity(q.borrowing_limit, resource)}"
        where = f" in flavor {flavor}" if len(flavors) > 1 else ""
        out.append(f"{resource}{where} {format_quantity(node.bound.get(fr, 0), resource)} of nominal {nominal} ({limit})")
    return ", ".join(out)
