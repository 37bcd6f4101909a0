"""A protocol-faithful fake kube-apiserver on 127.0.0.1, in-process (aiohttp), for the sync, writer and leader tests.

Start it from a test (pytest-asyncio, the test's own event loop):

    async with FakeApiServer() as api:              # or the `fake_api` fixture in tests/test_watch.py
        api.url                                     # http://127.0.0.1:<free port>
        path = api.kubeconfig_path(tmp_path)        # kubeconfig: this server, bearer token api.token
        client = await api.api_client()             # a kubernetes_asyncio ApiClient loaded from that file
        api.apply(obj)      # create or replace (emits ADDED / MODIFIED); returns the stored copy
        api.delete("Pod", "team-a", "p1")           # emits DELETED at once; returns the last object (None if absent)
        api.start_pod("team-a", "p1")               # as a kubelet: Running, status.startTime, Ready (MODIFIED)
        api.get("Pod", "team-a", "p1"), api.objects("Pod")
        api.fault("drop", resource="pods", after=2) # the next pods watch drops its connection after 2 events
        api.expire()                                # compaction: every resourceVersion so far is too old (410)
        api.bookmark()                              # a BOOKMARK on every open watch that asked for them

What it serves (the real API's paths and JSON; objects are stored as plain dicts):

- core v1 pods, nodes, namespaces, events; scheduling.k8s.io/v1 priorityclasses; policy/v1
  poddisruptionbudgets; kueue.x-k8s.io resourceflavors, clusterqueues, cohorts, workloadpriorityclasses, topologies
  (cluster-scoped) and localqueues (namespaced) in the versions FakeApiServer(kueue_versions=...) serves
  (default v1beta1 only; the last is preferred, GET /apis/kueue.x-k8s.io says so), each object converted to
  the version asked by Quotient's own conversion webhook code (app/objects/conversion.py), as deploy/crds/crds.yaml
  has the API server do; scheduling.x-k8s.io/v1alpha1 podgroups; batch/v1 jobs; events.k8s.io/v1 events;
  coordination.k8s.io/v1 leases.
  Namespaced kinds answer at both /namespaces/{ns}/{plural} and the all-namespaces collection /{plural}.
- list: {"kind": "<Kind>List", "apiVersion", "metadata": {"resourceVersion"}, "items"}. As the real API,
  items of built-in kinds carry no kind/apiVersion (custom resources' items do). `limit` and `continue`
  page through one snapshot taken at the first page; a continue token whose snapshot is older than the
  compacted history answers 410 Expired, as does resourceVersionMatch=Exact with an expired version.
- watch=1 (or ?watch=true): HTTP 200, chunked, one JSON event per line
  {"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": ...}. From resourceVersion R it replays
  the retained history after R, then live events; R empty or "0" starts with a synthetic ADDED per current
  object. R older than the compacted history: one ERROR event whose object is the Status
  {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: R (C)",
  "reason":"Expired","code":410}, then the stream ends. allowWatchBookmarks=true gets a BOOKMARK
  ({"kind", "apiVersion", "metadata": {"resourceVersion"}}) every `bookmark_interval` seconds and on
  .bookmark(); timeoutSeconds ends the stream cleanly. fieldSelector/labelSelector are not supported.
- HTTPS when started with tls=(certificate, key) PEM files (the kubeconfig then names the certificate as the
  cluster's certificate-authority: make it self-signed for 127.0.0.1), plain HTTP otherwise.
- Times as the real API server writes them, whole seconds from `clock` (FakeApiServer(clock=...), default
  time.time): creationTimestamp is always server-set (apply and POST ignore a given one), PodScheduled on
  binding, startTime by start_pod.
- One global resourceVersion counter (strings on the wire) shared by every kind; a bounded history of
  `history` events; older versions expire (410) as with etcd compaction.
- Writes, all answering the real Status JSON on errors (NotFound 404, AlreadyExists 409, Conflict 409,
  TooManyRequests 429, Invalid 422):
  - POST collection (create; 409 AlreadyExists), GET/PUT/PATCH/DELETE item. PUT with
    metadata.resourceVersion different from the stored one is 409 Conflict ("the object has been
    modified; ..."), so leases (coordination.k8s.io/v1) behave as leader election expects.
    PATCH accepts application/merge-patch+json (lists of conditions merged by `type`, other lists replaced)
    and application/strategic-merge-patch+json: on built-in kinds the lists of MERGE_KEYS merge by their key
    (containers and schedulingGates by name, conditions by type, ...) and an element {"$patch": "delete",
    KEY: X} removes one, as k8s.io/apimachinery's strategicpatch does; on custom resources a merge patch.
    application/json-patch+json is refused (415). A PATCH of a pod that changes nothing is no write: the
    answer is the stored pod, no event, the same resourceVersion (as GuaranteedUpdate skips an unchanged object).
    A PATCH of a pod's metadata.labels (null removes a label, as the leader's quotient.dev/leader label is
    set and removed, app/leader_label.py) is a MODIFIED event on every pods watch.
  - Pods and scheduling gates (pkg/apis/core/validation, k8s.io/apiserver patch.go): spec.schedulingGates are
    kept as created. An update (PUT or PATCH) whose pod has a gate the stored one lacks (added or renamed) is
    422 `Pod "P" is invalid: spec.schedulingGates[i].name: Forbidden: only deletion is allowed, but found new
    scheduling gate 'G'` (validateOnlyDeletedSchedulingGates); removing gates is allowed. A PATCH whose
    metadata.uid is not the stored pod's is 422 `metadata.uid: Invalid value: "U": field is immutable` (a patch
    carries no storage precondition: the uid check is ValidateObjectMetaUpdate's); a PUT naming another uid is
    409 Conflict "Precondition failed: UID in precondition: ...". A create with spec.nodeName and gates is 422
    `spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared`. The ungate write
        PATCH pods/P (strategic) {"metadata": {"uid": U}, "spec": {"schedulingGates": [{"$patch": "delete",
        "name": "kueue.x-k8s.io/admission"}]}}
    is a MODIFIED event with a new resourceVersion (none when the gate was already gone). A pod PATCH naming a
    metadata.resourceVersion other than the stored one is 409 Conflict ("the object has been modified").
  - Mutating admission on pod CREATE (REST POST only: api.apply() is the test's own hand and calls no webhook):
    FakeApiServer(pod_webhooks=[PodWebhook(url, ca_file=None, object_selector_label="kueue.x-k8s.io/queue-name",
    timeout=5.0, failure_policy="Ignore", name="mpod.kb.io")]). Each webhook whose selector label the pod has
    gets an admission.k8s.io/v1 AdmissionReview (request: uid, kind, resource, requestKind, requestResource,
    name, namespace, operation CREATE, userInfo, object, oldObject null, dryRun, options) before the uid and a
    generated name are set; its response's base64 JSONPatch (add, remove, replace, test, move, copy) is applied;
    allowed false refuses the create with the response's status (`admission webhook "NAME" denied the request:
    MESSAGE`, code >= 400); a failed call (unreachable, timeout, not 200, garbage, another uid) with Ignore
    creates the pod as it was, appended to api.webhook_failures as (webhook, why), with Fail answers 500; a
    patch that does not apply is 500 InternalError. api.webhook_calls counts the reviews sent. https urls are
    verified against ca_file.
  - POST pods/{name}/binding: a v1 Binding; sets spec.nodeName and the PodScheduled condition (MODIFIED),
    answers 201 Status Success. 409 Conflict when spec.nodeName is already set — as the real API, also when
    it is the same node (message: `pod NAME is already assigned to node "NODE"`), so a retrying writer must
    read that 409 naming its own node as success. A metadata.uid precondition that does not match is 409, and
    so is a metadata.resourceVersion precondition that is not the stored one ("the object has been modified"),
    checked first, as the real registry checks storage preconditions before its update function. A pod that
    still has schedulingGates is 409 Conflict `Operation cannot be fulfilled on pods/binding "P": pod P has
    non-empty .spec.schedulingGates` (BindingREST, "Reject binding to a scheduling un-ready Pod").
  - POST pods/{name}/eviction: a policy/v1 Eviction (deleteOptions.preconditions.uid checked: 409 for another pod). Every PodDisruptionBudget in the pod's namespace whose
    selector matches the pod's labels is checked (status.disruptionsAllowed when the test set it, else
    computed from minAvailable / maxUnavailable over the matching Running pods); a budget with no
    disruption left answers 429 TooManyRequests with cause DisruptionBudget, as the real API. A pod that is
    not Running is evicted without the check. Otherwise the pod is deleted as by DELETE and 201 Status Success.
  - DELETE pods/{name} (and an eviction) of a bound pod: deletionTimestamp set (MODIFIED), then DELETED after
    `pod_grace` seconds (FakeApiServer(pod_grace=...), default 0: right after the MODIFIED); a pod never
    bound is DELETED at once.
  - PUT/PATCH pods/{name}/status, clusterqueues/{name}/status and localqueues/{name}/status: only .status
    changes (MODIFIED). A Kueue object's status is written in the version of the request (a v1beta1 LocalQueue
    status says flavorUsage, v1beta2 flavorsUsage) and stored converted to the object's own, as the real API server
    converts through the conversion webhook.
  - PATCH/PUT pods/{name}/resize (in-place pod resize, on by default since Kubernetes 1.33): only
    spec.containers[*].resources, spec.initContainers[*].resources and their resizePolicy may change (a
    PATCH merges containers by name, as a strategic merge patch does); anything else is 422 Invalid. The new
    requests are the pod's desired size at once (metadata.generation bumped, MODIFIED), bound or not; the
    QoS-class rule and the node-side checks are not modelled. api.kubelet_resize(ns, name) then plays the
    kubelet: status.containerStatuses[*].allocatedResources and .resources.requests take the spec's requests
    (or, infeasible=True, the PodResizePending=Infeasible condition, the spec not taken).
  - POST events (core v1 and events.k8s.io/v1): stored, 201; read them back with api.objects("Event").
- Every request is recorded in api.requests as (method, path, query dict); api.writes holds
  (method, path, body) of non-GET requests, and api.write_times, index for index, the time.time() at which
  each arrived (before its body was read: a benchmark's "request arrived", its answer time excluded). A bearer token other than api.token is 401.

Fault injection, api.fault(action, resource=None, verb=None, times=1, **params): the next `times` matching
requests (resource plural such as "pods" or None for any; verb "list", "watch", "write" or None) get:
  "drop"     watch: after `after` events (default 0), half an event is sent and the connection cut (no
             terminating chunk), as when an apiserver or a load balancer goes away
  "garbage"  watch: the line `line` (default b"{not json") is sent after `after` events, then it goes on
  "hang"     the request gets no answer (watch: not even headers) until the server stops or api.release()
  "slow"     watch: each event is delayed by `delay` seconds (default 0.2)
  "stall"    watch: the headers, then nothing (no event, no bookmark, no error) with the connection open
             until api.release(), as a stuck watch cache or a proxy that holds the stream
  "error"    answers `code` (default 500) with a Status (reason InternalError for 500); written=True: the
             request is carried out first (a write that lands, whose answer says it failed)
  "gone"     watch: one ERROR 410 Expired event, then the stream ends (as after a compaction)
  "close"    the connection is closed before any answer, as a server shutting down closes it (aiohttp's client
             raises ServerDisconnectedError, which is no OSError)
api.backup() and api.restore(backup) model an API server restored from an etcd backup: a watch from a
resourceVersion newer than the server's answers 504 "Too large resource version". A restore is a restart
(api.restart()): every open connection is cut, and a request read but not yet served never is.
Faults are consumed in the order they were added; api.clear_faults() drops those not yet used. A fault
given agent="..." applies only to requests whose User-Agent contains it: one client partitioned from the
API server while others reach it (set ApiClient.user_agent per client).
"""
from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import ssl
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import orjson
from aiohttp import web

