"""The one builder vocabulary of the tests, in Kueue's `MakeClusterQueue("cq").Cohort("c").Obj()` style.

A builder starts from the object's name, chains only what the test is about, and ends with .obj(): the
plain dict the API server lists and the watch delivers. A pod can also end with .wire(): the Pod as
kube-scheduler sends it in a filter body (no apiVersion/kind, Pending). Nothing is set that the test
did not ask for, except what every such object has (a pod's uid and creationTimestamp; a node's
allocatable, 16 CPUs and 128Gi by default; a ClusterQueue's namespaceSelector {}, which admits every
namespace, as most tests want).

    ClusterQueue("cq").cohort("all").resource_group(FlavorQuotas("default-flavor").resource("cpu", "9")).obj()
    Pod("p").queue("lq").cpu("2").priority(5).created(3).obj()
"""
from __future__ import annotations

import copy

import yaml

from app.objects.conversion import convert
from app.objects.meta import format_time

KUEUE = "kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
BASE_TIME = 1_767_225_600          # 2026-01-01T00:00:00Z; Pod.created(s) is BASE_TIME + s


class _Builder:
    """Holds the object being built; every setter returns the builder so that calls chain."""

    _obj: dict

    def obj(self) -> dict:
        """A copy, so that one builder can make several objects."""
        return copy.deepcopy(self._obj)

    def clone(self):
        return copy.deepcopy(self)

    def annotation(self, key: str, value: str):
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self


# ---- Kueue objects ---------------------------------------------------------------------------

class FlavorQuotas:
    """One flavor's quotas in a resource group: Kueue's MakeFlavorQuotas("default").Resource("cpu", "9")."""

    def __init__(self, name: str):
        self.name = name
        self.resources: list[dict] = []

    def resource(self, name: str, nominal, borrowing=None, lending=None) -> FlavorQuotas:
        """nominalQuota, and borrowingLimit / lendingLimit when given (None: not set)."""
        entry = {"name": name, "nominalQuota": nominal}
        if borrowing is not None:
            entry["borrowingLimit"] = borrowing
        if lending is not None:
            entry["lendingLimit"] = lending
        self.resources.append(entry)
        return self

    def resources_from(self, quotas: dict) -> FlavorQuotas:
        """Several resources at once, for tables of cases: {resource: nominal or (nominal, borrowing, lending)}."""
        for name, quota in quotas.items():
            self.resource(name, *quota) if isinstance(quota, tuple) else self.resource(name, quota)
        return self

    def obj(self) -> dict:
        return {"name": self.name, "resources": copy.deepcopy(self.resources)}


def _resource_group(flavors: tuple[FlavorQuotas, ...]) -> dict:
    """coveredResources are the first flavor's resources, in order, as Kueue requires of every flavor."""
    return {"coveredResources": [r["name"] for r in flavors[0].resources], "flavors": [f.obj() for f in flavors]}


class ClusterQueue(_Builder):
    def __init__(self, name: str):
        self._obj = {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
                     "spec": {"namespaceSelector": {}, "resourceGroups": []}}

    def cohort(self, name: str | None) -> ClusterQueue:
        if name:
            self._obj["spec"]["cohort"] = name
        return self

    def resource_group(self, *flavors: FlavorQuotas) -> ClusterQueue:
        self._obj["spec"]["resourceGroups"].append(_resource_group(flavors))
        return self

    def namespace_selector(self, selector: dict | None) -> ClusterQueue:
        """None leaves it unset, which in Kueue matches no namespace."""
        if selector is None:
            self._obj["spec"].pop("namespaceSelector", None)
        else:
            self._obj["spec"]["namespaceSelector"] = selector
        return self

    def queueing_strategy(self, strategy: str) -> ClusterQueue:
        return self.spec(queueingStrategy=strategy)

    def preemption(self, policy: dict) -> ClusterQueue:
        """spec.preemption as Kueue spells it: withinClusterQueue, reclaimWithinCohort, borrowWithinCohort."""
        return self.spec(preemption=policy)

    def flavor_fungibility(self, fungibility: dict) -> ClusterQueue:
        return self.spec(flavorFungibility=fungibility)

    def spec(self, **fields) -> ClusterQueue:
        """Any other spec field, by its Kueue name (stopPolicy, fairSharing, ...)."""
        self._obj["spec"].update(fields)
        return self


