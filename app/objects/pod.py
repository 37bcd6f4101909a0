"""A Pod reduced to what quota and placement decisions need, requests parsed once.

Requests are computed the way kube-scheduler does (resourcehelper.PodRequests):
the sum of the app containers, the max with each init container (restartable
"sidecar" init containers run alongside and accumulate), pod-level resources
where set, plus pod overhead.
A limit with no request counts as the request (the API server's defaulting).
A pod resized in place (pods/resize) counts, as kube-scheduler counts it, the most of its desired (spec),
allocated and actual requests (effective_requests).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .quantity import QuantityError, parse_quantity
from .annotations import group_total
from .coverage import refused_claims, refused_marks
from .errors import InvalidObject
from .topology import asked
from .meta import listing, mapping, metadata, parse_time, stable_uid, string_map, text

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Kueue's scheduling gate for plain pods (pkg/controller/jobs/pod: podconstants.SchedulingGateName): a pod that
# carries it waits outside kube-scheduler's queue until Quotient admits it and removes the gate (scheduler.ungate).
ADMISSION_GATE = "kueue.x-k8s.io/admission"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"    # names a WorkloadPriorityClass (Kueue's KEP-973)
SCHEDULED, STARTED, CREATED = "PodScheduled", "startTime", "creationTimestamp"   # admission time sources
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(slots=True)
class Owner:
    kind: str
    name: str
    uid: str
    api_version: str = ""

    @property
    def is_batch_job(self) -> bool:
        """A batch/v1 Job (not another kind named Job, e.g. Volcano's)."""
        return self.kind == "Job" and self.api_version.split("/")[0] == "batch"


@dataclass(slots=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    requests: dict[str, int]
    priority: int | None = None         # the workload's priority, that every Kueue rule reads (priority_from)
    priority_class: str = ""
    pod_priority: int | None = None     # spec.priority: what kube-scheduler orders and preempts by
    priority_from: str = ""             # where priority came from, for /debug (core.priority.resolve)
    missing_priority_class: str = ""    # the WorkloadPriorityClass named but not found when it was first seen
    preemption_policy: str = ""
    node_name: str = ""
    phase: str = "Pending"
    ready: bool = False
    created: float | None = None
    deleting: bool = False
    scheduler_name: str = "default-scheduler"
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: list = field(default_factory=list)
    tolerations: list = field(default_factory=list)
    owner: Owner | None = None
    nominated_node: str = ""
    resource_version: str = ""
    scheduled_at: float | None = None   # the PodScheduled=True condition's lastTransitionTime: when it was bound
    started: float | None = None        # status.startTime: when the kubelet started it
    group_total: int | None = None      # Kueue's pod-group-total-count annotation (objects.annotations)
    job: str = ""                       # uid of the Kueue-managed Job whose workload it is part of (core.job_workload)
    inherited: tuple[str, ...] = ()     # the labels it took from that Job, not its own
    refused: tuple[str, str] | None = None  # (rule, reason): a Kueue field it uses that Quotient refuses (coverage)
    topology_asked: str = ""            # its Kueue topology annotations as a reason names them ("": none asked)
    gates: tuple[str, ...] = ()         # spec.schedulingGates' names: kube-scheduler leaves it alone while any is left
    _shape: tuple | None = field(default=None, init=False, repr=False, compare=False)
    _workload: object = field(default=None, init=False, repr=False, compare=False)   # core.workload.Workload.of_pod

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shape(self) -> tuple:
        """Everything admission reads of the pod but who it is and when it came: two pods of one shape fit, or
        do not, alike in one ClusterQueue at one moment, and the later one in queue order never sooner
        (core.admission's walks and core.blocked rely on it). Worked out once per pod object."""
        found = self._shape
        if found is None:
            owner = self.owner
            found = self._shape = (
                self.namespace, self.queue_name, tuple(sorted(self.requests.items())), self.priority,
                self.pod_priority, self.preemption_policy, self.priority_class, self.workload_priority_class,
                self.missing_priority_class, tuple(sorted(self.node_selector.items())), repr(self.tolerations),
                repr(self.affinity_terms), self.job, owner.uid if owner is not None and owner.is_batch_job else "",
                self.group_total, self.labels.get("kueue.x-k8s.io/pod-group-name", ""),
                self.labels.get("scheduling.x-k8s.io/pod-group", ""), self.refused, self.topology_asked)
        return found

    @property
    def queue_name(self) -> str:
        return self.labels.get(QUEUE_LABEL, "")

    @property
    def workload_priority_class(self) -> str:
        return self.labels.get(PRIORITY_CLASS_LABEL, "")

    @property
    def gated(self) -> bool:
        """It carries Kueue's admission gate: it waits for Quotient to admit it, unseen by kube-scheduler."""
        return ADMISSION_GATE in self.gates

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def observed_admission(self) -> tuple[float, str]:
        """When a pod Quotient did not bind was admitted, and which field says so: the moment it was
        bound (PodScheduled), else started (startTime), else created. At one second, as the API
        server records times, so the simulator, a cluster and a restarted Quotient agree."""
        for source, at in ((SCHEDULED, self.scheduled_at), (STARTED, self.started), (CREATED, self.created)):
            if at is not None:
                return float(math.floor(at)), source
        return 0.0, CREATED


def _container_requests(container: object, kind: str, name: str) -> dict[str, int]:
    c = mapping(container, kind, name, "spec.containers[]")
    res = mapping(c.get("resources"), kind, name, "resources")
    requests = mapping(res.get("requests"), kind, name, "resources.requests")
    limits = mapping(res.get("limits"), kind, name, "resources.limits")
    out: dict[str, int] = {}
    try:
        for resource, value in limits.items():
            if resource not in requests:
                out[resource] = parse_quantity(value, resource)
        for resource, value in requests.items():
            out[resource] = parse_quantity(value, resource)
    except QuantityError as e:
        raise InvalidObject(kind, name, f"container {c.get('name', '?')}: {e}") from None
    return out


def _add(into: dict[str, int], other: dict[str, int]) -> None:
    for r, v in other.items():
        into[r] = into.get(r, 0) + v


def _max(into: dict[str, int], other: dict[str, int]) -> None:
    for r, v in other.items():
        if v > into.get(r, 0):
            into[r] = v


def pod_requests(spec: dict, kind: str = "Pod", name: str = "?") -> dict[str, int]:
    """kube-scheduler's effective pod request, plus `pods: 1`."""
    total: dict[str, int] = {}
    for c in listing(spec.get("containers"), kind, name, "spec.containers"):
        _add(total, _container_requests(c, kind, name))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in listing(spec.get("initContainers"), kind, name, "spec.initContainers"):
        reqs = _container_requests(c, kind, name)
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            current = dict(sidecars)
        else:
            current = dict(reqs)
            _add(current, sidecars)
        _max(init_peak, current)
    _max(total, init_peak)
    # Pod-level resources (PodLevelResources, on by default since 1.34) replace the
    # containers' aggregate for the resources they support.
    pod_level = _container_requests({"name": "(pod-level)", "resources": spec.get("resources")}, kind, name) \
        if spec.get("resources") else {}
    for resource, amount in pod_level.items():
        if resource in ("cpu", "memory") or resource.startswith("hugepages-"):
            total[resource] = amount
    overhead = mapping(spec.get("overhead"), kind, name, "spec.overhead")
    try:
        _add(total, {r: parse_quantity(v, r) for r, v in overhead.items()})
    except QuantityError as e:
        raise InvalidObject(kind, name, f"overhead: {e}") from None
    total["pods"] = 1
    return {r: v for r, v in total.items() if v or r == "pods"}


def _resized(spec: dict, statuses: dict, actual: bool, infeasible: bool) -> dict:
    """The spec with each container's requests replaced by what its status reports: allocatedResources, or
    (actual) resources.requests falling back to allocatedResources. A container whose status has neither
    keeps its spec's, except under an infeasible resize, where its spec counts for nothing."""
    out = dict(spec)
    for field in ("containers", "initContainers"):
        changed = []
        for c in spec.get(field) or ():
            s = statuses.get(c.get("name")) if isinstance(c, dict) else None
            if s is None:
                changed.append({**c, "resources": {}} if infeasible and isinstance(c, dict) else c)
                continue
            allocated = s.get("allocatedResources")
            running = s.get("resources")
            running = running.get("requests") if isinstance(running, dict) else None
            requests = (running or allocated) if actual else allocated
            changed.append({**c, "resources": {"requests": requests}} if isinstance(requests, dict)
                           else {**c, "resources": {}} if infeasible else c)
        out[field] = changed
    return out


def effective_requests(spec: dict, status: dict, kind: str = "Pod", name: str = "?") -> dict[str, int]:
    """kube-scheduler's size of a pod that may have been resized in place (component-helpers' PodRequests with
    status resources): per resource, the most of the spec's requests (unless the PodResizePending condition
    says Infeasible), the allocated ones (status.containerStatuses[].allocatedResources) and the actual ones
    (.resources.requests). A pod whose status reports neither is its spec."""
    desired = pod_requests(spec, kind, name)        # first: it checks the spec's shape
    statuses = {s.get("name"): s for f in ("containerStatuses", "initContainerStatuses")
                for s in listing(status.get(f), kind, name, f"status.{f}") if isinstance(s, dict)
                if isinstance(s.get("allocatedResources"), dict) or isinstance(s.get("resources"), dict)}
    if not statuses:
        return desired
    infeasible = any(isinstance(c, dict) and c.get("type") == "PodResizePending" and c.get("reason") == "Infeasible"
                     for c in listing(status.get("conditions"), kind, name, "status.conditions"))
    out: dict[str, int] = {} if infeasible else dict(desired)
    for actual in (False, True):
        _max(out, pod_requests(_resized(spec, statuses, actual, infeasible), kind, name))
    return out


def _owner(meta: dict) -> Owner | None:
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    chosen = None
    for ref in refs:
        if isinstance(ref, dict) and isinstance(ref.get("kind"), str):
            if chosen is None or ref.get("controller"):
                chosen = ref
    if chosen is None:
        return None
    return Owner(chosen.get("kind", ""), str(chosen.get("name", "")), str(chosen.get("uid", "")),
                 str(chosen.get("apiVersion", "")))


def _condition(status: dict, key: str, kind: str) -> dict:
    """The pod condition of that type ({} when absent)."""
    for cond in listing(status.get("conditions"), "Pod", key, "status.conditions"):
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return {}


def _ready(status: dict, key: str) -> bool:
    return _condition(status, key, "Ready").get("status") == "True"


def _scheduled_at(status: dict, key: str) -> float | None:
    """When the pod was bound: PodScheduled=True's lastTransitionTime (the API server writes it on binding)."""
    cond = _condition(status, key, "PodScheduled")
    return parse_time(cond.get("lastTransitionTime")) if cond.get("status") == "True" else None


def decode_pod(obj: dict) -> PodInfo:
    """Decode a Pod object (API JSON) into a PodInfo; InvalidObject on bad input."""
    meta, name = metadata(obj, "Pod")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise InvalidObject("Pod", name, "metadata.namespace must be a string")
    key = f"{namespace}/{name}"
    spec = mapping(obj.get("spec"), "Pod", key, "spec")
    status = mapping(obj.get("status"), "Pod", key, "status")
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise InvalidObject("Pod", key, f"spec.priority must be an integer, got {priority!r}")
    affinity = mapping(spec.get("affinity"), "Pod", key, "spec.affinity")
    node_aff = mapping(affinity.get("nodeAffinity"), "Pod", key, "spec.affinity.nodeAffinity")
    required = mapping(node_aff.get("requiredDuringSchedulingIgnoredDuringExecution"),
                       "Pod", key, "nodeAffinity.required")
    uid = text(meta, "uid", "Pod", key, "metadata.uid") or stable_uid("Pod", namespace, name)
    annotations = string_map(meta.get("annotations"), "Pod", key, "metadata.annotations")
    labels = string_map(meta.get("labels"), "Pod", key, "metadata.labels")
    return PodInfo(
        uid=uid,
        namespace=namespace,
        name=name,
        labels=labels,
        annotations=annotations,
        requests=effective_requests(spec, status, "Pod", key),
        priority=priority,
        pod_priority=priority,
        priority_class=text(spec, "priorityClassName", "Pod", key, "spec.priorityClassName"),
        preemption_policy=text(spec, "preemptionPolicy", "Pod", key, "spec.preemptionPolicy"),
        node_name=text(spec, "nodeName", "Pod", key, "spec.nodeName"),
        phase=text(status, "phase", "Pod", key, "status.phase", "Pending"),
        ready=_ready(status, key),
        created=parse_time(meta.get("creationTimestamp")),
        deleting=bool(meta.get("deletionTimestamp")),
        scheduler_name=text(spec, "schedulerName", "Pod", key, "spec.schedulerName", "default-scheduler"),
        node_selector=string_map(spec.get("nodeSelector"), "Pod", key, "spec.nodeSelector"),
        affinity_terms=listing(required.get("nodeSelectorTerms"), "Pod", key, "nodeSelectorTerms"),
        tolerations=listing(spec.get("tolerations"), "Pod", key, "spec.tolerations"),
        owner=_owner(meta),
        nominated_node=text(status, "nominatedNodeName", "Pod", key, "status.nominatedNodeName"),
        resource_version=text(meta, "resourceVersion", "Pod", key, "metadata.resourceVersion"),
        scheduled_at=_scheduled_at(status, key),
        started=parse_time(status.get("startTime")),
        group_total=group_total(annotations),
        refused=refused_marks(labels, annotations, "pod") or refused_claims(spec),
        topology_asked=asked(annotations),
        gates=_gates(spec, key),
    )


def _gates(spec: dict, key: str) -> tuple[str, ...]:
    names = []
    for i, gate in enumerate(listing(spec.get("schedulingGates"), "Pod", key, "spec.schedulingGates")):
        gate = mapping(gate, "Pod", key, f"spec.schedulingGates[{i}]")
        names.append(text(gate, "name", "Pod", key, f"spec.schedulingGates[{i}].name"))
    return tuple(names)
