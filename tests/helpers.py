"""Builders for the plain Kubernetes dicts a cluster delivers, and a ClusterState fed with them.

Every state in the quota/flavor/admission tests is built through
app.sync.dispatch.apply_object, exactly as the watch or a snapshot would feed it.

Quota shorthand used by cq()/cohort():
    flavors=[("default-flavor", {"cpu": "9", "memory": ("36Gi", None, None)})]
a resource maps to its nominalQuota, or to (nominalQuota, borrowingLimit, lendingLimit)
with None for "not set". One list of flavors is one resource group whose
coveredResources are the resources of its first flavor, in order; pass groups=[...]
(a list of such flavor lists) for several resource groups.
"""
from __future__ import annotations

import copy

import re

from app.config import Configuration
from app.objects.meta import format_time
from app.state.cluster import ClusterState
from app.sync.dispatch import apply_object

KUEUE = "kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
BASE_TIME = 1_700_000_000          # creation times are BASE_TIME + created seconds
ALL = object()                     # namespaceSelector {} (the default)

CPU = 1000                         # milli-CPU per CPU
Gi = 2**30


# ---- Kueue objects ---------------------------------------------------------------------------

def _resources(spec: dict) -> list[dict]:
    out = []
    for resource, q in spec.items():
        nominal, borrowing, lending = q if isinstance(q, tuple) else (q, None, None)
        entry = {"name": resource, "nominalQuota": nominal}
        if borrowing is not None:
            entry["borrowingLimit"] = borrowing
        if lending is not None:
            entry["lendingLimit"] = lending
        out.append(entry)
    return out


def resource_group(flavors: list) -> dict:
    """[(flavor, {resource: quota})] -> one resourceGroups entry."""
    covered = list(flavors[0][1])
    return {"coveredResources": covered,
            "flavors": [{"name": name, "resources": _resources(res)} for name, res in flavors]}


def cq(name: str, cohort: str | None = None, flavors: list | None = None, *, groups: list | None = None,
       selector=ALL, **spec) -> dict:
    """A ClusterQueue; extra keyword arguments are copied into spec (queueingStrategy, stopPolicy, ...)."""
    if groups is None:
        groups = [flavors if flavors is not None else [("default-flavor", {"cpu": "9"})]]
    body: dict = {"resourceGroups": [resource_group(g) for g in groups], **spec}
    if cohort:
        body["cohort"] = cohort
    if selector is ALL:
        body["namespaceSelector"] = {}
    elif selector is not None:
        body["namespaceSelector"] = selector
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def cohort(name: str, parent: str | None = None, flavors: list | None = None, *,
           groups: list | None = None) -> dict:
    """A Cohort object (hierarchical cohorts): optional parentName and its own quota."""
    body: dict = {}
    if parent:
        body["parentName"] = parent
    if groups is None and flavors is not None:
        groups = [flavors]
    if groups:
        body["resourceGroups"] = [resource_group(g) for g in groups]
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": body}


def flavor(name: str, labels: dict | None = None, taints: list | None = None,
           tolerations: list | None = None) -> dict:
    spec: dict = {}
    if labels:
        spec["nodeLabels"] = labels
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def lq(ns: str, name: str, cluster_queue: str) -> dict:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cluster_queue}}


# ---- core objects ------------------------------------------------------------------------------

def namespace(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def node(name: str, cpu="16", labels: dict | None = None, memory="128Gi", taints: list | None = None,
         extra: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"taints": list(taints or [])},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}}}


def pod(name: str, ns: str = "team-a", queue: str | None = "lq", cpu="1", *, memory=None, extra: dict | None = None,
        node: str | None = None, priority: int | None = None, created: float = 0, phase: str | None = None,
        node_selector: dict | None = None, tolerations: list | None = None, uid: str | None = None) -> dict:
    """A single-container pod; created is seconds after BASE_TIME (older pods have smaller values)."""
    requests: dict = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra or {})
    meta: dict = {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}",
                  "creationTimestamp": format_time(BASE_TIME + created), "labels": {}}
    if queue:
        meta["labels"][QUEUE_LABEL] = queue
    spec: dict = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase:
        obj["status"] = {"phase": phase}
    elif node:
        obj["status"] = {"phase": "Running"}
    return obj


# ---- state -------------------------------------------------------------------------------------

def make_state(*objects: dict, config: Configuration | None = None, clock=None, bulk: bool = True) -> ClusterState:
    """A ClusterState fed with objects through apply_object (inside begin_bulk/end_bulk by default)."""
    state = ClusterState(config, clock=clock) if clock is not None else ClusterState(config)
    if bulk:
        state.begin_bulk()
    for obj in objects:
        assert apply_object(state, obj) is True
    if bulk:
        state.end_bulk()
    return state