def cpu_queue(name: str, nominal, cohort: str | None = None, **spec) -> dict:
    """The tests' commonest ClusterQueue: `nominal` CPUs of default-flavor, optionally in a cohort, other spec
    fields by their Kueue names."""
    quotas = FlavorQuotas("default-flavor").resource("cpu", str(nominal))
    return ClusterQueue(name).cohort(cohort).resource_group(quotas).spec(**spec).obj()


class Cohort(_Builder):
    """A Cohort object (hierarchical cohorts): an optional parent and quota of its own."""

    def __init__(self, name: str):
        self._obj = {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": {}}

    def parent(self, name: str | None) -> Cohort:
        if name:
            self._obj["spec"]["parentName"] = name
        return self

    def resource_group(self, *flavors: FlavorQuotas) -> Cohort:
        self._obj["spec"].setdefault("resourceGroups", []).append(_resource_group(flavors))
        return self

    def spec(self, **fields) -> Cohort:
        self._obj["spec"].update(fields)
        return self


class ResourceFlavor(_Builder):
    """A setter given None leaves its field unset, as for every builder here."""

    def __init__(self, name: str):
        self._obj = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}

    def node_labels(self, labels: dict | None) -> ResourceFlavor:
        if labels is not None:
            self._obj["spec"]["nodeLabels"] = dict(labels)
        return self

    def node_taints(self, taints: list | None) -> ResourceFlavor:
        if taints is not None:
            self._obj["spec"]["nodeTaints"] = list(taints)
        return self

    def tolerations(self, tolerations: list | None) -> ResourceFlavor:
        if tolerations is not None:
            self._obj["spec"]["tolerations"] = list(tolerations)
        return self


class LocalQueue(_Builder):
    def __init__(self, name: str, namespace: str):
        self._obj = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
                     "spec": {}}

    def cluster_queue(self, name: str) -> LocalQueue:
        self._obj["spec"]["clusterQueue"] = name
        return self

    def stop_policy(self, policy: str) -> LocalQueue:
        """spec.stopPolicy: None, Hold or HoldAndDrain (both versions)."""
        self._obj["spec"]["stopPolicy"] = policy
        return self

    def version(self, version: str) -> LocalQueue:
        """Served in kueue.x-k8s.io/<version> (v1beta1 by default)."""
        self._obj["apiVersion"] = f"kueue.x-k8s.io/{version}"
        return self


class WorkloadPriorityClass(_Builder):
    """Kueue's WorkloadPriorityClass: a top-level value, no spec."""

    def __init__(self, name: str, value: int | None):
        self._obj = {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}}
        if value is not None:
            self._obj["value"] = value


class PriorityClass(_Builder):
    def __init__(self, name: str, value: int, global_default: bool = False):
        self._obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                     "value": value, **({"globalDefault": True} if global_default else {})}


class Job(_Builder):
    """A batch/v1 Job (uid uid-job-{namespace}-{name}); its pods are Pod(...).of_job(job)."""

    def __init__(self, name: str, namespace: str = "team-a"):
        self._obj = {"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": name, "namespace": namespace, "uid": f"uid-job-{namespace}-{name}",
                                  "labels": {}},
                     "spec": {"parallelism": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}}

    @property
    def uid(self) -> str:
        return self._obj["metadata"]["uid"]

    @property
    def name(self) -> str:
        return self._obj["metadata"]["name"]

    def queue(self, name: str) -> Job:
        self._obj["metadata"]["labels"][QUEUE_LABEL] = name
        return self

    def label(self, key: str, value: str) -> Job:
        self._obj["metadata"]["labels"][key] = value
        return self

    def parallelism(self, n: int) -> Job:
        self._obj["spec"]["parallelism"] = n
        return self

    def completions(self, n: int) -> Job:
        self._obj["spec"]["completions"] = n
        return self

    def succeeded(self, n: int) -> Job:
        self._obj.setdefault("status", {})["succeeded"] = n
        return self

    def min_parallelism(self, value) -> Job:
        return self.annotation("kueue.x-k8s.io/job-min-parallelism", str(value))


