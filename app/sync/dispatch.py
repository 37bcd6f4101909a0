"""Routes one Kubernetes object (added, changed or deleted) to the ClusterState.

The snapshot loader, the simulator and the live watch all feed state through
here, so each kind is decoded and validated in exactly one place.
"""
from __future__ import annotations

from ..objects import kueue
from ..objects.budgets import decode_pdb
from ..objects.errors import InvalidObject
from ..objects.job import decode_job
from ..objects.meta import mapping, metadata, stable_uid, string_map
from ..objects.node import decode_node
from ..objects.pod import decode_pod
from ..objects.podgroup import decode_pod_group
from ..objects.priority_class import decode_priority_class
from ..state.cluster import ClusterState

KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue")
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


def object_key(obj: dict) -> str:
    meta = mapping(obj.get("metadata"), "?", "?", "metadata")
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _namespaced_key(obj: dict, kind: str) -> str:
    """namespace/name, a missing namespace read as "default" (as the decoders of namespaced kinds do)."""
    meta, name = metadata(obj, kind)
    return f"{meta.get('namespace') or 'default'}/{name}"


def remove_object(state: ClusterState, kind: str, key: str, uid: str = "") -> None:
    """Take out an object known only by kind and key (a name, or namespace/name), as a watch's
    DELETED event or a relist that no longer lists it leaves it: nothing to decode."""
    if kind == "Pod":
        namespace, _, name = key.rpartition("/")
        state.remove_pod(uid or stable_uid("Pod", namespace, name))
    elif kind == "Node":
        state.remove_node(key)
    elif kind == "Namespace":
        state.store.remove_namespace(key)
    elif kind == "PriorityClass":
        state.store.remove_priority_class(key)
    elif kind == "WorkloadPriorityClass":
        state.remove_workload_priority_class(key)
    elif kind in KUEUE_KINDS:
        state.remove_kueue(kind, key)
    elif kind == "PodDisruptionBudget":
        state.store.remove_budget(key if "/" in key else f"default/{key}")
    elif kind == "PodGroup":
        state.store.remove_pod_group(key if "/" in key else f"default/{key}")
    elif kind == "Job":
        state.remove_job(key if "/" in key else f"default/{key}")


def apply_object(state: ClusterState, obj: dict, deleted: bool = False) -> bool:
    """Apply one object; False when its kind is not one Quotient reads. InvalidObject on bad input."""
    kind = object_kind(obj)
    if kind == "Pod":
        pod = decode_pod(obj)
        state.remove_pod(pod.uid) if deleted else state.upsert_pod(pod)
    elif kind == "Node":
        if deleted:
            state.remove_node(metadata(obj, kind)[1])
        else:
            state.upsert_node(decode_node(obj))
    elif kind == "Namespace":
        meta, name = metadata(obj, kind)
        if deleted:
            state.store.remove_namespace(name)
        else:
            state.store.upsert_namespace(name, string_map(meta.get("labels"), kind, name, "metadata.labels"))
    elif kind == "PriorityClass":
        pc = decode_priority_class(obj)
        state.store.remove_priority_class(pc.name) if deleted else state.store.upsert_priority_class(pc)
    elif kind == "WorkloadPriorityClass":
        wpc = kueue.decode_workload_priority_class(obj)
        state.remove_workload_priority_class(wpc.name) if deleted else state.upsert_workload_priority_class(wpc)
    elif kind in KUEUE_KINDS:
        decoded = {"ResourceFlavor": kueue.decode_resource_flavor, "ClusterQueue": kueue.decode_cluster_queue,
                   "Cohort": kueue.decode_cohort, "LocalQueue": kueue.decode_local_queue}[kind](obj)
        key = decoded.key if isinstance(decoded, kueue.LocalQueue) else decoded.name
        if deleted:
            state.remove_kueue(kind, key)
        else:
            state.upsert_kueue(kind, key, decoded)
    elif kind == "PodDisruptionBudget":
        if deleted:
            state.store.remove_budget(_namespaced_key(obj, kind))
        else:
            state.store.upsert_budget(decode_pdb(obj))
    elif kind == "PodGroup":
        if deleted:
            state.store.remove_pod_group(_namespaced_key(obj, kind))
        else:
            state.store.upsert_pod_group(decode_pod_group(obj))
    elif kind == "Job":
        if deleted:
            state.remove_job(_namespaced_key(obj, kind))
        else:
            state.upsert_job(decode_job(obj))
    else:
        return False
    return True
