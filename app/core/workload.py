"""The workload: what Kueue admits as one, a lone pod, a pod group or a batch/v1 Job's pods, made once from its pods.

Kueue keeps a Workload object per job and decides on its workload.Info (pkg/workload/workload.go): the key,
its ClusterQueue's LocalQueue, its priority, its pod sets with their counts and requests. Quotient has no
Workload objects: a workload is worked out from its pods. Its identity is a WorkloadKey (its kind, namespace,
name, and a Job's uid), never a string to parse; what it prints as keeps the text reasons, journal records and
/debug have always shown. Its admission state (PodsReady, requeueState) is Readiness and RequeueRecord, kept by
the state per workload.

Two pod-group conventions are recognised: Kueue's plain pods (label kueue.x-k8s.io/pod-group-name, annotation
kueue.x-k8s.io/pod-group-total-count) and scheduler-plugins' coscheduling (label scheduling.x-k8s.io/pod-group
naming a PodGroup). A Kueue-managed Job's pods are one workload (core.job_workload.inherit marks them).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from ..objects.annotations import GROUP_TOTAL
from ..objects.pod import PodInfo

KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL = GROUP_TOTAL
COSCHEDULING_GROUP = "scheduling.x-k8s.io/pod-group"

POD = "pod"                 # a pod on its own
GROUP = "group"             # a pod group (either convention)
JOB = "job"                 # a batch/v1 Job's pods (Kueue's Job integration; a waitForPodsReady unit of any Job)


class WorkloadKey(NamedTuple):
    """Who a workload is: compared and hashed as a whole, never parsed."""
    kind: str
    namespace: str
    name: str
    uid: str = ""           # a Job's: the Job made again under the same name is another workload

    def __str__(self) -> str:
        """Its printed name, as journal records, reasons and requeue counts have always shown it: namespace/name,
        and a Job's with its kind and uid (two Jobs of one name apart)."""
        if self.kind == JOB:
            return f"{self.kind}:{self.namespace}/{self.name}:{self.uid}"
        return f"{self.namespace}/{self.name}"

    @property
    def shown(self) -> str:
        """As an admin names it: namespace/group, namespace/Job/name, namespace/pod."""
        if self.kind == JOB:
            return f"{self.namespace}/Job/{self.name}"
        return f"{self.namespace}/{self.name}"

    @property
    def described(self) -> str:
        """For a reason: "Job ns/name", "pod group ns/name" or "pod ns/name"."""
        return {JOB: "Job", GROUP: "pod group"}.get(self.kind, "pod") + f" {self.namespace}/{self.name}"


def group_of(pod: PodInfo) -> WorkloadKey | None:
    """The pod group or Kueue-managed Job the pod is a member of, None for a pod on its own."""
    if pod.job:
        return WorkloadKey(JOB, pod.namespace, pod.owner.name, pod.job)
    name = pod.labels.get(KUEUE_GROUP) or pod.labels.get(COSCHEDULING_GROUP)
    return WorkloadKey(GROUP, pod.namespace, name) if name else None


def pod_key(pod: PodInfo) -> WorkloadKey:
    """A pod on its own as a workload."""
    return WorkloadKey(POD, pod.namespace, pod.name)


def job_key(pod: PodInfo) -> WorkloadKey:
    """The Job that owns the pod as a workload (the pod has a Job owner)."""
    return WorkloadKey(JOB, pod.namespace, pod.owner.name, pod.owner.uid)


@dataclass(frozen=True, slots=True)
class PodSet:
    """Pods of one shape in a workload (Kueue's PodSet): its name, how many, and one pod's requests."""
    name: str
    count: int
    requests: dict[str, int]


@dataclass(frozen=True, slots=True)
class Workload:
    """One workload as admission decides on it (Kueue's workload.Info).

    pod is what the admission rules read of it: a lone pod is itself; a pod group or a Job is its first member
    (its pod template: queue, priority class, selectors, tolerations) carrying the workload's total requests,
    the highest member priority (the ACK seed: one high-priority member makes the whole group high priority)
    and the oldest creation, under the workload's own name and its printed name as uid (no pod's)."""
    key: WorkloadKey
    pod_sets: tuple[PodSet, ...]
    members: tuple[PodInfo, ...]
    pod: PodInfo

    @classmethod
    def of_pod(cls, pod: PodInfo) -> Workload:
        return cls(pod_key(pod), (PodSet("main", 1, pod.requests),), (pod,), pod)

    @classmethod
    def of_group(cls, key: WorkloadKey, members: list[PodInfo]) -> Workload:
        """A pod group or a Job, from the members to admit now (one pod set per distinct request)."""
        first = min(members, key=lambda p: (p.created or 0.0, p.name))
        requests: dict[str, int] = {}
        shapes: dict[tuple, int] = {}
        for m in members:
            for r, v in m.requests.items():
                requests[r] = requests.get(r, 0) + v
            shape = tuple(sorted(m.requests.items()))
            shapes[shape] = shapes.get(shape, 0) + 1
        pod_sets = tuple(PodSet("main" if i == 0 else f"main-{i}", count, dict(shape))
                         for i, (shape, count) in enumerate(shapes.items()))
        pod = replace(first, uid=str(key), name=key.name, requests=requests,
                      priority=max(m.priority or 0 for m in members),
                      pod_priority=max(m.pod_priority or 0 for m in members),
                      created=min((m.created for m in members if m.created is not None), default=None),
                      refused=next((m.refused for m in members if m.refused), None))
        return cls(key, pod_sets, tuple(members), pod)

    @property
    def kind(self) -> str:
        return self.key.kind

    @property
    def namespace(self) -> str:
        return self.key.namespace

    @property
    def queue_name(self) -> str:
        return self.pod.queue_name

    @property
    def priority(self) -> int:
        return self.pod.priority or 0

    @property
    def count(self) -> int:
        return sum(ps.count for ps in self.pod_sets)

    @property
    def preemptor_name(self) -> str:
        """Who a victim is preempted for, in its eviction message (Kueue's Preempted condition)."""
        if self.kind == POD:
            return f"pod {self.pod.key} (UID: {self.pod.uid})"
        return f"{self.key.described} (its pods' UIDs: see its members)"


@dataclass(slots=True)
class Readiness:
    """When a workload was admitted (its first pod bound) and when it became, or stopped being, all Ready
    (Kueue's Admitted and PodsReady conditions)."""
    admitted_at: float
    ready_at: float | None = None
    unready_at: float | None = None
    finished: int = 0              # members that Succeeded: Kueue counts them as ready


@dataclass(slots=True)
class RequeueRecord:
    """A workload's PodsReadyTimeout evictions (Kueue's requeueState)."""
    count: int = 0
    at: float = 0.0                # no admission before this time (backoff)
    deactivated: bool = False
    first_created: float | None = None
    owner_uid: str = ""            # a new controller of the same name starts afresh