class PodGroup(_Builder):
    """A scheduler-plugins coscheduling PodGroup (scheduling.x-k8s.io/v1alpha1)."""

    def __init__(self, name: str, namespace: str = "team-a"):
        self._obj = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": name, "namespace": namespace}, "spec": {}}

    def min_member(self, count: int) -> PodGroup:
        self._obj["spec"]["minMember"] = count
        return self


# ---- core objects ------------------------------------------------------------------------------

class Namespace(_Builder):
    def __init__(self, name: str):
        self._obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {}}}

    def labels(self, labels: dict | None) -> Namespace:
        self._obj["metadata"]["labels"].update(labels or {})
        return self


class Node(_Builder):
    def __init__(self, name: str):
        self._obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
                     "spec": {"taints": []},
                     "status": {"allocatable": {"cpu": "16", "memory": "128Gi", "pods": "110"}}}

    def cpu(self, quantity) -> Node:
        return self.allocatable("cpu", quantity)

    def memory(self, quantity) -> Node:
        return self.allocatable("memory", quantity)

    def allocatable(self, resource: str, quantity) -> Node:
        self._obj["status"]["allocatable"][resource] = quantity
        return self

    def labels(self, labels: dict | None) -> Node:
        self._obj["metadata"]["labels"].update(labels or {})
        return self

    def taints(self, taints: list | None) -> Node:
        self._obj["spec"]["taints"] = list(taints or [])
        return self


class Pod(_Builder):
    """A single-container pod, pending unless .node() (Running there) or .phase() says otherwise."""

    def __init__(self, name: str, namespace: str = "team-a"):
        self._obj = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                                  "creationTimestamp": format_time(BASE_TIME), "labels": {}},
                     "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                              "resources": {"requests": {}}}]}}

    def queue(self, name: str | None) -> Pod:
        """The LocalQueue label; None leaves the pod outside every queue."""
        if name:
            self._obj["metadata"]["labels"][QUEUE_LABEL] = name
        return self

    def cpu(self, quantity) -> Pod:
        return self.request("cpu", quantity)

    def memory(self, quantity) -> Pod:
        return self.request("memory", quantity)

    def request(self, resource: str, quantity) -> Pod:
        if quantity is not None:
            self._obj["spec"]["containers"][0]["resources"]["requests"][resource] = quantity
        return self

    def requests(self, requests: dict) -> Pod:
        for resource, quantity in requests.items():
            self.request(resource, quantity)
        return self

    def priority(self, value: int | None) -> Pod:
        if value is not None:
            self._obj["spec"]["priority"] = value
        return self

    def priority_class(self, name: str) -> Pod:
        """spec.priorityClassName (the pod's own, kube-scheduler's priority)."""
        self._obj["spec"]["priorityClassName"] = name
        return self

    def workload_priority(self, name: str) -> Pod:
        """The label kueue.x-k8s.io/priority-class naming a WorkloadPriorityClass."""
        return self.label("kueue.x-k8s.io/priority-class", name)

    def created(self, seconds: float) -> Pod:
        """creationTimestamp BASE_TIME + seconds; the API server keeps whole seconds, so does format_time."""
        return self.created_at(format_time(BASE_TIME + seconds))

    def created_at(self, timestamp: str) -> Pod:
        self._obj["metadata"]["creationTimestamp"] = timestamp
        return self

    def started(self, seconds: float | None) -> Pod:
        """status.startTime, BASE_TIME + seconds: when the kubelet started it (None: not started)."""
        if seconds is None:
            return self
        self._obj.setdefault("status", {"phase": "Running"})["startTime"] = format_time(BASE_TIME + seconds)
        return self

    def scheduled(self, seconds: float | None) -> Pod:
        """The PodScheduled condition's lastTransitionTime, BASE_TIME + seconds: when it was bound (None: none)."""
        if seconds is None:
            return self
        self._condition({"type": "PodScheduled", "status": "True",
                         "lastTransitionTime": format_time(BASE_TIME + seconds)})
        return self

    def _condition(self, condition: dict) -> None:
        conditions = self._obj.setdefault("status", {"phase": "Running"}).setdefault("conditions", [])
        conditions[:] = [c for c in conditions if c["type"] != condition["type"]] + [condition]

    def ready(self, ready: bool = True) -> Pod:
        """The Ready condition (waitForPodsReady counts a pod as started only once it is Ready)."""
        self._condition({"type": "Ready", "status": "True" if ready else "False"})
        return self

    def node(self, name: str | None) -> Pod:
        """Bound to the node (spec.nodeName) and Running there, unless .phase() says otherwise."""
        if name:
            self._obj["spec"]["nodeName"] = name
            self._obj.setdefault("status", {"phase": "Running"})
        return self

    def phase(self, phase: str | None) -> Pod:
        if phase:
            self._obj.setdefault("status", {})["phase"] = phase
        return self

    def gated(self, *gates: str) -> Pod:
        """spec.schedulingGates: Kueue's admission gate (app.objects.pod.ADMISSION_GATE) unless others are named."""
        self._obj["spec"]["schedulingGates"] = [{"name": g} for g in gates or ("kueue.x-k8s.io/admission",)]
        return self

    def node_selector(self, selector: dict | None) -> Pod:
        if selector:
            self._obj["spec"]["nodeSelector"] = dict(selector)
        return self

    def tolerations(self, tolerations: list | None) -> Pod:
        if tolerations:
            self._obj["spec"]["tolerations"] = list(tolerations)
        return self

    def uid(self, uid: str | None) -> Pod:
        if uid:
            self._obj["metadata"]["uid"] = uid
        return self

    def label(self, key: str, value: str) -> Pod:
        self._obj["metadata"]["labels"][key] = value
        return self

    def of_job(self, job: Job) -> Pod:
        """Owned by the Job, as its controller makes them (the job-name label, no queue label of its own)."""
        return self.owner("Job", job.name, job.uid).label("batch.kubernetes.io/job-name", job.name)

    def owner(self, kind: str, name: str, uid: str, api_version: str = "batch/v1") -> Pod:
        """The controller ownerReference (a Job's, a ReplicaSet's pods)."""
        self._obj["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name,
                                                     "uid": uid, "controller": True}]
        return self

    def wire(self) -> dict:
        """The Pod as kube-scheduler puts it in a filter or preempt body (../shared/wire/): no apiVersion or
        kind, schedulerName set, status Pending."""
        out = self.obj()
        del out["apiVersion"], out["kind"]
        out["spec"]["schedulerName"] = "default-scheduler"
        out.setdefault("status", {"phase": "Pending", "qosClass": "Burstable"})
        return out


