"""Kueue's stopPolicy: why a stopped LocalQueue admits nothing, and which admitted pods a HoldAndDrain evicts."""
from __future__ import annotations

from ..objects.pod import PodInfo
from .rules import CLUSTER_QUEUE_STOPPED, LOCAL_QUEUE_STOPPED
from .view import AdmissionView


def local_queue_stopped(lq) -> str:
    """Why a LocalQueue with a stopPolicy admits nothing: Kueue's workload controller
    (reconcileOnLocalQueueActiveState) keeps its workloads inadmissible ("LocalQueue X is stopped") and its
    LocalQueue controller takes the queue out of the queueing system, checked before its ClusterQueue."""
    drains = "; its admitted pods are evicted" if lq.stop_policy == "HoldAndDrain" else \
        "; its admitted pods run to completion"
    return (f"LocalQueue {lq.key} is stopped (stopPolicy {lq.stop_policy}){drains}; admission resumes when "
            "its stopPolicy is set to None")


def drained(state: AdmissionView) -> list[tuple[PodInfo, str, str]]:
    """Pods to evict because their LocalQueue or their ClusterQueue has stopPolicy HoldAndDrain (Kueue evicts
    its admitted workloads: LocalQueueStopped, checked first as Kueue's workload controller does, else
    ClusterQueueStopped), as (pod, ClusterQueue, reason); pods already terminating are not asked twice."""
    out = []
    for uid, charge in state.admitted.items():
        pod = state.pods.get(uid)
        if pod is None or pod.deleting:
            continue
        lq = state.local_queues.get(f"{pod.namespace}/{pod.queue_name}") if pod.queue_name else None
        cq = state.cluster_queues.get(charge.cluster_queue)
        if lq is not None and lq.stop_policy == "HoldAndDrain":
            out.append((pod, charge.cluster_queue, LOCAL_QUEUE_STOPPED))
        elif cq is not None and cq.stop_policy == "HoldAndDrain":
            out.append((pod, cq.name, CLUSTER_QUEUE_STOPPED))
    return out
