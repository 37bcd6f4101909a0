"""The embedded default source: cluster objects read from a file instead of an API server.

A snapshot is the Kubernetes documents of a scenario file, or what
`kubectl get ... -o json` prints: multi-document YAML (read with libyaml), a JSON
object, array or v1 List, or JSON lines. JSON loads several times faster than
YAML, which matters at 50,000 pods. Documents are checked as a whole before
anything is applied, and an error names the file, the document and the reason.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import orjson
import yaml

from ..config import KUEUE_CONFIG_GROUP
from ..objects.errors import InvalidObject
from ..objects.pod import PRIORITY_CLASS_LABEL, QUEUE_LABEL
from ..state.cluster import ClusterState
from .dispatch import EXTRA_KINDS, KUEUE_KINDS, PRIORITY_KINDS, apply_object, object_kind

QUOTIENT_GROUP = "quotient.dev"
# The cluster kinds apply_object reads; anything else in a file is a mistake, found before applying.
READ_KINDS = frozenset({"Namespace", "Node", "Pod", *PRIORITY_KINDS, *KUEUE_KINDS, *EXTRA_KINDS})
UNKNOWN_KIND = ("kind is not one Quotient reads (Namespace, Node, PriorityClass, WorkloadPriorityClass, "
                "Topology, ResourceFlavor, ClusterQueue, Cohort, LocalQueue, PodDisruptionBudget, PodGroup, Job, Pod, "
                "Configuration, Expectation)")
DEFAULT_SNAPSHOT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "demo-snapshot.yaml")


class SnapshotError(ValueError):
    """A snapshot or scenario file that cannot be used; says where and why."""


@dataclass(slots=True)
class Document:
    index: int          # 1-based position in the file
    obj: dict

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind"))

    @property
    def name(self) -> str:
        meta = self.obj.get("metadata") or {}
        ns = meta.get("namespace") if isinstance(meta, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        return f"{ns}/{name}" if ns else str(name)


def read_documents(path: str) -> list[Document]:
    """Parse a snapshot file into documents; SnapshotError on unreadable or malformed input."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SnapshotError(f"{path}: {e.strerror or e}") from None
    lower = path.lower()
    raw: list = []   # filled as parsing goes, so an error can name the document it is in
    try:
        if lower.endswith((".jsonl", ".ndjson")):
            for line in data.splitlines():
                if line.strip():
                    raw.append(orjson.loads(line))
        elif lower.endswith(".json"):
            body = orjson.loads(data)
            raw = body if isinstance(body, list) else body.get("items", [body]) if isinstance(body, dict) \
                and str(body.get("kind", "")).endswith("List") else [body]
        else:
            for d in yaml.load_all(data, Loader=yaml.CSafeLoader):
                if d is not None:
                    raw.append(d)
    except (orjson.JSONDecodeError, yaml.YAMLError) as e:
        where = "" if lower.endswith(".json") else f" document {len(raw) + 1}:"
        raise SnapshotError(f"{path}:{where} not valid {'JSON' if '.json' in lower else 'YAML'}: {e}") from None
    if not isinstance(raw, list):
        raise SnapshotError(f"{path}: items of the List must be a list")
    docs = []
    for i, obj in enumerate(raw, 1):
        if not isinstance(obj, dict):
            raise SnapshotError(f"{path}: document {i} is not a mapping")
        docs.append(Document(i, obj))
    return docs


def _fail(path: str, doc: Document, reason: str) -> SnapshotError:
    return SnapshotError(f"{path}: document {doc.index} ({doc.kind} {doc.name}): {reason}")