def running(name: str, queue: str | None, cpu, node: str = "n1", *, namespace: str = "team-a",
            priority: int | None = None, created: float = 0) -> Pod:
    """A pod of LocalQueue `queue` (None: of none) requesting cpu, bound to node and Running there: the workload a
    test's cluster already runs. A builder: chain what else the test is about, end with .obj()."""
    return Pod(name, namespace).queue(queue).cpu(cpu).priority(priority).created(created).node(node)


def as_v1beta2(obj: dict) -> dict:
    """A kueue.x-k8s.io/v1beta1 object as Kueue's conversion serves it in v1beta2 (app/objects/conversion.py):
    spec.cohort is spec.cohortName, Borrow and Preempt are MayStopSearch, admissionChecks move under
    admissionChecksStrategy. Any other object is returned as it is (a copy)."""
    return convert(obj, "v1beta2")


def Expectation(**spec) -> dict:
    """A scenario's Expectation document (../shared/scenarios/FORMAT.md): admitted, pending, placements, until, ...
    by their names in the file."""
    return {"apiVersion": "quotient.dev/v1alpha1", "kind": "Expectation", "spec": spec}


# ---- the verbs' bodies (../shared/wire/) ---------------------------------------------------------

def extender_args(pod: dict, names: list[str]) -> dict:
    """kube-scheduler's ExtenderArgs with nodeCacheCapable: the pod and the names of the nodes it passed."""
    return {"Pod": pod, "Nodes": None, "NodeNames": names}


def binding_args(pod: dict, node: str) -> dict:
    """kube-scheduler's ExtenderBindingArgs for the pod onto node."""
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


# ---- snapshots -----------------------------------------------------------------------------------

def snapshot_yaml(*objects: dict) -> str:
    """The objects as one multi-document YAML snapshot, what `quotient serve --snapshot` reads. A pod as
    kube-scheduler sent it (.wire(), no kind) is written as the API server lists it."""
    listed = (o if "kind" in o else {"apiVersion": "v1", "kind": "Pod", **o} for o in objects)
    return "---\n".join(yaml.safe_dump(o, sort_keys=False) for o in listed)