from app.objects.conversion import convert


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str          # "" for core
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def builtin(self) -> bool:
        return not self.group.endswith("x-k8s.io")


KINDS = [
    Kind("Pod", "", "v1", "pods", True),
    Kind("Node", "", "v1", "nodes", False),
    Kind("Namespace", "", "v1", "namespaces", False),
    Kind("Event", "", "v1", "events", True),
    Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
    Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
    Kind("ResourceFlavor", "kueue.x-k8s.io", "v1beta1", "resourceflavors", False),
    Kind("ClusterQueue", "kueue.x-k8s.io", "v1beta1", "clusterqueues", False),
    Kind("Cohort", "kueue.x-k8s.io", "v1beta1", "cohorts", False),
    Kind("LocalQueue", "kueue.x-k8s.io", "v1beta1", "localqueues", True),
    Kind("WorkloadPriorityClass", "kueue.x-k8s.io", "v1beta1", "workloadpriorityclasses", False),
    Kind("Topology", "kueue.x-k8s.io", "v1beta1", "topologies", False),
    Kind("ResourceFlavor", "kueue.x-k8s.io", "v1beta2", "resourceflavors", False),
    Kind("ClusterQueue", "kueue.x-k8s.io", "v1beta2", "clusterqueues", False),
    Kind("Cohort", "kueue.x-k8s.io", "v1beta2", "cohorts", False),
    Kind("LocalQueue", "kueue.x-k8s.io", "v1beta2", "localqueues", True),
    Kind("WorkloadPriorityClass", "kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", False),
    Kind("Topology", "kueue.x-k8s.io", "v1beta2", "topologies", False),
    Kind("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True),
    Kind("Job", "batch", "v1", "jobs", True),
    Kind("Event", "events.k8s.io", "v1", "events", True),
    Kind("Lease", "coordination.k8s.io", "v1", "leases", True),
]
# time.time() when a request arrived, for api.write_times (a typed key where aiohttp has them)
ARRIVED = web.RequestKey("arrived", float) if hasattr(web, "RequestKey") else "arrived"
BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}
BY_KIND = {}
for _k in KINDS:
    BY_KIND.setdefault(_k.kind, _k)     # core v1 Event is "Event"; events.k8s.io's is stored apart (see _store_key)


KUEUE = "kueue.x-k8s.io"


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Success" if code < 300 else "Failure", "message": message, "reason": reason, "code": code}
    if code < 300:
        body.pop("reason")
        body.pop("message")
    if details is not None:
        body["details"] = details
    return body


def _status(code: int, reason: str, message: str, details: dict | None = None) -> web.Response:
    return web.Response(status=code, body=orjson.dumps(status_body(code, reason, message, details)),
                        content_type="application/json")


