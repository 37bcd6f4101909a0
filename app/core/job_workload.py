"""A batch/v1 Job labelled with a queue is one workload (Kueue's Job integration): its pods join the Job's
queue, and take its WorkloadPriorityClass, when their template lacks the labels (admins label the Job, as
Kueue's docs show), and are admitted together as a group whose size is the Job's workload count
(core.gangs.expected_size). A Job without the label, or pods carrying pod-group labels, keep the pod and
pod-group rules."""
from __future__ import annotations

from ..objects.job import JobInfo
from ..objects.pod import PodInfo
from .workload import COSCHEDULING_GROUP, KUEUE_GROUP


def inherit(pod: PodInfo, jobs: dict[str, JobInfo]) -> None:
    """Give the pod of a Kueue-managed Job (one with the queue label) the Job's labels it lacks, and mark it a
    member of the Job's workload (pod.job: the Job's uid; core.workload.group_of); a pod's labels taken from an
    earlier version of the Job are dropped first."""
    pod._shape = pod._workload = None      # its shape and workload are worked out again from what it is now
    if pod.inherited:
        pod.labels = {k: v for k, v in pod.labels.items() if k not in pod.inherited}
        pod.inherited = ()
    pod.job = ""
    owner = pod.owner
    if owner is None or not owner.is_batch_job or KUEUE_GROUP in pod.labels or COSCHEDULING_GROUP in pod.labels:
        return
    job = jobs.get(owner.uid)
    if job is None or not job.queue_name:
        return
    added = {k: v for k, v in job.inherited.items() if k not in pod.labels}
    if added:
        pod.labels = {**pod.labels, **added}
        pod.inherited = tuple(added)
    pod.job = owner.uid
