"""A scenario file (../shared/scenarios/FORMAT.md): cluster objects, pods to submit, Expectation.

Everything is checked before the run starts; a problem is a ScenarioError that
names the file and document (exit 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import ConfigError, Configuration, decode_configuration, log_unused
from ..objects.meta import format_time, parse_duration, parse_time, stable_uid
from ..state.cluster import ClusterState
from ..sync.snapshot import Document, SnapshotError, apply_documents, read_snapshot
from .job_controller import first_pods, pod_names

SUBMIT_AT = "scenario.quotient.dev/submit-at"
READY_AFTER = "scenario.quotient.dev/ready-after"
FINISH_AFTER = "scenario.quotient.dev/finish-after"
UNREADY_AFTER = "scenario.quotient.dev/unready-after"   # Quotient's extension: Ready, then not, this long after
TERMINATE_AFTER = "scenario.quotient.dev/terminate-after"   # once evicted, Terminating this long
READY_WITH_PEERS = "scenario.quotient.dev/ready-with-peers"   # extension: Ready only once all its owner's pods run
SCHEDULED_AT = "scenario.quotient.dev/scheduled-at"   # extension: a running pod's PodScheduled time (RFC 3339)
WATCH_LAG = "scenario.quotient.dev/watch-lag"   # on the Expectation: Quotient's watch sees changes this late
# On the Expectation: the background reconcile runs this often in simulated time, as `serve` runs it every
# reconcileInterval (default: at every step, so a scenario does not depend on when it falls).
RECONCILE_EVERY = "scenario.quotient.dev/reconcile-interval"
DEFAULT_START = 1767225600.0   # 2026-01-01T00:00:00Z
LIST_FIELDS = ("admitted", "pending", "preempted", "notPreempted")
EXPECTATION_FIELDS = set(LIST_FIELDS) | {"until", "placements", "colocated", "maxEvictions"}


class ScenarioError(ValueError):
    """The scenario file itself is wrong (exit 2)."""


@dataclass
class Expectation:
    until: float | None = None
    lists: dict[str, list[str]] = field(default_factory=dict)
    placements: dict[str, str] = field(default_factory=dict)
    colocated: list[tuple[str, list[str]]] = field(default_factory=list)    # (node label, pods sharing its value)
    max_evictions: int | None = None


@dataclass
class PodPlan:
    """A pod and when things happen to it in simulated time."""
    obj: dict
    submit_at: float = 0.0
    ready_after: float | None = 0.0      # None: never Ready
    finish_after: float | None = None    # None: runs forever
    unready_after: float | None = None   # None: stays Ready
    terminate_after: float = 0.0         # once evicted, Terminating on its node this long

    @property
    def key(self) -> str:
        m = self.obj["metadata"]
        return f"{m.get('namespace') or 'default'}/{m['name']}"


@dataclass
class Scenario:
    path: str
    cluster: list[Document]              # everything but the pods
    pods: list[PodPlan]
    config: Configuration
    expectation: Expectation | None
    start: float
    watch_lag: float = 0.0       # kube-scheduler sees a change this long before Quotient's watch delivers it
    reconcile_every: float = 0.0  # the background reconcile's period in simulated time (0: at every step)
    jobs: list[dict] = field(default_factory=list)   # batch/v1 Jobs, whose pods the Job controller makes


def _duration(doc: Document, annotations: dict, key: str, allow_never: bool = False) -> float | None:
    value = annotations.get(key)
    if value is None:
        return None
    if allow_never and value == "never":
        return None
    try:
        return parse_duration(value, key)
    except ValueError as e:
        raise ScenarioError(f"document {doc.index} (Pod {doc.name}): {e}") from None


def _scheduled_at(doc: Document, annotations: dict) -> None:
    """scenario.quotient.dev/scheduled-at on a running pod: its PodScheduled condition, as the API server
    records a binding (True, lastTransitionTime to the second), so a file can say when each pod was
    admitted. Without it, a PodScheduled entry the file gives in status.conditions is kept as it is."""
    value = annotations.get(SCHEDULED_AT)
    if value is None:
        return
    where = f"document {doc.index} (Pod {doc.name}): {SCHEDULED_AT}"
    if not (doc.obj.get("spec") or {}).get("nodeName"):
        raise ScenarioError(f"{where} is for a pod already running (spec.nodeName); "
                            "a pod the scheduler binds gets its PodScheduled time from the bind")
    at = parse_time(value)
    if at is None:
        raise ScenarioError(f"{where}: {value!r} is not an RFC 3339 time like 2026-01-01T00:00:05Z")
    status = doc.obj.setdefault("status", {})
    if not isinstance(status, dict):
        raise ScenarioError(f"document {doc.index} (Pod {doc.name}): status must be a mapping")
    conditions = [c for c in status.get("conditions") or [] if not (isinstance(c, dict) and c.get("type") == "PodScheduled")]
    status["conditions"] = conditions + [{"type": "PodScheduled", "status": "True",
                                          "lastTransitionTime": format_time(at)}]


def _expectation(path: str, doc: Document, pod_keys: set[str]) -> Expectation:
    spec = doc.obj.get("spec") or {}
    where = f"{path}: document {doc.index} (Expectation)"
    if not isinstance(spec, dict):
        raise ScenarioError(f"{where}: spec must be a mapping")
    unknown = sorted(set(spec) - EXPECTATION_FIELDS)
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(unknown)}")
    exp = Expectation()
    if spec.get("until") is not None:
        try:
            exp.until = parse_duration(spec["until"], "until")
        except ValueError as e:
            raise ScenarioError(f"{where}: {e}") from None
    for name in LIST_FIELDS:
        values = spec.get(name) or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ScenarioError(f"{where}: {name} must be a list of namespace/name")
        exp.lists[name] = values
    placements = spec.get("placements") or {}
    if not isinstance(placements, dict):
        raise ScenarioError(f"{where}: placements must map namespace/name to a node")
    exp.placements = {str(k): str(v) for k, v in placements.items()}
    colocated = spec.get("colocated") or []
    if not isinstance(colocated, list):
        raise ScenarioError(f"{where}: colocated must be a list of {{nodeLabel, pods}}")
    for i, entry in enumerate(colocated):
        if not isinstance(entry, dict) or set(entry) != {"nodeLabel", "pods"} \
                or not isinstance(entry["nodeLabel"], str) or not entry["nodeLabel"] \
                or not isinstance(entry["pods"], list) or not all(isinstance(p, str) for p in entry["pods"]):
            raise ScenarioError(f"{where}: colocated[{i}] must be {{nodeLabel: <label>, pods: [namespace/name, ...]}}")
        exp.colocated.append((entry["nodeLabel"], list(entry["pods"])))
    if spec.get("maxEvictions") is not None:
        if not isinstance(spec["maxEvictions"], int) or spec["maxEvictions"] < 0:
            raise ScenarioError(f"{where}: maxEvictions must be a non-negative integer")
        exp.max_evictions = spec["maxEvictions"]
    for name in list(exp.lists.get("admitted", [])) + [k for n in LIST_FIELDS for k in exp.lists[n]] \
            + list(exp.placements) + [k for _, keys in exp.colocated for k in keys]:
        base = name.rsplit("-r", 1)[0] if "-r" in name and name.rsplit("-r", 1)[1].isdigit() else name
        if name not in pod_keys and base not in pod_keys:
            raise ScenarioError(f"{where}: names pod {name}, which is not in the file")
    return exp


def load_scenario(path: str) -> Scenario:
    try:
        cluster_docs, own = read_snapshot(path)
        config = decode_configuration(own["Configuration"][0].obj) if own.get("Configuration") else Configuration()
        log_unused(config, path)
        apply_documents(path, ClusterState(config), cluster_docs)   # every object decodes, before the run
    except (SnapshotError, ConfigError) as e:
        raise ScenarioError(str(e)) from None
    cluster, pods = [], []
    previous: float | None = None
    explicit = [parse_time((d.obj.get("metadata") or {}).get("creationTimestamp"))
                for d in cluster_docs if d.kind == "Pod"]
    start = float(math.floor(max([t for t in explicit if t is not None], default=DEFAULT_START)))
    for doc in _with_job_pods(cluster_docs, start):
        if doc.kind != "Pod":
            cluster.append(doc)
            continue
        meta = doc.obj.setdefault("metadata", {})
        annotations = meta.get("annotations") or {}
        ns = meta.setdefault("namespace", "default")
        meta.setdefault("uid", stable_uid("Pod", ns, meta["name"]))
        submit = _duration(doc, annotations, SUBMIT_AT) or 0.0
        created = parse_time(meta.get("creationTimestamp"))
        if created is None:
            created = start + submit if submit else (previous + 1 if previous is not None else start)
        meta["creationTimestamp"] = format_time(created)    # whole seconds, as the API server sets it
        created = parse_time(meta["creationTimestamp"])
        previous = created
        _scheduled_at(doc, annotations)
        ready = _duration(doc, annotations, READY_AFTER, allow_never=True)
        if annotations.get(READY_AFTER) is None:
            ready = 0.0
        pods.append(PodPlan(doc.obj, submit, ready, _duration(doc, annotations, FINISH_AFTER),
                            _duration(doc, annotations, UNREADY_AFTER),
                            _duration(doc, annotations, TERMINATE_AFTER) or 0.0))
    start = max([start] + [parse_time(p.obj["metadata"]["creationTimestamp"]) for p in pods if not p.submit_at])
    expectation, lag, every = None, 0.0, 0.0
    if own.get("Expectation"):
        if len(own["Expectation"]) > 1:
            raise ScenarioError(f"{path}: more than one Expectation")
        doc = own["Expectation"][0]
        jobs_pods = {k for d in cluster_docs if d.kind == "Job" for k in pod_names(d.obj)}
        expectation = _expectation(path, doc, {p.key for p in pods} | jobs_pods)
        annotations = (doc.obj.get("metadata") or {}).get("annotations") or {}
        lag = _duration(doc, annotations, WATCH_LAG) or 0.0
        every = _duration(doc, annotations, RECONCILE_EVERY) or 0.0
    jobs = [d.obj for d in cluster_docs if d.kind == "Job"]
    return Scenario(path, cluster, pods, config, expectation, start, lag, every, jobs)


def _with_job_pods(docs: list[Document], start: float) -> list[Document]:
    """The documents with, after each Job, the pods its controller makes at once (sim.job_controller), as if the file
    listed them: the Job's template with its scenario annotations (submit-at, ready-after, ...)."""
    out = []
    for doc in docs:
        out.append(doc)
        if doc.kind == "Job":
            meta = doc.obj.setdefault("metadata", {})
            meta.setdefault("namespace", "default")
            meta.setdefault("uid", stable_uid("Job", meta["namespace"], meta["name"]))
            created = parse_time(meta.get("creationTimestamp"))
            if created is None:
                template = ((doc.obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
                created = start + (_duration(doc, template.get("annotations") or {}, SUBMIT_AT) or 0.0)
            out.extend(Document(doc.index, pod) for pod in first_pods(doc.obj, created))
    return out