def apply(state: ClusterState, *objects: dict) -> None:
    for obj in objects:
        assert apply_object(state, obj) is True


def delete(state: ClusterState, *objects: dict) -> None:
    for obj in objects:
        assert apply_object(state, obj, deleted=True) is True


def pod_info(state: ClusterState, ns: str, name: str):
    found = state.pod_by_key(f"{ns}/{name}")
    assert found is not None, f"pod {ns}/{name} is not in the state"
    return found


def all_usage(state: ClusterState) -> dict:
    """Every node's usage, non-zero entries only: {(kind, name): {(flavor, resource): amount}}."""
    out = {}
    for kind, table in (("cq", state.tree.queues), ("cohort", state.tree.cohorts)):
        for name, n in table.items():
            used = {fr: v for fr, v in n.usage.items() if v}
            if used:
                out[(kind, name)] = used
    return out


class FakeClock:
    """A clock the test moves by hand: ClusterState(config, clock=FakeClock())."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def decide_pod(state: ClusterState, obj: dict, offered=None):
    """Apply a pod and decide() for it, with the node names kube-scheduler offered (None: no restriction)."""
    from app.api.offered import OfferedNodes
    from app.core.admission import decide

    apply(state, obj)
    has_nodes = None
    if offered is not None:
        nodes = OfferedNodes(sorted(offered))
        has_nodes = lambda flavor: nodes.has_nodes(state, flavor)  # noqa: E731
    return decide(state, pod_info(state, obj["metadata"]["namespace"], obj["metadata"]["name"]), has_nodes)


# ---- YAML snapshots (for the HTTP tests that load an Extender from text) ---------------------

# ClusterQueue cq ({quota} CPUs of default-flavor, {strategy}, {preemption}) behind LocalQueue q in
# team-a; format() it, then add nodes (NODE_YAML) and pods (with_pods).
ONE_QUEUE_YAML = """
apiVersion: v1
kind: Namespace
metadata: {{name: team-a}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: default-flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  queueingStrategy: {strategy}{preemption}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{{name: cpu, nominalQuota: {quota}}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: q, namespace: team-a}}
spec: {{clusterQueue: cq}}
"""

NODE_YAML = """
---
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
status: {{allocatable: {{cpu: "{cpu}", memory: 32Gi, pods: "110"}}}}
"""


def one_queue_yaml(quota: int, strategy: str = "BestEffortFIFO", preemption: str = "",
                   nodes=("n1", "n2"), node_cpu: int = 8) -> str:
    """ONE_QUEUE_YAML with its nodes; preemption is a flow mapping for the ClusterQueue's spec.preemption."""
    text = ONE_QUEUE_YAML.format(quota=quota, strategy=strategy,
                                 preemption=f"\n  preemption: {preemption}" if preemption else "")
    return text + "".join(NODE_YAML.format(name=n, cpu=node_cpu) for n in nodes)


def with_pods(text: str, pods) -> str:
    """A snapshot text followed by the given pods (bodies without apiVersion/kind), in order."""
    import yaml

    return text + "".join("\n---\n" + yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", **p}, sort_keys=False)
                          for p in pods)


RETRY = re.compile(r" \(Quotient: kube-scheduler tries it again after its backoff, (\w+)\)$")


def answer_reasons(answer: dict, offered) -> dict[str, str]:
    """node -> why a filter answer refused it: FailedNodes, FailedAndUnresolvableNodes, or, for a refusal
    answered as a retry (the Error field, app/refusals.py), every offered node with the reason in it."""
    if answer.get("Error"):
        assert not answer["NodeNames"] and not answer["FailedNodes"] and not answer["FailedAndUnresolvableNodes"]
        match = RETRY.search(answer["Error"])
        assert match, answer["Error"]
        return dict.fromkeys(offered, answer["Error"][:match.start()])
    return {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}


def with_uids(docs: list[dict]) -> list[dict]:
    """Copies of docs in which every pod has a uid, as the API server gives it."""
    out = copy.deepcopy(docs)
    for d in out:
        if d["kind"] == "Pod":
            d["metadata"]["uid"] = f"uid-{d['metadata']['namespace']}-{d['metadata']['name']}"
    return out


def uid(obj: dict) -> str:
    """A pod object's metadata.uid."""
    return obj["metadata"]["uid"]


def refused(answer: dict, offered) -> str:
    """The one reason every offered node was refused with (unresolvable, or answered as a retry); asserts it."""
    assert answer["NodeNames"] == [] and not answer["FailedNodes"], answer
    reasons = answer_reasons(answer, offered)
    assert set(reasons) == set(offered), reasons
    assert len(set(reasons.values())) == 1, reasons
    return next(iter(reasons.values()))
