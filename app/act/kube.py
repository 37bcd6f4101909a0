"""The live writer: bindings, evictions, pod conditions, Events, ClusterQueue and LocalQueue status, through the API.

Every write is idempotent (a binding already made to the same node, an eviction of a pod
already gone, are successes), retried with a short jittered backoff on errors that may pass
(5xx, 429 other than a PodDisruptionBudget's, timeouts), and counted when it fails for good.
Every call is bounded by API_TIMEOUT: an API server that accepts the connection and never
answers costs one timeout per try, never a reconcile that waits forever.
A PodDisruptionBudget's 429 is not retried here: the eviction is refused, and the preemption
that wanted it tries again at the next reconcile (or another victim set is chosen).
"""
from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from datetime import datetime, timezone
from urllib.parse import quote

import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ..core.rules import PREEMPTION_REASONS
from ..objects.errors import InvalidObject
from ..objects.pod import ADMISSION_GATE, PodInfo, decode_pod
from ..observe.localqueue_status import local_queue_statuses
from ..observe.status import already_written, cluster_queue_statuses
from ..sync import freshness
from ..sync.known_objects import older
from .post import ApiPoster
from .writer import UNREACHABLE, OutcomeUnknown, WriteError

log = logging.getLogger("quotient.act")
KUEUE_GROUP = "kueue.x-k8s.io"     # a ClusterQueue's status is written in the version it was read in
RETRIES = 3
JSON = "application/json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
API_TIMEOUT = 10.0       # seconds for one API call, its answer's body included


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _checked(response):
    """A raw response (_preload_content=False, as the typed clients cannot read a Binding's Status
    answer) is not checked by kubernetes-asyncio: an error status becomes ApiException here."""
    status = getattr(response, "status", 200)
    if hasattr(response, "read"):
        body = await response.read()
        response.release()
        if not 200 <= status < 300:
            error = ApiException(status=status, reason=getattr(response, "reason", ""))
            error.body = body.decode("utf-8", "replace")
            raise error
    return response


def _pod_path(pod: PodInfo) -> str:
    return f"/api/v1/namespaces/{quote(pod.namespace, safe='')}/pods/{quote(pod.name, safe='')}"


def _node_of(pod: PodInfo, current: dict | None) -> str | None:
    """Where a read shows the pod bound ("" pending); None when it is gone or the name is another pod's now."""
    if current is None or current["metadata"].get("uid") != pod.uid:
        return None
    spec = current.get("spec")
    return (spec.get("nodeName") if isinstance(spec, dict) else "") or ""


def _same_for_quota(pod: PodInfo, current: dict | None) -> bool:
    """Nothing a quota decision reads changed between the pod Quotient decided on and the API's version of it:
    labels (queue, pod group, WorkloadPriorityClass), owner and requests."""
    if current is None:
        return False
    try:
        now = decode_pod(current)
    except InvalidObject:
        return False
    return now.labels == pod.labels and now.requests == pod.requests and now.owner == pod.owner


def _went_back(decided: str, now: str) -> str:
    """Why the API's version of a pod shows the server went back: older than the one Quotient decided on."""
    if older(now, decided):
        return f"the API shows an older version of the pod than {decided} (restored from a backup)"
    return ""


def _is_pdb_refusal(e: ApiException) -> bool:
    return e.status == 429 and "disruption" in (e.body or "").lower()