def check_references(path: str, docs: list[Document]) -> None:
    """Duplicates and dangling references, which a live cluster tolerates but a file should not have."""
    seen: dict[tuple[str, str], int] = {}
    by_kind: dict[str, dict[str, Document]] = {}
    for doc in docs:
        try:
            kind = object_kind(doc.obj)
        except InvalidObject as e:
            raise _fail(path, doc, e.reason) from None
        if kind not in READ_KINDS:
            raise _fail(path, doc, UNKNOWN_KIND)
        key = (kind, doc.name)
        if key in seen:
            raise _fail(path, doc, f"duplicate of document {seen[key]}")
        seen[key] = doc.index
        by_kind.setdefault(kind, {})[doc.name] = doc
    flavors, queues = by_kind.get("ResourceFlavor", {}), by_kind.get("ClusterQueue", {})
    local_queues, nodes = by_kind.get("LocalQueue", {}), by_kind.get("Node", {})
    classes = by_kind.get("PriorityClass", {})
    for doc in queues.values():
        for group in (doc.obj.get("spec") or {}).get("resourceGroups") or []:
            for fq in (group or {}).get("flavors") or []:
                name = (fq or {}).get("name")
                if name not in flavors:
                    raise _fail(path, doc, f"flavor {name} is not defined by any ResourceFlavor document")
    for doc in local_queues.values():
        cq = (doc.obj.get("spec") or {}).get("clusterQueue")
        if cq not in queues:
            raise _fail(path, doc, f"spec.clusterQueue {cq} is not defined by any ClusterQueue document")
    for doc in list(by_kind.get("Job", {}).values()) + list(by_kind.get("Pod", {}).values()):
        meta = doc.obj.get("metadata") or {}
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
        ns = meta.get("namespace") or "default"
        if queue and f"{ns}/{queue}" not in local_queues:
            raise _fail(path, doc, f"label {QUEUE_LABEL}={queue} names no LocalQueue in namespace {ns}")
        wpc = (meta.get("labels") or {}).get(PRIORITY_CLASS_LABEL)
        if wpc and wpc not in by_kind.get("WorkloadPriorityClass", {}):
            raise _fail(path, doc, f"label {PRIORITY_CLASS_LABEL}={wpc} is not defined by any WorkloadPriorityClass "
                        "document")
        if doc.kind != "Pod":
            continue
        spec = doc.obj.get("spec") or {}
        if spec.get("nodeName") and spec["nodeName"] not in nodes:
            raise _fail(path, doc, f"spec.nodeName {spec['nodeName']} is not defined by any Node document")
        pc = spec.get("priorityClassName")
        if pc and pc not in classes and spec.get("priority") is None:
            raise _fail(path, doc, f"spec.priorityClassName {pc} is not defined by any PriorityClass document")


def split_documents(docs: list[Document]) -> tuple[list[Document], dict[str, list[Document]]]:
    """Cluster objects, and Quotient's own kinds (Configuration, Expectation) by kind."""
    cluster, own = [], {}
    for doc in docs:
        api = str(doc.obj.get("apiVersion") or "")
        group = api.split("/")[0]
        if group == QUOTIENT_GROUP or (group == KUEUE_CONFIG_GROUP and doc.kind == "Configuration"):
            own.setdefault(doc.kind, []).append(doc)
        else:
            cluster.append(doc)
    return cluster, own


def apply_documents(path: str, state: ClusterState, docs: list[Document]) -> None:
    """Apply cluster objects in one bulk pass (the quota tree is built once, at the end)."""
    state.begin_bulk()
    try:
        for doc in sorted(docs, key=lambda d: d.kind == "Pod"):   # pods last: their queues exist
            try:
                if not apply_object(state, doc.obj):
                    raise _fail(path, doc, UNKNOWN_KIND)
            except InvalidObject as e:
                raise _fail(path, doc, e.reason) from None
    finally:
        state.end_bulk()


def read_snapshot(path: str) -> tuple[list[Document], dict[str, list[Document]]]:
    """Read and check a snapshot: (cluster objects, Quotient's own documents by kind)."""
    docs = read_documents(path)
    cluster, own = split_documents(docs)
    unknown = set(own) - {"Configuration", "Expectation"}
    if unknown:
        doc = own[sorted(unknown)[0]][0]
        raise _fail(path, doc, "unknown quotient.dev kind (known: Configuration, Expectation)")
    if len(own.get("Configuration", [])) > 1:
        raise _fail(path, own["Configuration"][1], "more than one Configuration")
    check_references(path, cluster)
    return cluster, own
