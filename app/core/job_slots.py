"""The rules for a pod of a Job whose workload is admitted: it takes a slot the workload's quota keeps, or waits.

A Job is admitted as one workload (core.job_workload); the pods its controller makes in the place of pods that finished
or failed run in that workload's quota, with no new quota decision, while a slot is spare.
"""
from __future__ import annotations

from ..objects.pod import PodInfo
from .decisions import Refuse
from .rules import JOB_AT_SIZE
from .view import ReclaimView
from .workload import WorkloadKey


def queue_changed(state: ReclaimView, pod: PodInfo, cluster_queue: str) -> bool:
    """The pod's queue no longer leads to its admitted workload's ClusterQueue: not that workload's slot, so the
    workload is evicted (its pods are admitted again as a new workload)."""
    _, cq = state.store.queue_of(pod)
    return cq is None or cq.name != cluster_queue


def at_size(state: ReclaimView, pod: PodInfo, key: WorkloadKey, admitted) -> Refuse | None:
    """JobAtSize: every slot of the admitted workload holds its quota and the pod keeps no reservation of its own:
    it runs in the place of one that finishes or fails."""
    if pod.uid in state.reservations or admitted.spare >= 1:
        return None
    return Refuse(JOB_AT_SIZE, f"{key.described} is admitted with {admitted.size} pod(s), all holding their quota; "
                  "this pod runs in the place of one that finishes or fails", admitted.charge.cluster_queue)
