"""The extender wire format (k8s.io/kube-scheduler/extender/v1), key for key.

kube-scheduler sends Go field names (PascalCase) and reads answers case-
insensitively; Quotient reads PascalCase and answers PascalCase. Unknown keys are
ignored; a body that is not what a verb needs is a WireError (HTTP 400).
"""
from __future__ import annotations

from dataclasses import dataclass

import orjson


# Kubernetes is tested to 5,000 nodes (its documented limit); 15,000 is three times that and what the largest
# managed clusters run with the default scheduler. A longer list is not a cluster, and answering it (a reason per
# unknown node) holds the event loop the other verbs share (100,000 names: close to a second).
MAX_NODES = 15_000
# A node's name is a DNS subdomain (RFC 1123): the API server stores none longer.
MAX_NODE_NAME = 253


class WireError(ValueError):
    """A request body that cannot be used; the message says what is wrong."""


def json_object(raw: bytes) -> dict:
    """A request body's JSON object; WireError when it is not one."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise WireError(f"body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise WireError(f"body must be a JSON object, got {type(body).__name__}")
    return body


def review_request(raw: bytes, review: str, api_version: str, fields: str) -> tuple[dict, dict, str]:
    """A review kube-apiserver sends a webhook (a ConversionReview, an AdmissionReview): the document, its request
    and the request's uid, which the answer must carry; WireError when there is no uid to answer. review names it
    with its article ("a ConversionReview"), fields what its request holds."""
    doc = json_object(raw)
    request = doc.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    if not isinstance(uid, str) or not uid:
        kind = review.split(" ", 1)[1]
        raise WireError(f"not {review}: no request.uid (kube-apiserver sends {api_version} {kind} "
                        f"{{request: {{{fields}}}}})")
    return doc, request, uid


def _pod(body: dict) -> dict:
    pod = body.get("Pod")
    if not isinstance(pod, dict):
        raise WireError('"Pod" must be a Pod object')
    return pod


@dataclass(slots=True)
class ExtenderArgs:
    """filter and prioritize: the pod and either NodeNames (nodeCacheCapable) or Nodes."""
    pod: dict
    node_names: list[str]
    nodes: dict[str, dict] | None   # name -> Node object when nodeCacheCapable is false


def decode_extender_args(raw: bytes) -> ExtenderArgs:
    body = json_object(raw)
    pod = _pod(body)
    names = body.get("NodeNames")
    if names is not None:
        if not isinstance(names, list):
            raise WireError('"NodeNames" must be a list of node names')
        if len(names) > MAX_NODES:
            raise WireError(f'"NodeNames" lists {len(names):,} nodes, more than the {MAX_NODES:,} Quotient accepts')
        try:
            longest = max(map(len, names), default=0)  # runs in C: 5,000 names per request
            "".join(names)   # a type check that runs in C
        except TypeError:
            raise WireError('"NodeNames" must be a list of node names (strings)') from None
        if longest > MAX_NODE_NAME:
            raise WireError(f'"NodeNames" has a name of {longest:,} characters; node names are DNS subdomains '
                            f'of at most {MAX_NODE_NAME}')
        return ExtenderArgs(pod, names, None)
    node_list = body.get("Nodes")
    if node_list is None:
        raise WireError('one of "NodeNames" or "Nodes" is required')
    items = node_list.get("items") if isinstance(node_list, dict) else None
    if not isinstance(items, list):
        raise WireError('"Nodes" must be a NodeList with "items"')
    if len(items) > MAX_NODES:
        raise WireError(f'"Nodes" lists {len(items):,} nodes, more than the {MAX_NODES:,} Quotient accepts')
    nodes: dict[str, dict] = {}
    for item in items:
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str):
            raise WireError('every item of "Nodes" needs metadata.name')
        nodes[name] = item
    return ExtenderArgs(pod, list(nodes), nodes)


def encode_filter(nodes: dict[str, dict] | None, passing: list[str], failed: dict[str, str],
                  unresolvable: dict[str, str], error: str = "") -> bytes:
    """ExtenderFilterResult in the shape of the request: NodeNames, or Nodes when the request sent Node objects."""
    if nodes is None:
        result = {"Nodes": None, "NodeNames": passing}
    else:
        result = {"Nodes": {"metadata": {}, "items": [nodes[n] for n in passing]}, "NodeNames": None}
    result["FailedNodes"] = failed
    result["FailedAndUnresolvableNodes"] = unresolvable
    result["Error"] = error
    return orjson.dumps(result)


@dataclass(slots=True)
class PreemptionArgs:
    """preempt: the preemptor and kube-scheduler's candidate victims per node (UIDs)."""
    pod: dict
    victims: dict[str, list[str]]            # node -> victim pod UIDs
    pdb_violations: dict[str, int]


def decode_preemption_args(raw: bytes) -> PreemptionArgs:
    body = json_object(raw)
    pod = _pod(body)
    meta = body.get("NodeNameToMetaVictims")
    full = body.get("NodeNameToVictims")
    source = meta if meta is not None else full
    if source is None:
        source = {}
    if not isinstance(source, dict):
        raise WireError('"NodeNameToMetaVictims" must map node names to victims')
    if len(source) > MAX_NODES:
        raise WireError(f'victims on {len(source):,} nodes, more than the {MAX_NODES:,} Quotient accepts')
    victims: dict[str, list[str]] = {}
    violations: dict[str, int] = {}
    for node, entry in source.items():
        if not isinstance(entry, dict):
            raise WireError(f'victims of node "{node}" must be an object with "Pods"')
        pods = entry.get("Pods") or []
        if not isinstance(pods, list):
            raise WireError(f'victims of node "{node}": "Pods" must be a list')
        uids = []
        for p in pods:
            if isinstance(p, dict) and "UID" in p:
                uid = p["UID"]
            else:
                meta = p.get("metadata") if isinstance(p, dict) else None
                uid = meta.get("uid") if isinstance(meta, dict) else None
            if not isinstance(uid, str):
                raise WireError(f'a victim on node "{node}" has no UID')
            uids.append(uid)
        victims[node] = uids
        n = entry.get("NumPDBViolations") or 0
        violations[node] = n if isinstance(n, int) else 0
    return PreemptionArgs(pod, victims, violations)


def encode_preemption(victims: dict[str, list[str]], violations: dict[str, int]) -> bytes:
    return orjson.dumps({"NodeNameToMetaVictims": {
        node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": violations.get(node, 0)}
        for node, uids in victims.items() if uids}})


@dataclass(slots=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def decode_binding_args(raw: bytes) -> BindingArgs:
    body = json_object(raw)
    values = []
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        v = body.get(key)
        if not isinstance(v, str) or (not v and key != "PodUID"):
            raise WireError(f'"{key}" must be a non-empty string')
        values.append(v)
    return BindingArgs(*values)


def encode_binding(error: str = "") -> bytes:
    return orjson.dumps({"Error": error})