def _now(epoch: float | None = None) -> str:
    """An API server time: RFC 3339, whole seconds."""
    when = datetime.now(timezone.utc) if epoch is None else datetime.fromtimestamp(epoch, timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _copy(obj):
    return orjson.loads(orjson.dumps(obj))


def _merge(target, patch):
    """RFC 7386 merge patch; lists of dicts with a `type` (conditions) are merged by type (strategic)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif k == "conditions" and isinstance(v, list) and isinstance(out.get(k), list):
            merged = {c.get("type"): c for c in out[k] if isinstance(c, dict)}
            for c in v:
                if isinstance(c, dict):
                    merged[c.get("type")] = {**merged.get(c.get("type"), {}), **c}
            out[k] = list(merged.values())
        else:
            out[k] = _merge(out.get(k), v)
    return out


# Strategic merge patch: the lists of a pod merged by a key (patchMergeKey in k8s.io/api core/v1 types.go);
# other lists are replaced, as for a merge patch. `conditions` keeps the fake's older rule (by type, on any kind).
MERGE_KEYS = {"conditions": "type", "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
              "schedulingGates": "name", "volumes": "name", "env": "name", "ports": "containerPort",
              "volumeMounts": "mountPath", "imagePullSecrets": "name", "readinessGates": "conditionType",
              "hostAliases": "ip", "topologySpreadConstraints": "topologyKey", "resourceClaims": "name",
              "containerStatuses": "name", "initContainerStatuses": "name"}


def _strategic(target, patch):
    """A strategic merge patch (k8s.io/apimachinery strategicpatch) for the keyed lists of MERGE_KEYS: an element
    of the patch list merges into the element with its key, or is appended; {"$patch": "delete", KEY: X} removes
    that element. Keys such as $setElementOrder/... and $retainKeys are accepted and ignored."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            out.pop(k, None)
        elif k in MERGE_KEYS and isinstance(v, list):
            key = MERGE_KEYS[k]
            merged = [e for e in out.get(k) or []] if isinstance(out.get(k), list) else []
            for change in v:
                if not isinstance(change, dict):
                    merged.append(change)
                    continue
                at = next((i for i, e in enumerate(merged) if isinstance(e, dict) and e.get(key) == change.get(key)),
                          None)
                if change.get("$patch") == "delete":
                    if at is not None:
                        merged.pop(at)
                elif at is not None:
                    merged[at] = _strategic(merged[at], change)
                else:
                    merged.append(_strategic({}, change))
            if merged or out.get(k) is not None:
                out[k] = merged
        else:
            out[k] = _strategic(out.get(k), v)
    return out


def _gates(pod: dict) -> list[str]:
    return [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or [] if isinstance(g, dict)]


def validate_pod_create(pod: dict) -> str | None:
    """The create rule of pkg/apis/core/validation for gates: a pod bound at create (spec.nodeName) cannot carry
    schedulingGates. Returns the field error or None."""
    if (pod.get("spec") or {}).get("nodeName") and _gates(pod):
        return "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
    return None


def validate_pod_update(new: dict, old: dict) -> list[str]:
    """ValidatePodUpdate's rules the fake models: metadata.uid is immutable (ValidateObjectMetaUpdate), and
    validateOnlyDeletedSchedulingGates: a gate the old pod lacks is Forbidden at its index in the new list
    (`spec.schedulingGates[i].name`), so gates can only be removed."""
    errors = []
    uid = (new.get("metadata") or {}).get("uid")
    if uid and uid != old["metadata"].get("uid"):
        errors.append(f'metadata.uid: Invalid value: "{uid}": field is immutable')
    before = set(_gates(old))
    for i, name in enumerate(_gates(new)):
        if name not in before:
            errors.append(f"spec.schedulingGates[{i}].name: Forbidden: only deletion is allowed, but found new "
                          f"scheduling gate '{name}'")
    return errors


def invalid(kind: str, name: str, errors: list[str]) -> web.Response:
    """422 Invalid as errors.NewInvalid writes it: one error bare, several in brackets."""
    what = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    causes = [{"reason": "FieldValueForbidden" if "Forbidden" in e else "FieldValueInvalid", "message": e,
               "field": e.split(":", 1)[0]} for e in errors]
    return _status(422, "Invalid", f'{kind} "{name}" is invalid: {what}',
                   {"name": name, "kind": kind, "causes": causes})


def _selector_matches(selector: dict | None, labels: dict) -> bool:
    if not selector:
        return False        # policy/v1: an empty selector matches nothing... (nil); {} matches all below
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class JsonPatchError(ValueError):
    """A JSONPatch (RFC 6902) that cannot be applied: a missing path, a failed test, an unknown op."""


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError(f"bad JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _walk(doc, tokens: list[str], path: str):
    """The node at the end of tokens (a JSON pointer's, or its parent's); JsonPatchError when it does not exist."""
    node = doc
    for t in tokens:
        if isinstance(node, dict) and t in node:
            node = node[t]
        elif isinstance(node, list) and t.isdigit() and int(t) < len(node):
            node = node[int(t)]
        else:
            raise JsonPatchError(f"path {path!r} does not exist")
    return node


def apply_json_patch(doc, ops: list) -> object:
    """Apply a JSONPatch (RFC 6902: add, remove, replace, test; move and copy too) to a copy of doc, as
    evanphx/json-patch does for the API server's mutating webhooks. Raises JsonPatchError."""
    doc = _copy(doc)
    if not isinstance(ops, list):
        raise JsonPatchError("a JSONPatch is a list of operations")
    for op in ops:
        if not isinstance(op, dict) or "path" not in op:
            raise JsonPatchError(f"bad operation {op!r}")
        kind, path = op.get("op"), op["path"]
        if kind in ("move", "copy"):
            value = _get_pointer(doc, op.get("from", ""))
            if kind == "move":
                doc = apply_json_patch(doc, [{"op": "remove", "path": op["from"]}])
            doc = apply_json_patch(doc, [{"op": "add", "path": path, "value": value}])
            continue
        tokens = _pointer(path)
        if kind == "test":
            if _get_pointer(doc, path) != op.get("value"):
                raise JsonPatchError(f"testing value {path} failed")
            continue
        if kind not in ("add", "remove", "replace"):
            raise JsonPatchError(f"unknown op {kind!r}")
        if not tokens:
            if kind == "remove":
                raise JsonPatchError("cannot remove the whole document")
            doc = _copy(op.get("value"))
            continue
        parent, last = _walk(doc, tokens[:-1], path), tokens[-1]
        if isinstance(parent, dict):
            if kind != "add" and last not in parent:
                raise JsonPatchError(f"path {path!r} does not exist")
            if kind == "remove":
                del parent[last]
            else:
                parent[last] = _copy(op.get("value"))
        elif isinstance(parent, list):
            if kind == "add" and last == "-":
                parent.append(_copy(op.get("value")))
                continue
            if not last.isdigit() or int(last) > len(parent) or (kind != "add" and int(last) == len(parent)):
                raise JsonPatchError(f"index {last!r} out of range in {path!r}")
            i = int(last)
            if kind == "add":
                parent.insert(i, _copy(op.get("value")))
            elif kind == "remove":
                parent.pop(i)
            else:
                parent[i] = _copy(op.get("value"))
        else:
            raise JsonPatchError(f"path {path!r} does not exist")
    return doc


def _get_pointer(doc, path: str):
    return _walk(doc, _pointer(path), path)


@dataclass
class PodWebhook:
    """A MutatingWebhookConfiguration's webhook for pods, CREATE only (admissionregistration.k8s.io/v1):
    clientConfig.url, caBundle as a PEM file (https verified against it; http needs none), objectSelector
    {matchExpressions: [{key: object_selector_label, operator: Exists}]} (None: every pod), timeoutSeconds,
    failurePolicy ("Ignore" or "Fail"), sideEffects None, admissionReviewVersions [v1]."""
    url: str
    ca_file: str | None = None
    object_selector_label: str | None = "kueue.x-k8s.io/queue-name"
    timeout: float = 5.0
    failure_policy: str = "Ignore"
    name: str = "mpod.kb.io"            # Kueue's webhook name for pods (config/components/webhook/manifests.yaml)


class _WebhookCallError(Exception):
    """webhookutil.ErrCallingWebhook: the call failed (unreachable, timeout, not 200, not an AdmissionReview,
    another uid); failurePolicy decides."""


@dataclass
class Fault:
    action: str
    resource: str | None
    verb: str | None
    times: int
    params: dict = field(default_factory=dict)


@dataclass
class _Watcher:
    kind: Kind
    namespace: str | None
    queue: asyncio.Queue
    bookmarks: bool


class FakeApiServer:
    def __init__(self, history: int = 1000, bookmark_interval: float = 60.0, token: str = "fake-token",
                 page_snapshots: int = 16, clock=time.time, pod_grace: float = 0.0, tls: tuple[str, str] | None = None,
                 kueue_versions: tuple[str, ...] = ("v1beta1",), pod_webhooks: list[PodWebhook] | tuple = ()):
        self.history_size = history
        self.pod_webhooks = list(pod_webhooks)   # mutating admission on pod CREATE, in order (see PodWebhook)
        self.webhook_calls = 0                    # AdmissionReviews sent
        self.webhook_failures: list[tuple[str, str]] = []   # (webhook, why) of calls failed and ignored
        self._webhook_sessions: dict = {}
        # The versions of kueue.x-k8s.io served, the last preferred (API discovery), each object converted to
        # the version asked, as Kueue's CRDs with its conversion webhook serve them.
        self.kueue_versions = kueue_versions
        self.tls = tls                  # (certificate, key) PEM files: serve HTTPS, as a real API server does
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.rv = 0
        self.compacted = 0            # events with rv <= compacted are gone from the history
        self.store: dict[tuple[str, str], dict[tuple[str, str], dict]] = {}   # (group, plural) -> (ns, name) -> obj
        self.history: deque = deque()   # (rv, Kind, namespace, type, obj)
        self.watchers: list[_Watcher] = []
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, dict]] = []
        self.writes: list[tuple[str, str, object]] = []
        self.write_times: list[float] = []      # time.time() of each write's arrival, index for index with writes
        self._snapshots: dict[str, tuple[int, list[dict]]] = {}
        self._snapshot_limit = page_snapshots
        self._snapshot_ids = itertools.count(1)
        self._release = asyncio.Event()
        self._resume = asyncio.Event()
        self.paused: list[str] = []
        self.hanging = 0                # requests a "hang" fault holds now
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task] = set()
        self.port = 0
        self.clock = clock              # server time: creationTimestamp, condition times, startTime (seconds)
        self.pod_grace = pod_grace      # seconds a deleted or evicted bound pod stays Terminating

    # ---- lifecycle ------------------------------------------------------------------
    async def start(self) -> "FakeApiServer":
        app = web.Application(middlewares=[self._middleware])
        app.router.add_route("*", "/api/{version}/{rest:.*}", self._handle)
        app.router.add_route("*", "/apis/{group}/{version}/{rest:.*}", self._handle)
        app.router.add_route("GET", "/apis/{group}", self._discovery)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        context = None
        if self.tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.tls)
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for session in self._webhook_sessions.values():
            await session.close()
        self._webhook_sessions.clear()
        self._release.set()
        self._resume.set()
        for w in list(self.watchers):
            w.queue.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self):
        return await self.start()

    async def __aexit__(self, *exc):
        await self.stop()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def kubeconfig_path(self, directory) -> str:
        """Write a kubeconfig for this server (bearer token) under `directory`; returns its path."""
        path = Path(directory) / "fake-kubeconfig.yaml"
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster:\n    server: {self.url}\n"
            + (f"    certificate-authority: {self.tls[0]}\n" if self.tls else "") +
            "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
            f"users:\n- name: fake\n  user:\n    token: {self.token}\n", encoding="utf-8")
        return str(path)

    async def api_client(self, directory=None):
        """A kubernetes_asyncio ApiClient configured from this server's kubeconfig (caller closes it)."""
        import tempfile

        from kubernetes_asyncio import client, config

        directory = directory or tempfile.mkdtemp(prefix="fakeapi-")
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig_path(directory), client_configuration=cfg)
        return client.ApiClient(cfg)

    # ---- test-side API ----------------------------------------------------------------
    @staticmethod
    def kind_of(kind: str, api_version: str | None = None) -> Kind:
        if api_version:
            group, _, version = api_version.rpartition("/")
            same_group = [k for k in KINDS if k.kind == kind and k.group == group]
            for k in same_group:
                if k.version == version:
                    return k
            if same_group:
                return same_group[0]
        return BY_KIND[kind]

    def _table(self, k: Kind) -> dict:
        return self.store.setdefault((k.group, k.plural), {})

    def apply(self, obj: dict) -> dict:
        """Create or replace an object as a controller would (no validation: bad objects are the point).
        Sets uid, creationTimestamp and resourceVersion; emits ADDED or MODIFIED. Returns the stored copy."""
        obj = _copy(obj)
        k = self.kind_of(obj["kind"], obj.get("apiVersion"))
        obj.setdefault("apiVersion", k.api_version)
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace") or ("default" if k.namespaced else "")
        if k.namespaced:
            meta["namespace"] = ns
        table = self._table(k)
        old = table.get((ns, meta["name"]))
        if old is not None:
            meta.setdefault("uid", old["metadata"]["uid"])
            meta["creationTimestamp"] = old["metadata"].get("creationTimestamp")     # immutable
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta["creationTimestamp"] = _now(self.clock())     # server-set, as the real API ignores a given one
        return self._put(k, obj, "MODIFIED" if old is not None else "ADDED")

    def delete(self, kind: str, namespace: str | None, name: str, api_version: str | None = None) -> dict | None:
        k = self.kind_of(kind, api_version)
        old = self._table(k).pop(((namespace or "default") if k.namespaced else "", name), None)
        if old is None:
            return None
        old = _copy(old)
        self._emit(k, old, "DELETED")
        return old

    def start_pod(self, namespace: str, name: str, ready: bool = True) -> dict:
        """What the kubelet writes when a bound pod starts: phase Running, status.startTime (now, to the
        second, once) and the Ready condition (MODIFIED). The test harness calls it: there is no kubelet."""
        k = BY_KIND["Pod"]
        new = _copy(self._table(k)[(namespace, name)])
        status = new.setdefault("status", {})
        status["phase"] = "Running"
        status.setdefault("startTime", _now(self.clock()))
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"] + \
            [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": _now(self.clock())}]
        return self._put(k, new, "MODIFIED")

    def _delete_pod(self, key: tuple[str, str]) -> dict | None:
        """A DELETE or an eviction as the real API does it: a bound pod gets deletionTimestamp (MODIFIED) and
        is gone (DELETED) after `pod_grace` seconds (at once with 0), as a kubelet confirms; a pod never bound
        goes at once. Deleting a pod already Terminating changes nothing."""
        k = BY_KIND["Pod"]
        pod = self._table(k).get(key)
        if pod is None or not (pod.get("spec") or {}).get("nodeName"):
            return self.delete("Pod", key[0], key[1])
        if pod["metadata"].get("deletionTimestamp"):
            return _copy(pod)
        new = _copy(pod)
        new["metadata"]["deletionTimestamp"] = _now(self.clock() + self.pod_grace)
        new["metadata"]["deletionGracePeriodSeconds"] = int(self.pod_grace)
        terminating = self._put(k, new, "MODIFIED")
        uid = new["metadata"]["uid"]

        def gone() -> None:
            current = self._table(k).get(key)
            if current is not None and current["metadata"]["uid"] == uid:
                self.delete("Pod", key[0], key[1])
        if self.pod_grace <= 0:
            gone()
        else:
            asyncio.get_running_loop().call_later(self.pod_grace, gone)
        return terminating

    def get(self, kind: str, namespace: str | None, name: str, api_version: str | None = None) -> dict | None:
        k = self.kind_of(kind, api_version)
        obj = self._table(k).get(((namespace or "default") if k.namespaced else "", name))
        return _copy(obj) if obj is not None else None

    def objects(self, kind: str, api_version: str | None = None) -> list[dict]:
        k = self.kind_of(kind, api_version)
        return [_copy(o) for _, o in sorted(self._table(k).items())]

    def fault(self, action: str, resource: str | None = None, verb: str | None = None, times: int = 1,
              **params) -> None:
        assert action in ("drop", "garbage", "hang", "slow", "stall", "error", "gone", "pause", "close"), action
        self.faults.append(Fault(action, resource, verb, times, params))

    def clear_faults(self) -> None:
        self.faults.clear()

    async def paused_request(self, timeout: float = 5.0, caller: asyncio.Task | None = None) -> str:
        """Wait until a request a "pause" fault holds has arrived; returns its path. The request waits
        (before it is served, or with when="after" once served, before its answer) until resume(). caller: the
        task expected to make that request; if it ends first, its answer says why no request came."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.paused:
            if caller is not None and caller.done():
                raise AssertionError(f"no request was paused: the caller ended first with {caller.result()!r}")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("no request was paused")
            await asyncio.sleep(0.005)
        return self.paused[0]

    def resume(self) -> None:
        """Let every paused request go on."""
        self._resume.set()
        self._resume = asyncio.Event()

    async def _pause(self, path: str) -> None:
        self.paused.append(path)
        try:
            await self._resume.wait()
        finally:
            self.paused.remove(path)

    def release(self) -> None:
        """Let every hanging request go (they then answer 503)."""
        self._release.set()
        self._release = asyncio.Event()

    def expire(self) -> None:
        """Compact: every resourceVersion up to now is too old for a watch (410 Expired)."""
        self.compacted = self.rv
        self.history.clear()

    def bookmark(self) -> None:
        for w in self.watchers:
            if w.bookmarks:
                w.queue.put_nowait(("BOOKMARK", self._bookmark_obj(w.kind)))

    def backup(self) -> tuple[int, dict]:
        """What an etcd backup holds now: every object and the resourceVersion (see restore)."""
        return self.rv, copy.deepcopy(self.store)

    def restore(self, backup: tuple[int, dict]) -> None:
        """The API server comes back from a backup: objects and resourceVersion as they were then, no
        history, every watch cut. A watch from a newer resourceVersion (a client that saw what came after
        the backup) is then answered 504 "Too large resource version", as a real API server does."""
        self.rv, store = backup
        self.store = copy.deepcopy(store)
        self.compacted = self.rv
        self.history.clear()
        self.drop_watches()
        self.restart()

    def restart(self) -> None:
        """The API server process restarts: every open connection is cut, and a request it had read but not yet
        served (a Binding sent just before, held by a "pause" fault) is never served: its client sees the
        connection end and must ask the restarted server again."""
        if self._runner is None or self._runner.server is None:
            return
        for connection in self._runner.server.connections:
            if connection.transport is not None:
                connection.transport.abort()

    @staticmethod
    def _cut(request: web.Request) -> bool:
        """The request's connection is gone before it was served: a restart cut it, or its client gave up (a
        paused write whose client timed out is then never served, as if the server dropped it with the client)."""
        return request.transport is None or request.transport.is_closing()

    def drop_watches(self) -> None:
        """Cut every open watch now (as an apiserver restart would)."""
        for w in list(self.watchers):
            w.queue.put_nowait(("DROP", None))

    @property
    def open_watches(self) -> int:
        return len(self.watchers)

    # ---- internals --------------------------------------------------------------------
    def _put(self, k: Kind, obj: dict, etype: str) -> dict:
        self.rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        self._table(k)[(meta.get("namespace", "") if k.namespaced else "", meta["name"])] = obj
        self._record(k, obj, etype)
        return _copy(obj)

    def _emit(self, k: Kind, obj: dict, etype: str) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._record(k, obj, etype)

    def _record(self, k: Kind, obj: dict, etype: str) -> None:
        wire = _copy(obj)
        wire.setdefault("kind", k.kind)
        wire.setdefault("apiVersion", k.api_version)
        ns = obj["metadata"].get("namespace", "")
        self.history.append((self.rv, k, ns, etype, wire))
        while len(self.history) > self.history_size:
            self.compacted = self.history.popleft()[0]
        for w in self.watchers:
            if (w.kind.group, w.kind.plural) == (k.group, k.plural) and (w.namespace is None or w.namespace == ns):
                w.queue.put_nowait((etype, self._served(w.kind, wire)))

    def _bookmark_obj(self, k: Kind) -> dict:
        return {"kind": k.kind, "apiVersion": k.api_version, "metadata": {"resourceVersion": str(self.rv)}}

    def _take_fault(self, plural: str, verb: str, sub: str | None = None, agent: str = "") -> Fault | None:
        for f in self.faults:
            if f.params.get("sub") and f.params["sub"] != sub:
                continue
            if f.params.get("agent") and f.params["agent"] not in agent:
                continue
            if (f.resource is None or f.resource == plural) and (f.verb is None or f.verb == verb):
                if f.action in ("drop", "garbage", "slow", "stall", "gone") and verb != "watch":
                    continue
                f.times -= 1
                if f.times <= 0:
                    self.faults.remove(f)
                return f
        return None

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        request[ARRIVED] = time.time()
        self.requests.append((request.method, request.path, dict(request.query)))
        auth = request.headers.get("Authorization", "")
        if self.token and auth != f"Bearer {self.token}":
            return _status(401, "Unauthorized", "Unauthorized")
        return await handler(request)

    async def _hang(self) -> web.Response:
        self.hanging += 1
        try:
            await self._release.wait()
        finally:
            self.hanging -= 1
        return _status(503, "ServiceUnavailable", "released")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        group = request.match_info.get("group", "")
        version = request.match_info["version"]
        parts = [p for p in request.match_info["rest"].split("/") if p]
        ns = None
        if len(parts) >= 2 and parts[0] == "namespaces" and (len(parts) >= 3 or (group, version, "namespaces") not in BY_PATH):
            ns, parts = parts[1], parts[2:]
        if not parts:
            return _status(404, "NotFound", "the server could not find the requested resource")
        k = BY_PATH.get((group, version, parts[0]))
        if k is None or (group == KUEUE and version not in self.kueue_versions):
            return _status(404, "NotFound", "the server could not find the requested resource")
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        verb = "watch" if request.method == "GET" and name is None and \
            request.query.get("watch") in ("1", "true") else "list" if request.method == "GET" and name is None \
            else "get" if request.method == "GET" else "write"
        agent = request.headers.get("User-Agent", "")
        f = self._take_fault(k.plural, verb, sub, agent)
        if f is not None and f.action == "pause":
            if f.params.get("when") == "after":        # the write lands; its answer waits (and may be lost)
                response = await self._serve(request, k, ns, name, sub, verb, None)
                await self._pause(request.path)
                code = f.params.get("answer")
                return _status(code, "InternalError", f"injected error {code} after the write") if code else response
            await self._pause(request.path)
            if self._cut(request):
                return _status(503, "ServiceUnavailable", "the server restarted")      # read by no one
            f = self._take_fault(k.plural, verb, sub, agent)      # faults added meanwhile apply to this request
        if f is not None:
            if f.action == "hang":
                return await self._hang()
            if f.action == "close":     # the connection ends before any answer, as a server shutting down ends it
                request.transport.close()   # (the client reads the end: aiohttp's ServerDisconnectedError)
                return web.Response(status=503)      # written to no one

            if f.action == "error":
                if f.params.get("written"):          # the write lands, its answer is an error all the same
                    await self._serve(request, k, ns, name, sub, verb, None)
                code = f.params.get("code", 500)
                reason = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests",
                          403: "Forbidden", 404: "NotFound"}.get(code, "InternalError")
                return _status(code, reason, f.params.get("message", f"injected error {code}"))
        return await self._serve(request, k, ns, name, sub, verb, f)

    async def _serve(self, request: web.Request, k: Kind, ns: str | None, name: str | None, sub: str | None,
                     verb: str, f: Fault | None) -> web.StreamResponse:
        body = None
        if request.method in ("POST", "PUT", "PATCH"):
            raw = await request.read()
            if self._cut(request):
                return _status(503, "ServiceUnavailable", "the server restarted")      # read by no one
            try:
                body = orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                return _status(400, "BadRequest", "body is not JSON")
            self.writes.append((request.method, request.path, body))
            self.write_times.append(request[ARRIVED])
        elif request.method == "DELETE":
            self.writes.append((request.method, request.path, None))
            self.write_times.append(request[ARRIVED])
        if name is None:
            if request.method == "GET":
                if verb == "watch":
                    return await self._watch(request, k, ns, f)
                return self._list(request, k, ns)
            if request.method == "POST":
                if k.kind == "Pod" and self.pod_webhooks and isinstance(body, dict) \
                        and isinstance(body.get("metadata"), dict):
                    admitted = await self._admit_pod(body, ns)
                    if isinstance(admitted, web.Response):
                        return admitted
                    body = admitted
                return self._create(k, ns, body)
            return _status(405, "MethodNotAllowed", "method not allowed on a collection")
        key = ((ns or "default") if k.namespaced else "", name)
        if sub == "binding" and k.kind == "Pod" and request.method == "POST":
            return self._bind(k, key, body)
        if sub == "eviction" and k.kind == "Pod" and request.method == "POST":
            return self._evict(k, key, body)
        if sub == "status" and request.method in ("PUT", "PATCH"):
            return self._write_status(request, k, key, body)
        if sub == "resize" and k.kind == "Pod" and request.method in ("PUT", "PATCH"):
            return self._resize(request, k, key, body)
        if sub is not None:
            return _status(404, "NotFound", f"subresource {sub} not served by the fake")
        table = self._table(k)
        obj = table.get(key)
        if request.method == "GET":
            return self._json(self._served(k, obj)) if obj is not None else self._not_found(k, name)
        if request.method == "DELETE":
            if obj is None:
                return self._not_found(k, name)
            if k.kind == "Pod":
                return self._json(self._delete_pod(key))
            return self._json(self.delete(k.kind, key[0], name, k.api_version))
        if request.method == "PUT":
            if obj is None:
                return self._not_found(k, name)
            conflict = self._conflict(k, obj, body)
            if conflict is not None:
                return conflict
            want_uid = ((body or {}).get("metadata") or {}).get("uid")
            if k.kind == "Pod" and want_uid and want_uid != obj["metadata"]["uid"]:
                # an update's object names its uid: a storage precondition (rest.DefaultUpdatedObjectInfo)
                return _status(409, "Conflict", f'Operation cannot be fulfilled on pods "{name}": Precondition '
                               f"failed: UID in precondition: {want_uid}, UID in object meta: {obj['metadata']['uid']}",
                               {"name": name, "kind": "pods"})
            if k.kind == "Pod":
                errors = validate_pod_update(body, obj)
                if errors:
                    return invalid("Pod", name, errors)
            new = _copy(body)
            new["metadata"]["uid"] = obj["metadata"]["uid"]
            new["metadata"]["creationTimestamp"] = obj["metadata"].get("creationTimestamp")
            if k.namespaced:
                new["metadata"]["namespace"] = key[0]
            return self._json(self._put(k, new, "MODIFIED"))
        if request.method == "PATCH":
            if obj is None:
                return self._not_found(k, name)
            if "json-patch" in request.content_type:
                return _status(415, "UnsupportedMediaType", "json-patch is not supported by the fake")
            if not isinstance(body, dict):
                return _status(400, "BadRequest", "the patch is not a JSON object")
            if k.kind == "Pod":       # a metadata.resourceVersion in the patch is an optimistic lock (Store.Update)
                conflict = self._conflict(k, obj, body)
                if conflict is not None:
                    return conflict
            strategic = "strategic-merge-patch" in request.content_type and k.builtin
            new = _strategic(_copy(obj), body) if strategic else _merge(_copy(obj), body)
            new.setdefault("metadata", {})["name"] = name
            if k.kind == "Pod":
                errors = validate_pod_update(new, obj)
                if errors:
                    return invalid("Pod", name, errors)
                new["metadata"]["uid"] = obj["metadata"]["uid"]
                if new == obj:
                    return self._json(_copy(obj))      # nothing changed: no write, no event, the same resourceVersion
            return self._json(self._put(k, new, "MODIFIED"))
        return _status(405, "MethodNotAllowed", "method not allowed")

    @staticmethod
    def _served(k: Kind, obj: dict) -> dict:
        return convert(obj, k.version) if k.group == KUEUE and "apiVersion" in obj else obj

    async def _discovery(self, request: web.Request) -> web.Response:
        """GET /apis/{group}: the APIGroup, for kueue.x-k8s.io its served versions, the last preferred."""
        group = request.match_info["group"]
        versions = self.kueue_versions if group == KUEUE else sorted({k.version for k in KINDS if k.group == group})
        if not versions:
            return _status(404, "NotFound", "the server could not find the requested resource")
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return self._json({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
                           "preferredVersion": entries[-1]})

    def _json(self, obj: dict, status: int = 200) -> web.Response:
        return web.Response(status=status, body=orjson.dumps(obj), content_type="application/json")

    def _not_found(self, k: Kind, name: str) -> web.Response:
        return _status(404, "NotFound", f'{k.plural} "{name}" not found',
                       {"name": name, "group": k.group, "kind": k.plural})

    def _conflict(self, k: Kind, obj: dict, body: dict) -> web.Response | None:
        want = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if want and want != obj["metadata"]["resourceVersion"]:
            name = obj["metadata"]["name"]
            return _status(409, "Conflict", f'Operation cannot be fulfilled on {k.plural}{"." + k.group if k.group else ""} '
                           f'"{name}": the object has been modified; please apply your changes to the latest '
                           "version and try again", {"name": name, "group": k.group, "kind": k.plural})
        return None

    def _create(self, k: Kind, ns: str | None, body) -> web.Response:
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            return _status(422, "Invalid", "object has no metadata")
        meta = body["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            return _status(422, "Invalid", "metadata.name: Required value")
        if k.namespaced:
            meta["namespace"] = ns or meta.get("namespace") or "default"
        key = (meta.get("namespace", "") if k.namespaced else "", meta["name"])
        if key in self._table(k):
            return _status(409, "AlreadyExists", f'{k.plural} "{meta["name"]}" already exists',
                           {"name": meta["name"], "group": k.group, "kind": k.plural})
        if k.kind == "Pod":
            error = validate_pod_create(body)
            if error:
                return invalid("Pod", meta["name"], [error])
        body.setdefault("kind", k.kind)
        body.setdefault("apiVersion", k.api_version)
        meta.pop("resourceVersion", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now(self.clock())
        return self._json(self._put(k, body, "ADDED"), 201)

    def _list(self, request: web.Request, k: Kind, ns: str | None) -> web.Response:
        q = request.query
        token = q.get("continue")
        if token:
            try:
                sid, start = orjson.loads(base64.urlsafe_b64decode(token.encode()))
                rv, items = self._snapshots[sid]
            except Exception:
                return _status(410, "Expired", "The provided continue parameter is too old to display a "
                               "consistent list result. You can start a new list without the continue parameter.")
            if rv < self.compacted:
                self._snapshots.pop(sid, None)
                return _status(410, "Expired", "The provided continue parameter is too old to display a "
                               "consistent list result. You can start a new list without the continue parameter, "
                               "or use the continue token in this response to retrieve the remainder of the "
                               "results. Continuing with the provided token results in an inconsistent list.")
        else:
            want = q.get("resourceVersion")
            if q.get("resourceVersionMatch") == "Exact" and want and want.isdigit() and int(want) < self.compacted:
                return _status(410, "Expired", f"too old resource version: {want} ({self.compacted})")
            items = [self._served(k, _copy(o)) for key, o in sorted(self._table(k).items()) if ns is None or key[0] == ns]
            if k.builtin:
                for o in items:
                    o.pop("kind", None)
                    o.pop("apiVersion", None)
            rv, start, sid = self.rv, 0, None
        limit = int(q.get("limit") or 0)
        meta: dict = {"resourceVersion": str(rv)}
        page = items[start:start + limit] if limit else items[start:]
        if limit and start + limit < len(items):
            if not token:
                sid = str(next(self._snapshot_ids))
                self._snapshots[sid] = (rv, items)
                while len(self._snapshots) > self._snapshot_limit:
                    self._snapshots.pop(next(iter(self._snapshots)))
            meta["continue"] = base64.urlsafe_b64encode(orjson.dumps([sid, start + limit])).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        return self._json({"kind": f"{k.kind}List", "apiVersion": k.api_version, "metadata": meta, "items": page})

    async def _watch(self, request: web.Request, k: Kind, ns: str | None, f: Fault | None) -> web.StreamResponse:
        q = request.query
        since = q.get("resourceVersion") or ""
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        queue: asyncio.Queue = asyncio.Queue()
        if since in ("", "0"):
            for key, o in sorted(self._table(k).items()):
                if ns is None or key[0] == ns:
                    wire = _copy(o)
                    wire.setdefault("kind", k.kind)
                    wire.setdefault("apiVersion", k.api_version)
                    queue.put_nowait(("ADDED", self._served(k, wire)))
        elif since.isdigit() and int(since) > self.rv:
            return _status(504, "Timeout", f"Too large resource version: {since}, current: {self.rv}")
        elif not since.isdigit() or int(since) < self.compacted or (f is not None and f.action == "gone"):
            queue.put_nowait(("ERROR", status_body(410, "Expired",
                                                   f"too old resource version: {since} ({self.compacted})")))
            queue.put_nowait(None)
        else:
            for rv, hk, hns, etype, wire in self.history:
                if rv > int(since) and hk.plural == k.plural and hk.group == k.group and (ns is None or hns == ns):
                    queue.put_nowait((etype, self._served(k, wire)))
        watcher = _Watcher(k, ns, queue, bookmarks)
        self.watchers.append(watcher)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        sent = 0
        after = f.params.get("after", 0) if f is not None else 0
        try:
            if f is not None and f.action == "stall":
                await self._release.wait()
                if request.transport is not None:
                    request.transport.close()
                return resp
            while True:
                if f is not None and f.action == "drop" and sent >= after:
                    await resp.write(b'{"type":"MODIFIED","obj')     # cut in the middle of an event,
                    request.transport.close()                        # with no terminating chunk
                    return resp
                if f is not None and f.action == "garbage" and sent == after:
                    await resp.write(f.params.get("line", b"{not json") + b"\n")
                    sent += 1
                    continue
                wait = self.bookmark_interval if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    wait = min(wait, left) if wait is not None else left
                try:
                    item = await asyncio.wait_for(queue.get(), wait) if wait is not None else await queue.get()
                except asyncio.TimeoutError:
                    if bookmarks and (deadline is None or loop.time() < deadline):
                        item = ("BOOKMARK", self._bookmark_obj(k))
                    else:
                        break
                if item is None:
                    break
                if item[0] == "DROP":
                    await resp.write(b'{"type":"MODIFIED","obj')
                    request.transport.close()
                    return resp
                if f is not None and f.action == "slow":
                    await asyncio.sleep(f.params.get("delay", 0.2))
                await resp.write(orjson.dumps({"type": item[0], "object": item[1]}) + b"\n")
                sent += 1
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError, RuntimeError):
            if request.transport is not None:
                request.transport.close()
        finally:
            if watcher in self.watchers:
                self.watchers.remove(watcher)
        return resp

    # ---- mutating admission -----------------------------------------------------------
    def _webhook_session(self, hook: PodWebhook):
        import aiohttp

        session = self._webhook_sessions.get(hook.ca_file)
        if session is None or session.closed:
            context = ssl.create_default_context(cafile=hook.ca_file) if hook.ca_file else None
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context) if context else None,
                                            trust_env=False)
            self._webhook_sessions[hook.ca_file] = session
        return session

    async def _admit_pod(self, pod: dict, ns: str | None) -> dict | web.Response:
        """The mutating admission of a pod CREATE (k8s.io/apiserver pkg/admission/plugin/webhook/mutating
        dispatcher.go), before the name is generated, the uid set and the object validated: each webhook whose
        objectSelector matches the pod's labels gets an admission.k8s.io/v1 AdmissionReview; its JSONPatch
        applies to the object the next webhook sees. allowed false: the create fails with the response's
        status (webhookerrors.ToStatusErr). A failed call (unreachable, timeout, HTTP error, not an
        AdmissionReview, another uid): with failurePolicy Ignore the pod goes on unmutated by that webhook
        (counted in webhook_failures), with Fail 500 InternalError. A patch that does not apply is a 500
        InternalError whatever the policy, as in callAttrMutatingHook."""
        meta = pod["metadata"]
        namespace = ns or meta.get("namespace") or "default"
        for hook in self.pod_webhooks:
            labels = meta.get("labels") or {}
            if hook.object_selector_label is not None and hook.object_selector_label not in labels:
                continue
            obj = _copy(pod)
            obj.setdefault("kind", "Pod")
            obj.setdefault("apiVersion", "v1")
            obj["metadata"]["namespace"] = namespace
            uid = str(uuid.uuid4())
            gvk, gvr = {"group": "", "version": "v1", "kind": "Pod"}, {"group": "", "version": "v1", "resource": "pods"}
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                "name": meta.get("name", ""), "namespace": namespace, "operation": "CREATE",
                "userInfo": {"username": "fake-token-user", "groups": ["system:authenticated"]},
                "object": obj, "oldObject": None, "dryRun": False,
                "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}
            self.webhook_calls += 1
            try:
                response = await self._call_webhook(hook, review, uid)
            except _WebhookCallError as e:
                if hook.failure_policy == "Ignore":
                    self.webhook_failures.append((hook.name, str(e)))
                    continue
                return _status(500, "InternalError", f'Internal error occurred: failed calling webhook "{hook.name}": {e}')
            if not response.get("allowed"):
                result = dict(response.get("status") or {})
                code = int(result.get("code") or 0)
                denied = f'admission webhook "{hook.name}" denied the request'
                message = f"{denied}: {result['message']}" if result.get("message") else \
                    f"{denied}: {result['reason']}" if result.get("reason") else f"{denied} without explanation"
                body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": message, "code": code if code >= 400 else 400}
                if result.get("reason"):
                    body["reason"] = result["reason"]
                if result.get("details"):
                    body["details"] = result["details"]
                return web.Response(status=body["code"], body=orjson.dumps(body), content_type="application/json")
            if response.get("patch"):
                try:
                    ops = orjson.loads(response["patch"])
                    patched = apply_json_patch(obj, ops)
                    if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                        raise JsonPatchError("the patched object is not a pod")
                except (JsonPatchError, ValueError, orjson.JSONDecodeError) as e:
                    return _status(500, "InternalError", f"Internal error occurred: {e}")
                pod = patched
                meta = pod["metadata"]
        return pod

    async def _call_webhook(self, hook: PodWebhook, review: dict, uid: str) -> dict:
        """POST the review; the AdmissionResponse, or _WebhookCallError (webhookutil.ErrCallingWebhook)."""
        import aiohttp

        try:
            async with self._webhook_session(hook).post(
                    hook.url, data=orjson.dumps(review), headers={"Content-Type": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=hook.timeout)) as r:
                raw = await r.read()
                if r.status != 200:
                    raise _WebhookCallError(f"failed to call webhook: the server responded with the status code "
                                            f"{r.status} but did not return more information")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ssl.SSLError) as e:
            raise _WebhookCallError(f'failed to call webhook: Post "{hook.url}": {type(e).__name__}: {e}') from None
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise _WebhookCallError(f"received invalid webhook response: {e}") from None
        if not isinstance(answer, dict) or answer.get("apiVersion") != "admission.k8s.io/v1" \
                or answer.get("kind") != "AdmissionReview" or not isinstance(answer.get("response"), dict):
            raise _WebhookCallError("received invalid webhook response: expected an admission.k8s.io/v1 "
                                    "AdmissionReview with a response")
        response = answer["response"]
        if response.get("uid") != uid:
            raise _WebhookCallError(f"expected response.uid={uid!r}, got {response.get('uid')!r}")
        if response.get("patch"):
            if response.get("patchType") != "JSONPatch":
                raise _WebhookCallError(f"expected patchType JSONPatch, got {response.get('patchType')!r}")
            try:               # a []byte field: base64 in the JSON, decoded with the response
                response = {**response, "patch": base64.b64decode(response["patch"], validate=True)}
            except (ValueError, TypeError) as e:
                raise _WebhookCallError(f"received invalid webhook response: {e}") from None
        return response

    # ---- subresources -----------------------------------------------------------------
    def _bind(self, k: Kind, key, body) -> web.Response:
        pod = self._table(k).get(key)
        if pod is None:
            return self._not_found(k, key[1])
        target = ((body or {}).get("target") or {}).get("name")
        if not target:
            return _status(422, "Invalid", "Binding.target.name: Required value")
        want_uid = ((body or {}).get("metadata") or {}).get("uid")
        want_rv = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != pod["metadata"]["resourceVersion"]:
            # storage preconditions are checked before the update: a bound pod's own Binding answers this too
            return _status(409, "Conflict", f'Operation cannot be fulfilled on pods "{key[1]}": the object has been '
                           "modified; please apply your changes to the latest version and try again",
                           {"name": key[1], "kind": "pods"})
        if want_uid and want_uid != pod["metadata"]["uid"]:
            return _status(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{key[1]}": '
                           f"Precondition failed: UID in precondition: {want_uid}, "
                           f"UID in object meta: {pod['metadata']['uid']}")
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            return _status(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{key[1]}": '
                           f'pod {key[1]} is already assigned to node "{current}"',
                           {"name": key[1], "kind": "pods/binding"})
        if _gates(pod):
            # BindingREST.setPodNodeAndMetadata: "Reject binding to a scheduling un-ready Pod", as a Conflict
            return _status(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{key[1]}": '
                           f"pod {key[1]} has non-empty .spec.schedulingGates",
                           {"name": key[1], "kind": "pods/binding"})
        new = _copy(pod)
        new.setdefault("spec", {})["nodeName"] = target
        status = new.setdefault("status", {})
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"] + \
            [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _now(self.clock())}]
        self._put(k, new, "MODIFIED")
        return self._json(status_body(201, "", ""), 201)

    def _evict(self, k: Kind, key, body) -> web.Response:
        pod = self._table(k).get(key)
        if pod is None:
            return self._not_found(k, key[1])
        want = (((body or {}).get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if want and want != pod["metadata"].get("uid"):
            return _status(409, "Conflict", f"Precondition failed: UID in precondition: {want}, UID in object "
                           f"meta: {pod['metadata'].get('uid')}")
        if (pod.get("status") or {}).get("phase") == "Running":
            labels = pod["metadata"].get("labels") or {}
            pdbs = self._table(BY_KIND["PodDisruptionBudget"])
            for (pns, pname), pdb in sorted(pdbs.items()):
                selector = (pdb.get("spec") or {}).get("selector")
                if pns != key[0] or selector is None or not (selector == {} or _selector_matches(selector, labels)):
                    continue
                allowed, needs, healthy = self._disruptions_allowed(pdb, key[0])
                if allowed <= 0:
                    return _status(429, "TooManyRequests",
                                   "Cannot evict pod as it would violate the pod's disruption budget.",
                                   {"causes": [{"reason": "DisruptionBudget",
                                                "message": f"The disruption budget {pname} needs {needs} healthy "
                                                           f"pods and has {healthy} currently"}]})
        self._delete_pod(key)
        return self._json(status_body(201, "", ""), 201)

    def _disruptions_allowed(self, pdb: dict, ns: str) -> tuple[int, int, int]:
        spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
        selector = spec.get("selector") or {}
        pods = [p for (pns, _), p in self._table(BY_KIND["Pod"]).items()
                if pns == ns and (selector == {} or _selector_matches(selector, p["metadata"].get("labels") or {}))]
        expected = len(pods)
        healthy = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"
                      and not p["metadata"].get("deletionTimestamp"))

        def count(v):
            if isinstance(v, str) and v.endswith("%"):
                return -(-int(v[:-1]) * expected // 100)
            return int(v)

        if "minAvailable" in spec:
            needs = count(spec["minAvailable"])
        elif "maxUnavailable" in spec:
            needs = expected - count(spec["maxUnavailable"])
        else:
            needs = expected
        if "disruptionsAllowed" in status:
            return int(status["disruptionsAllowed"]), needs, healthy
        return healthy - needs, needs, healthy

    def _resize(self, request: web.Request, k: Kind, key, body) -> web.Response:
        """pods/resize: container resources (and resizePolicy) only; a PATCH merges containers by name."""
        obj = self._table(k).get(key)
        if obj is None:
            return self._not_found(k, key[1])
        if not isinstance(body, dict):
            return _status(400, "BadRequest", "body must be an object")

        def invalid(what: str) -> web.Response:
            return _status(422, "Invalid", f'Pod "{key[1]}" is invalid: {what}: Forbidden: only cpu and memory '
                           "resources and resizePolicy of existing containers are mutable")

        new = _copy(obj)
        if request.method == "PUT":       # a whole pod: nothing but the resizable fields may differ
            conflict = self._conflict(k, obj, body)
            if conflict is not None:
                return conflict
            def fixed(pod: dict) -> dict:
                spec = _copy(pod.get("spec") or {})
                for field in ("containers", "initContainers"):
                    for c in spec.get(field) or []:
                        c.pop("resources", None), c.pop("resizePolicy", None)
                return spec
            if fixed(body) != fixed(obj):
                return invalid("spec")
            new["spec"] = _copy(body["spec"])
        else:
            for field, value in (body.get("spec") or {}).items():
                if field not in ("containers", "initContainers") or not isinstance(value, list):
                    return invalid(f"spec.{field}")
                have = {c.get("name"): c for c in new["spec"].get(field) or []}
                for change in value:
                    name = change.get("name") if isinstance(change, dict) else None
                    if name not in have or set(change) - {"name", "resources", "resizePolicy"}:
                        return invalid(f"spec.{field}[{name}]")
                    if "resources" in change:
                        have[name]["resources"] = _merge(have[name].get("resources") or {}, change["resources"])
                    if "resizePolicy" in change:
                        have[name]["resizePolicy"] = change["resizePolicy"]
        meta = new["metadata"]
        meta["generation"] = int(meta.get("generation") or 1) + 1
        return self._json(self._put(k, new, "MODIFIED"))

    def kubelet_resize(self, namespace: str, name: str, infeasible: bool = False) -> dict:
        """The kubelet's answer to a resize: allocated and actual requests become the spec's (MODIFIED), or the
        resize is marked PodResizePending=Infeasible and the old allocation stays."""
        k = BY_KIND["Pod"]
        new = _copy(self._table(k)[(namespace, name)])
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodResizePending"]
        if infeasible:
            conditions.append({"type": "PodResizePending", "status": "True", "reason": "Infeasible",
                               "lastTransitionTime": _now(self.clock())})
        else:
            statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}
            for c in new["spec"].get("containers") or []:
                requests = dict((c.get("resources") or {}).get("requests") or {})
                cs = statuses.setdefault(c["name"], {"name": c["name"], "ready": True, "restartCount": 0})
                cs["allocatedResources"] = requests
                cs["resources"] = {**(cs.get("resources") or {}), "requests": requests}
            status["containerStatuses"] = list(statuses.values())
        status["conditions"] = conditions
        return self._put(k, new, "MODIFIED")

    def _write_status(self, request: web.Request, k: Kind, key, body) -> web.Response:
        obj = self._table(k).get(key)
        if obj is None:
            return self._not_found(k, key[1])
        if not isinstance(body, dict):
            return _status(400, "BadRequest", "body must be an object")
        kueue = k.group == KUEUE and "apiVersion" in obj
        new = convert(obj, k.version) if kueue else _copy(obj)   # written in the request's version, stored in its own
        if request.method == "PUT":
            conflict = self._conflict(k, obj, body)
            if conflict is not None:
                return conflict
            new["status"] = body.get("status") or {}
        else:
            if "json-patch" in request.content_type:
                return _status(415, "UnsupportedMediaType", "json-patch is not supported by the fake")
            new["status"] = _merge(new.get("status") or {}, body.get("status") or {})
        if kueue:
            new = convert(new, obj["apiVersion"].rpartition("/")[2])
        return self._json(self._served(k, self._put(k, new, "MODIFIED")))
