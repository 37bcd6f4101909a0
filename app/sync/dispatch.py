"""Routes one Kubernetes object (added, changed or deleted) to the ClusterState.

The snapshot loader, the simulator and the live watch all feed state through
here, so each kind is decoded and validated in exactly one place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..objects import kueue
from ..objects.disruption_budget import decode_pdb
from ..objects.errors import InvalidObject
from ..objects.job import decode_job
from ..objects.meta import metadata, stable_uid, string_map
from ..objects.node import decode_node
from ..objects.pod import decode_pod
from ..objects.podgroup import decode_pod_group
from ..objects.priority_class import decode_priority_class
from ..objects.topology import decode_topology
from ..state.cluster import ClusterState

KUEUE_KINDS = ("Topology", "ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue")
EXTRA_KINDS = ("PodDisruptionBudget", "PodGroup", "Job")
PRIORITY_KINDS = ("PriorityClass", "WorkloadPriorityClass")


def object_kind(obj: dict) -> str:
    """The kind, checked against the API group Quotient expects for it."""
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidObject("?", "?", "object has no kind")
    if kind in KUEUE_KINDS or kind == "WorkloadPriorityClass":
        kueue.api_version(obj, kind)
    return kind


def _namespaced_key(obj: dict, kind: str) -> str:
    """namespace/name, a missing namespace read as "default" (as the decoders of namespaced kinds do)."""
    meta, name = metadata(obj, kind)
    return f"{meta.get('namespace') or 'default'}/{name}"


def _namespaced(key: str) -> str:
    """A key as a namespaced kind's store holds it: namespace/name, a bare name read as in "default"."""
    return key if "/" in key else f"default/{key}"


def _pod_uid(key: str, uid: str) -> str:
    namespace, _, name = key.rpartition("/")
    return uid or stable_uid("Pod", namespace, name)


def _namespace(obj: dict) -> tuple[str, dict[str, str]]:
    meta, name = metadata(obj, "Namespace")
    return name, string_map(meta.get("labels"), "Namespace", name, "metadata.labels")


def _kueue_key(decoded) -> str:
    return decoded.key if isinstance(decoded, kueue.LocalQueue) else decoded.name


@dataclass(frozen=True, slots=True)
class Kind:
    """How the state reads one kind: decode an object (InvalidObject on bad input), upsert what it decoded,
    remove it by (key, uid), and the (key, uid) a deleted object is removed by (some kinds decode it for that,
    and so refuse a deleted object that is not valid, others read only its name)."""
    decode: Callable[[dict], Any]
    upsert: Callable[[ClusterState, Any], None]
    remove: Callable[[ClusterState, str, str], None]
    deleted: Callable[[dict], tuple[str, str]]


def _kueue_kind(kind: str, decode: Callable[[dict], Any]) -> Kind:
    return Kind(decode, lambda state, o: state.upsert_kueue(kind, _kueue_key(o), o),
                lambda state, key, uid: state.remove_kueue(kind, key), lambda obj: (_kueue_key(decode(obj)), ""))


def _named(kind: str) -> Callable[[dict], tuple[str, str]]:
    return lambda obj: (metadata(obj, kind)[1], "")


def _namespaced_key_of(kind: str) -> Callable[[dict], tuple[str, str]]:
    return lambda obj: (_namespaced_key(obj, kind), "")


KINDS: dict[str, Kind] = {
    "Pod": Kind(decode_pod, lambda state, pod: state.upsert_pod(pod),
                lambda state, key, uid: state.remove_pod(_pod_uid(key, uid)), lambda obj: ("", decode_pod(obj).uid)),
    "Node": Kind(decode_node, lambda state, node: state.upsert_node(node),
                 lambda state, key, uid: state.remove_node(key), _named("Node")),
    "Namespace": Kind(_namespace, lambda state, ns: state.store.upsert_namespace(*ns),
                      lambda state, key, uid: state.store.remove_namespace(key), _named("Namespace")),
    "PriorityClass": Kind(decode_priority_class, lambda state, pc: state.store.upsert_priority_class(pc),
                          lambda state, key, uid: state.store.remove_priority_class(key),
                          lambda obj: (decode_priority_class(obj).name, "")),
    "WorkloadPriorityClass": Kind(kueue.decode_workload_priority_class,
                                  lambda state, wpc: state.upsert_workload_priority_class(wpc),
                                  lambda state, key, uid: state.remove_workload_priority_class(key),
                                  lambda obj: (kueue.decode_workload_priority_class(obj).name, "")),
    "Topology": _kueue_kind("Topology", decode_topology),
    "ResourceFlavor": _kueue_kind("ResourceFlavor", kueue.decode_resource_flavor),
    "ClusterQueue": _kueue_kind("ClusterQueue", kueue.decode_cluster_queue),
    "Cohort": _kueue_kind("Cohort", kueue.decode_cohort),
    "LocalQueue": _kueue_kind("LocalQueue", kueue.decode_local_queue),
    "PodDisruptionBudget": Kind(decode_pdb, lambda state, pdb: state.store.upsert_budget(pdb),
                                lambda state, key, uid: state.store.remove_budget(_namespaced(key)),
                                _namespaced_key_of("PodDisruptionBudget")),
    "PodGroup": Kind(decode_pod_group, lambda state, group: state.store.upsert_pod_group(group),
                     lambda state, key, uid: state.store.remove_pod_group(_namespaced(key)), _namespaced_key_of("PodGroup")),
    "Job": Kind(decode_job, lambda state, job: state.upsert_job(job),
                lambda state, key, uid: state.remove_job(_namespaced(key)), _namespaced_key_of("Job")),
}


def remove_object(state: ClusterState, kind: str, key: str, uid: str = "") -> None:
    """Take out an object known only by kind and key (a name, or namespace/name), as a watch's
    DELETED event or a relist that no longer lists it leaves it: nothing to decode."""
    known = KINDS.get(kind)
    if known is not None:
        known.remove(state, key, uid)


def apply_object(state: ClusterState, obj: dict, deleted: bool = False) -> bool:
    """Apply one object; False when its kind is not one Quotient reads. InvalidObject on bad input."""
    known = KINDS.get(object_kind(obj))
    if known is None:
        return False
    if deleted:
        known.remove(state, *known.deleted(obj))
    else:
        known.upsert(state, known.decode(obj))
    return True
