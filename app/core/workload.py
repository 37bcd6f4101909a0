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

from dataclasses import dataclass
from typing import NamedTuple

from ..objects.annotations import GROUP_TOTAL
from ..objects.pod import QUEUE_LABEL, PodInfo

KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL = GROUP_TOTAL
COSCHEDULING_GROUP = "scheduling.x-k8s.io/pod-group"

_new, _tuple_new = object.__new__, tuple.__new__

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


class Workload:
    """One workload as admission decides on it (Kueue's workload.Info): made once at the edge, for a lone pod
    (of_pod) or a pod group or a Job (of_group), and read by every admission rule, queue walk and preemption.

    template is a real member, the oldest: what its pods share and a rule reads of one of them (namespace,
    owner, queue label, priority class, preemptionPolicy, node selectors, affinity, tolerations). The rest is
    the workload's own: its total requests, the highest member priority (the ACK seed: one high-priority
    member makes the whole group high priority), the oldest creation. uid is what the indexes key it by (a
    lone pod's uid, a group's or a Job's printed name), key_text the name a reason shows (namespace/name)."""

    __slots__ = ("key", "_pod_sets", "members", "template", "uid", "key_text", "namespace", "queue_name",
                 "priority", "pod_priority", "created", "requests", "refused", "topology_asked", "shape")

    def __init__(self, key: WorkloadKey, pod_sets: tuple[PodSet, ...] | None, members: tuple[PodInfo, ...],
                 template: PodInfo, uid: str, key_text: str, priority: int, pod_priority: int,
                 created: float | None, requests: dict[str, int], refused: tuple[str, str] | None):
        self.key, self._pod_sets, self.members, self.template = key, pod_sets, members, template
        self.uid, self.key_text, self.namespace, self.queue_name = uid, key_text, key.namespace, template.queue_name
        self.priority, self.pod_priority, self.created = priority, pod_priority, created
        self.requests, self.refused = requests, refused
        self.topology_asked = any(m.topology_asked for m in members)    # a member asks a Topology level
        # what a walk of queue order passes over alike: a lone pod's shape (PodInfo.shape), a group's or a Job's own
        # identity (its members are admitted together or not at all)
        self.shape = template.shape if key.kind == POD else uid

    @classmethod
    def of_pod(cls, pod: PodInfo) -> Workload:
        """A pod on its own. This runs on every filter and for every pod a queue walk passes, so it is made once per
        pod record (kept on it until what it reads changes: core.priority.resolve, core.job_workload.inherit):
        its requests as they are (not copied), its one pod set made only when asked for."""
        w = pod._workload
        if w is not None:
            return w
        w = pod._workload = _new(cls)
        ns, name = pod.namespace, pod.name
        w.key, w._pod_sets, w.members, w.template = _tuple_new(WorkloadKey, (POD, ns, name, "")), None, (pod,), pod
        w.uid, w.key_text, w.namespace = pod.uid, f"{ns}/{name}", ns
        w.queue_name = pod.labels.get(QUEUE_LABEL, "")             # PodInfo.queue_name, without its call
        w.priority, w.pod_priority, w.created = pod.priority or 0, pod.pod_priority or 0, pod.created
        w.requests, w.refused, w.topology_asked = pod.requests, pod.refused, bool(pod.topology_asked)
        w.shape = pod.shape
        return w

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
        return cls(key, pod_sets, tuple(members), first, str(key), f"{first.namespace}/{key.name}",
                   max(m.priority or 0 for m in members), max(m.pod_priority or 0 for m in members),
                   min((m.created for m in members if m.created is not None), default=None), requests,
                   next((m.refused for m in members if m.refused), None))

    @property
    def pod_sets(self) -> tuple[PodSet, ...]:
        if self._pod_sets is None:
            self._pod_sets = (PodSet("main", 1, self.template.requests),)
        return self._pod_sets

    @property
    def kind(self) -> str:
        return self.key.kind

    @property
    def count(self) -> int:
        return sum(ps.count for ps in self.pod_sets)

    @property
    def preemptor_name(self) -> str:
        """Who a victim is preempted for, in its eviction message (Kueue's Preempted condition)."""
        if self.kind == POD:
            return f"pod {self.key_text} (UID: {self.uid})"
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
