"""A batch/v1 Job, as far as Kueue's Job integration reads it (pkg/controller/jobs/job): the queue and
WorkloadPriorityClass labels its pods inherit, how many pods its workload is (podsCount, less the
completions done), and the partial-admission floor (kueue.x-k8s.io/job-min-parallelism)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .coverage import refused_marks
from .errors import InvalidObject
from .meta import mapping, metadata, stable_uid, string_map, text
from .pod import PRIORITY_CLASS_LABEL, QUEUE_LABEL

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
FINISHED = frozenset({"Complete", "Failed"})


@dataclass(slots=True)
class JobInfo:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str] = field(default_factory=dict)
    parallelism: int = 1
    completions: int | None = None
    succeeded: int = 0
    min_parallelism: int | None = None
    finished: bool = False
    problem: str = ""           # why Kueue would refuse the Job (its webhook); its pods are refused with it
    refused: tuple[str, str] | None = None  # (rule, reason): a Kueue label or annotation Quotient refuses (coverage)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def queue_name(self) -> str:
        return self.labels.get(QUEUE_LABEL, "")

    @property
    def inherited(self) -> dict[str, str]:
        """The labels its pods take from it when their template lacks them (Kueue reads them off the Job)."""
        return {k: self.labels[k] for k in (QUEUE_LABEL, PRIORITY_CLASS_LABEL) if k in self.labels}

    @property
    def completions_wanted(self) -> int:
        """Deref(completions, parallelism): a work queue (completions unset) counts as parallelism."""
        return self.parallelism if self.completions is None else self.completions

    @property
    def pods_count(self) -> int:
        """Kueue's podsCount: min(parallelism, completions)."""
        return min(self.parallelism, self.completions_wanted)

    @property
    def count(self) -> int:
        """The workload's pods still needed: Kueue's ReclaimablePods takes from parallelism those beyond the
        completions left (a work queue whose first pod succeeded makes no more)."""
        return max(0, min(self.parallelism, self.completions_wanted - self.succeeded))


INT32_MAX = 2**31 - 1


def _count(value: object, key: str, where: str, default: int | None) -> int | None:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= INT32_MAX:
        raise InvalidObject("Job", key, f"{where} must be a non-negative 32-bit integer, got {value!r}")
    return value


def decode_job(obj: dict) -> JobInfo:
    """The Job; InvalidObject when its shape is wrong. A job-min-parallelism Kueue's webhook would refuse
    (not an integer in [1, parallelism)) is kept as `problem`, so its pods are refused with the reason rather
    than run without quota."""
    meta, name = metadata(obj, "Job")
    namespace = meta.get("namespace") or "default"
    key = f"{namespace}/{name}"
    spec = mapping(obj.get("spec"), "Job", key, "spec")
    status = mapping(obj.get("status"), "Job", key, "status")
    annotations = string_map(meta.get("annotations"), "Job", key, "metadata.annotations")
    parallelism = _count(spec.get("parallelism"), key, "spec.parallelism", 1)
    job = JobInfo(namespace, name, text(meta, "uid", "Job", key, "metadata.uid") or stable_uid("Job", namespace, name),
                  string_map(meta.get("labels"), "Job", key, "metadata.labels"), parallelism,
                  _count(spec.get("completions"), key, "spec.completions", None),
                  _count(status.get("succeeded"), key, "status.succeeded", 0))
    conditions = status.get("conditions")
    job.finished = isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") in FINISHED and c.get("status") == "True" for c in conditions)
    job.refused = refused_marks(job.labels, annotations, "Job")
    raw = annotations.get(MIN_PARALLELISM)
    if raw is not None:
        try:
            job.min_parallelism = int(raw)
        except ValueError:
            job.min_parallelism = None
        if job.min_parallelism is None or not 0 < job.min_parallelism < job.pods_count:
            job.min_parallelism = None
            job.problem = (f"annotation {MIN_PARALLELISM}={raw!r} must be an integer at least 1 and below the "
                           f"Job's pod count {job.pods_count} (min of parallelism and completions), as Kueue's "
                           "Job webhook requires")
    return job
