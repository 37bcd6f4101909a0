"""The Job controller, as far as a scenario needs it (README, Scenario files: Jobs).

A scenario's batch/v1 Job is not suspended (Quotient, not Kueue, decides when its pods run), so the
controller creates its workload's pods at once: min(parallelism, completions - succeeded), named
<job>-<n> from the pod template, owned by the Job and labelled batch.kubernetes.io/job-name. When one
succeeds it counts the completion in the Job's status and, while completions remain, creates the next
pod; an evicted pod is replaced at once by SimCluster.evict (<name>-r<N>), as the real controller
replaces a pod that is deleted.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from ..objects.job import decode_job
from ..objects.meta import format_time, stable_uid

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def pod_of(job: dict, index: int, created: float) -> dict:
    """The Job's pod number index, from its template, created at `created`."""
    meta = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    name = f"{meta['name']}-{index}"
    namespace = meta.get("namespace") or "default"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": stable_uid("Pod", namespace, name),
                     "creationTimestamp": format_time(created),
                     "labels": {**(tmeta.get("labels") or {}), JOB_NAME_LABEL: meta["name"]},
                     "annotations": dict(tmeta.get("annotations") or {}),
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                          "uid": meta["uid"], "controller": True}]},
        "spec": template.get("spec") or {},
    }


def pod_names(job: dict) -> set[str]:
    """namespace/name of every pod the controller may make for the Job (one per completion)."""
    meta, total = job["metadata"], decode_job(job).completions_wanted
    return {f"{meta.get('namespace') or 'default'}/{meta['name']}-{i}" for i in range(total)}


def first_pods(job: dict, created: float) -> list[dict]:
    """The pods the controller creates for a new Job: its workload count of them."""
    return [pod_of(job, i, created) for i in range(decode_job(job).count)]


@dataclass
class JobRun:
    obj: dict
    created: int        # pods made so far (the next one's number)


class JobController:
    def __init__(self, jobs: list[dict]):
        self.jobs = {j["metadata"]["uid"]: JobRun(j, decode_job(j).count) for j in jobs}

    def succeeded(self, owner_uid: str, active: int, now: float) -> tuple[dict, list[dict]] | None:
        """A pod of the Job succeeded (active: its pods still running or pending): the Job with the completion
        counted, and the next pods it makes while completions remain; None for a pod of no scenario Job."""
        run = self.jobs.get(owner_uid)
        if run is None:
            return None
        status = run.obj.setdefault("status", {})
        status["succeeded"] = int(status.get("succeeded") or 0) + 1
        job = decode_job(run.obj)
        missing = max(0, job.count - active)
        pods = [pod_of(run.obj, run.created + i, now) for i in range(missing)]
        run.created += missing
        if job.completions is not None and job.succeeded >= job.completions:
            status["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": format_time(now)}]
        return copy.deepcopy(run.obj), pods
