"""Explain: what Quotient would decide now for a Pod manifest, without changing any state.

The manifest (JSON or YAML, or an ExtenderArgs body with "Pod" and "NodeNames") is
decoded into a fresh PodInfo that never joins the state; its priority is resolved
on that copy, and core.admission.decide charges pods ahead virtually and takes the
charge back, so the state (pods, reservations, usage) is the same afterwards.
"""
from __future__ import annotations

import orjson
import yaml

from ..core.admission import decide
from ..core.workload import Workload
from ..objects.errors import InvalidObject
from ..objects.offered_nodes import OfferedNodes
from ..objects.pod import decode_pod
from .podview import pod_status
from .views import pending_ahead, priority_view, requests_view, verdict_view

NODES_SHOWN = 20


class BadManifest(ValueError):
    """A body explain cannot read, naming the problem."""


def parse_manifest(body: bytes, content_type: str = "") -> tuple[dict, list[str] | None]:
    """(the Pod object, the offered node names or None) from a request body."""
    if not body.strip():
        raise BadManifest("empty body: send a Pod manifest (JSON or YAML)")
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        if "json" in content_type:
            raise BadManifest(f"body is not valid JSON: {e}") from None
        try:
            obj = yaml.load(body, Loader=yaml.CSafeLoader)
        except yaml.YAMLError as e:
            raise BadManifest(f"body is neither JSON nor YAML: {' '.join(str(e).split())}") from None
    if not isinstance(obj, dict):
        raise BadManifest(f"expected a Pod manifest (a mapping), got {type(obj).__name__}")
    names = None
    if "Pod" in obj and "metadata" not in obj:      # an ExtenderArgs body, as kube-scheduler sends filter
        names = obj.get("NodeNames")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise BadManifest('"NodeNames" must be a list of node names')
        obj = obj["Pod"]
        if not isinstance(obj, dict):
            raise BadManifest('"Pod" must be a Pod object')
    kind = obj.get("kind")
    if kind not in (None, "Pod"):
        raise BadManifest(f"expected kind Pod, got kind {kind!r}")
    return obj, names


def explain(state, obj: dict, names: list[str] | None = None) -> dict:
    """The decision filter would make for this pod now (without reserving anything), and why."""
    try:
        pod = decode_pod(obj)
    except InvalidObject as e:
        raise BadManifest(str(e)) from None
    known = state.store.pod_by_key(pod.key)
    meta = obj.get("metadata") or {}
    if known is not None and not meta.get("uid"):
        pod.uid = known.uid          # the same pod: not counted ahead of itself
    if pod.created is None:
        pod.created = state.clock()  # a pod created now queues behind the pods of its priority
    state.store.resolve_priority(pod, known)   # on the decoded copy; the state's own record is never touched
    verdict = decide(state, Workload.of_pod(pod), OfferedNodes(names) if names is not None else None)
    lq, cq = state.store.queue_of(pod)
    known_status = pod_status(state, known)[0] if known is not None else None
    view = {
        "pod": pod.key, **priority_view(pod), "preemptionPolicy": pod.preemption_policy,
        "requests": requests_view(pod.requests),
        "localQueue": lq.key if lq else (f"{pod.namespace}/{pod.queue_name}" if pod.queue_name else None),
        "clusterQueue": cq.name if cq else None,
        "known": known_status,
        "decision": verdict_view(verdict),
    }
    if verdict.cluster_queue:
        view["pendingAhead"] = pending_ahead(state, pod, verdict.cluster_queue)
    if verdict.admit and verdict.managed:
        flavors = sorted(set(verdict.assignment.flavors.values())) if verdict.assignment else []
        candidates = names if names is not None else sorted(state.nodes)
        passing = [n for n in candidates if all(state.ledger.node_in_flavor(n, f) for f in flavors)]
        view["nodes"] = {"offered": len(candidates), "passing": len(passing), "outsideFlavor": len(candidates) - len(passing),
                         "names": passing[:NODES_SHOWN], "offeredFrom": "NodeNames" if names is not None else "every node"}
        if not passing:
            view["decision"]["note"] = (f"no {'offered ' if names is not None else ''}node is in flavor(s) "
                                        f"{', '.join(flavors)}: filter would answer NoFlavorNodes")
    if known is not None and (known.uid in state.admitted or known.uid in state.reservations):
        view["note"] = (f"pod {pod.key} already holds quota ({known_status}); this decision counts "
                        "that quota as used")
    return view