class KubeWriter:
    speaks_for_learned = False   # the API's pods only: one it has not shown is never bound, never evicts (app/scheduler)

    def __init__(self, api: client.ApiClient, state, component: str = "quotient", timeout: float = API_TIMEOUT):
        self.api = api
        self.poster: ApiPoster | None = None     # made at the first write: the proxy is known by then
        self.timeout = timeout
        self.core = client.CoreV1Api(api)
        self.events = client.EventsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.state = state
        self.component = component
        self.failures: Counter = Counter()
        self._announced: set[tuple[str, str]] = set()    # (pod uid, reason): condition and Event written

    async def _retry(self, what: str, call, again=None):
        """call() with retries on what may pass; ApiException for the rest, WriteError after the last try.
        again(): why call() must not be made again ("" when it may), asked before each retry."""
        error = ""
        for attempt in range(RETRIES):
            why = again() if attempt and again is not None else ""
            if why:                     # (counted by the caller, which reads the outcome back)
                raise WriteError(f"{error}; not sent again: {why}")
            try:
                return await self._bounded(call())
            except ApiException as e:
                if e.status and e.status < 500 and e.status != 429 or _is_pdb_refusal(e):
                    raise
                error = f"{what}: HTTP {e.status} {e.reason}"
            except UNREACHABLE as e:
                error = f"{what}: {type(e).__name__} {e}"
            await asyncio.sleep(0.05 * 2 ** attempt * (0.5 + random.random()))
        self.failures[what.split(" ")[0]] += 1
        raise WriteError(error)

    async def bind(self, pod: PodInfo, node: str) -> None:
        """Write the Binding; returns once the API says the pod is bound to node (its answer, or a read after an
        answer that was lost). WriteError when it was not written: a refusal (403, 404, 422, a 409 for another
        node or pod, or for a pod changed since Quotient decided on it) or a read showing the pod unbound,
        elsewhere or gone; OutcomeUnknown when neither an answer nor a read says which (every try answered 5xx
        or timed out, and so did the read).

        The Binding carries the pod's uid and the resourceVersion Quotient decided on, as preconditions the API
        server checks atomically with the write (pods/binding: storage preconditions UID and ResourceVersion):
        a pod whose queue label or requests changed after bind's last look is not bound on a decision made for
        another pod, however late the watch is. A conflict where nothing quota reads changed (kube-scheduler's
        own nominatedNodeName or a status write moved the version) is written once more on the newer version.

        A Binding is sent again (a retry, or on a newer version) only while no watch broke since the decision
        (freshness.changed_since) and the pod's version has not gone back: an API server restarted from a backup
        may show a finished pod running again, and a Binding decided on the state before would pass its own
        preconditions there. kube-scheduler then asks again, and the pod is decided on the restored state. Nor is
        it sent again once its charge no longer fits beside the others (a running pod resized in place since
        the decision took the queue above quota): a retry landing then would add a pod to a queue the API
        already has above quota."""
        path = _pod_path(pod) + "/binding"
        version = pod.resource_version
        taken = freshness.mark(self.state)
        ledger = self.state.ledger if self.state is not None else None

        def again() -> str:
            why = freshness.changed_since(self.state, taken)
            over = ledger.no_room_beside_others(pod.uid) if ledger is not None and not why else ""
            return why or (f"its charge no longer fits beside the pods running now (changed since the decision): {over}"
                          if over else "")
        for attempt in range(2):
            lost, current = await self._write_binding(pod, node, path, version, again)
            if lost is None:
                return
            shown = _node_of(pod, current)
            if shown == node:
                return
            now = (current["metadata"].get("resourceVersion") or "") if shown == "" else ""
            if attempt == 0 and shown == "" and version and now != version and _same_for_quota(pod, current):
                why = again() or _went_back(version, now)
                if not why:
                    version = now
                    continue
                lost += f"; not sent again on its version {now}: {why}"
            break
        self.failures["binding"] += 1
        where = "the API has no such pod" if shown is None else f"the pod is bound to {shown}" if shown else \
            "the pod is not bound" + ("" if _same_for_quota(pod, current) else
                                      ", and its labels, owner or requests changed since Quotient decided on it")
        raise WriteError(f"binding {pod.key} to {node}: {lost}; read back: {where}")

    async def _write_binding(self, pod: PodInfo, node: str, path: str, version: str,
                             again) -> tuple[str | None, dict | None]:
        """One Binding, retried on what may pass while again() says nothing against it: (None, None) when the API
        answered that it is written, else what went wrong and the pod as a read shows it now (None: no such pod).
        WriteError on a definite refusal, OutcomeUnknown when the read fails too."""
        meta = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        if version:
            meta["resourceVersion"] = version
        body = orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                             "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        try:
            await self._retry(f"binding {pod.key}", lambda: self._post(path, body), again)
            return None, None
        except ApiException as e:
            if e.status != 409:
                self.failures["binding"] += 1
                raise WriteError(f"binding {pod.key} to {node}: HTTP {e.status} {e.reason}") from None
            lost = f"HTTP 409 {e.reason}"     # already bound (fine if to this node: a retry of our own write), or changed
        except WriteError as e:               # every try's answer lost: the Binding may have landed
            lost = str(e)
        except Exception as e:                # a client library's error mid-request: the same
            lost = f"{type(e).__name__} {e}"
        try:
            return lost, await self.read_pod(pod)
        except Exception as e:
            raise OutcomeUnknown(f"binding {pod.key} to {node}: its outcome is not known ({lost}; reading the pod "
                                 f"back failed: {type(e).__name__} {getattr(e, 'status', '') or e})") from None

    async def bound_node(self, pod: PodInfo) -> str | None:
        """Where the API shows the pod bound ("" pending), None when it has no such pod (404, or the name is now
        another pod's); raises when the read fails. Settles a Binding whose answer was lost."""
        return _node_of(pod, await self.read_pod(pod))

    async def read_pod(self, pod: PodInfo) -> dict | None:
        """The pod as the API has it now (its JSON), None when it has none of that name; raises when the read fails."""
        async with asyncio.timeout(self.timeout):
            answer = await self.core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False)
            body = await answer.read()
            answer.release()
        if answer.status == 404:
            return None
        if not 200 <= answer.status < 300:
            raise ApiException(status=answer.status, reason=answer.reason)
        current = orjson.loads(body)
        return current if isinstance(current, dict) and isinstance(current.get("metadata"), dict) else None

    async def _post(self, path: str, body: bytes, method: str = "POST", content_type: str = JSON):
        """POST (or method) ready JSON bytes with the ApiClient's credentials (a rotated token included): on
        Quotient's own kept-alive connections (post.py), or through the ApiClient's session when a proxy is set.
        For the Binding and a gate's removal, each written once per scheduled pod: the typed call builds a model
        object, serialises it twice and assembles an aiohttp request, a large share of the bind path's CPU (issue
        19, tests/bench/bench_throughput.py) and of the gate's (issue 32)."""
        api, rest = self.api, self.api.rest_client
        headers = {**api.default_headers, "Content-Type": content_type, "Accept": JSON}
        for auth in (await api.configuration.auth_settings()).values():
            if auth["in"] == "header" and auth["value"]:
                headers[auth["key"]] = auth["value"]
        if rest.proxy:
            return await rest.pool_manager.request(method, api.configuration.host + path, data=body,
                                                   headers=headers, proxy=rest.proxy,
                                                   proxy_headers=rest.proxy_headers,
                                                   server_hostname=rest.server_hostname)
        if self.poster is None:
            self.poster = ApiPoster(api.configuration)
        return await self.poster.post(path, body, headers, method.encode())

    def close(self) -> None:
        """At shutdown: the idle connections of the writes sent as bytes (the Binding, a gate's removal)."""
        if self.poster is not None:
            self.poster.close()

    async def evict(self, pod: PodInfo, reason: str, message: str) -> None:
        """Say why (a DisruptionTarget condition and an Event, best effort, once: an eviction a
        PodDisruptionBudget refuses is tried again every reconcile), then evict through policy/v1.
        The condition goes on the pod before the eviction (a pod deleted at once could not take it);
        the Event, about the pod rather than on it, is written alongside, so the eviction waits for
        one round trip, not two (issue 21: time from the decision to the eviction request)."""
        event = None
        if (pod.uid, reason) not in self._announced:
            if len(self._announced) > 10_000:     # victims deleted by others: at worst said again
                self._announced.clear()
            self._announced.add((pod.uid, reason))
            event = asyncio.ensure_future(self._best_effort(self._event(pod, reason, message)))
            await self._best_effort(self._condition(pod, reason, message))
        try:
            await self._evict(pod, reason)
        finally:
            if event is not None:
                await event

    async def ungate(self, pod: PodInfo) -> None:
        """Remove Kueue's admission gate (scheduler.ungate): kube-scheduler then queues the pod. A strategic merge
        patch deletes the gate by its merge key, whatever other gates the pod has; the uid in the patch is a
        precondition, so a pod recreated under the same name is not ungated on a decision made for another.
        WriteError when the API refused it (gone, changed) or every try failed."""
        patch = orjson.dumps({"metadata": {"uid": pod.uid},
                              "spec": {"schedulingGates": [{"$patch": "delete", "name": ADMISSION_GATE}]}})
        try:
            await self._retry(f"ungate {pod.key}", lambda: self._post(_pod_path(pod), patch, "PATCH",
                                                                         STRATEGIC_MERGE))
        except ApiException as e:
            self.failures["ungate"] += 1
            raise WriteError(f"removing the admission gate of {pod.key}: HTTP {e.status} {e.reason}") from None

    async def _evict(self, pod: PodInfo, reason: str) -> None:
        # The UID as a precondition: a pod recreated under the same name (a StatefulSet's) is not the victim.
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.name, namespace=pod.namespace),
                                 delete_options=client.V1DeleteOptions(
                                     preconditions=client.V1Preconditions(uid=pod.uid)))
        try:
            await self._retry(f"eviction {pod.key}", lambda: self.core.create_namespaced_pod_eviction(
                pod.name, pod.namespace, body, _preload_content=False))
            self._announced.discard((pod.uid, reason))
        except ApiException as e:
            if e.status == 404 or e.status == 409 and "precondition" in (e.body or "").lower():
                # already gone (the eviction happened), or the name now belongs to another pod
                self._announced.discard((pod.uid, reason))
                return
            self.failures["eviction"] += 1
            why = "a PodDisruptionBudget allows no disruption now" if _is_pdb_refusal(e) else f"HTTP {e.status}"
            raise WriteError(f"evicting {pod.key}: {why}") from None

    async def _bounded(self, write):
        """One API call and the reading of its answer, within self.timeout (asyncio.TimeoutError after), in
        the caller's task (wait_for would start one more per write)."""
        async with asyncio.timeout(self.timeout):
            return await _checked(await write)

    async def _best_effort(self, write) -> None:
        try:
            await self._bounded(write)
        except (ApiException, *UNREACHABLE) as e:
            self.failures["annotation"] += 1
            log.debug("best-effort write failed: %s", e)

    async def _condition(self, pod: PodInfo, reason: str, message: str):
        patch = {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": reason,
                                            "message": message, "lastTransitionTime": _now()[:19] + "Z"}]}}
        return await self.core.patch_namespaced_pod_status(pod.name, pod.namespace, patch, _preload_content=False,
                                                           _content_type="application/strategic-merge-patch+json")

    async def _event(self, pod: PodInfo, reason: str, message: str):
        event = client.EventsV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{pod.name}.", namespace=pod.namespace),
            event_time=_now(), reporting_controller=f"{self.component}.dev/extender",
            reporting_instance=self.component, action="Preempt" if reason in PREEMPTION_REASONS else "Evict",
            reason=reason, note=message[:1024], type="Normal",
            regarding=client.V1ObjectReference(api_version="v1", kind="Pod", name=pod.name,
                                               namespace=pod.namespace, uid=pod.uid))
        return await self.events.create_namespaced_event(pod.namespace, event, _preload_content=False)

    async def publish_status(self) -> int:
        """Write each ClusterQueue's status (observe.status computes it) that differs from the one the API holds;
        returns how many were written."""
        written = 0
        for name, status in cluster_queue_statuses(self.state).items():
            cq = self.state.cluster_queues.get(name)
            if cq is None:
                continue                # deleted meanwhile: nothing to write to
            if already_written(cq.status, status):
                continue                # the API holds it: a write would be an event for nothing
            written += await self._patch_status(
                f"ClusterQueue {name}", lambda: self.custom.patch_cluster_custom_object_status(
                    KUEUE_GROUP, cq.api_version, "clusterqueues", name, status, _preload_content=False,
                    _content_type="application/merge-patch+json"))
        return written

    async def publish_local_queue_status(self) -> int:
        """Write each LocalQueue's status (observe.localqueue_status, as Kueue's LocalQueue controller writes it)
        that differs from the one the API holds, in the version it was read in; returns how many were written."""
        written = 0
        for key, status in local_queue_statuses(self.state).items():
            lq = self.state.local_queues.get(key)
            if lq is None or already_written(lq.status, status):
                continue                # deleted meanwhile, or the API holds it: a write would be an event for nothing
            written += await self._patch_status(
                f"LocalQueue {key}", lambda: self.custom.patch_namespaced_custom_object_status(
                    KUEUE_GROUP, lq.api_version, lq.namespace, "localqueues", lq.name, status,
                    _preload_content=False, _content_type="application/merge-patch+json"))
        return written

    async def _patch_status(self, what: str, call) -> int:
        """One status merge patch (a ClusterQueue's or a LocalQueue's): 1 if written; a failure is counted and
        logged, and the next round writes it again."""
        try:
            await self._retry(f"status {what}", call)
            return 1
        except ApiException as e:
            self.failures["status"] += 1          # _retry counted its own give-up (WriteError) already
            log.debug("%s status not written: %s", what, e)
        except WriteError as e:
            log.debug("%s status not written: %s", what, e)
        return 0
