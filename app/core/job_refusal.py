"""A pod of a batch/v1 Job: refused while its Job is late or invalid (core.admission.resolve checks it first)."""
from __future__ import annotations

from ..objects.pod import PodInfo
from .rules import INVALID_JOB, JOB_NOT_SEEN
from .verdict import Verdict, refuse
from .view import JobsView


def job_refusal(state: JobsView, pod: PodInfo) -> Verdict | None:
    """A pod of a batch/v1 Job Quotient has not seen, while Jobs are a source and their list is complete: the Job
    may only be late (the Job and Pod watches are not ordered), so the pod waits for it, config.job_wait_timeout
    from when the Job's first pod was seen (state job_waits; not from each filter), rather than pass unmanaged.
    After that the Job is missing, not late (deleted with --cascade=orphan, or an owner reference another tool
    wrote), and the pod is judged by the pod rules: a plain pod of the LocalQueue its own label names (no label:
    not managed). Kueue refuses no such pod: its pod webhook (pkg/controller/jobs/pod/pod_webhook.go, Default;
    IsPodOwnerManagedByKueue) leaves a pod whose controller's kind has an enabled integration to that
    integration, by the owner reference alone, and the Job integration has no Job to make a Workload of, so the
    pod is neither gated nor refused and runs in no quota. Quotient charges it to its ClusterQueue instead: a pod
    the API shows running is never quota that nobody counts. A Job Kueue's webhook would refuse
    (objects.job.decode_job's problem) admits none of its pods."""
    owner = pod.owner
    if owner is None or not owner.is_batch_job or not owner.uid:
        return None
    job = state.jobs.get(owner.uid)
    if job is None:
        since = state.job_waits.get(owner.uid) if state.jobs_listed else None
        bound = state.config.job_wait_timeout
        left = bound - (state.timer() - since) if since is not None else 0.0
        if left <= 0:
            return None
        return refuse(JOB_NOT_SEEN, f"Job {pod.namespace}/{owner.name}, the pod's owner, is not known to Quotient "
                       "yet: the API's Job list does not have it, and its watch event may be late; the pod waits "
                       f"for it up to {bound:g}s from when the Job's first pod was seen ({left:.1f}s left), then is "
                       "judged as a plain pod of its LocalQueue")
    if job.problem and pod.job:
        return refuse(INVALID_JOB, f"Job {job.key}: {job.problem}; fix the Job")
    if job.refused and pod.job:
        return refuse(job.refused[0], f"Job {job.key}: {job.refused[1]}")
    return None
