"""The live source: list, then watch, every kind Quotient reads from the API server, feeding ClusterState.

For each resource (Namespaces, Nodes, PriorityClasses, the Kueue kinds with WorkloadPriorityClasses,
PodDisruptionBudgets, PodGroups, Jobs, Pods) WatchSource lists (paged with limit/continue) and watches from the list's
resourceVersion with bookmarks. Every object goes through sync.dispatch.apply_object, the
same door the snapshot uses.

- The first lists of all resources are applied in one bulk pass (pods last), so the quota
  tree is built once; `ready` turns True only then, and is False again while a resource
  waits for a relist (its state may be wrong: /readyz says so until the new list is in).
- A watch that ends (timeoutSeconds), times out, or whose connection fails or drops is
  started again from the last resourceVersion seen (an applied event or a BOOKMARK), after a
  jittered exponential backoff when it failed; so is one answered 429 (the server asks for
  patience). Events are applied in order and the resourceVersion advances only past events
  handled, so a reconnect neither loses nor repeats one.
- Every other error the server reports (410 Gone, a 504 "too large resource version" from an
  API server restored from a backup, any other HTTP error or ERROR event, an undecodable
  event) relists after the backoff, as client-go's reflector does: resuming from a
  resourceVersion the server rejected would fail for good. A relist reconciles: the objects of
  that kind the new list lacks are deleted through apply_object(..., deleted=True), the rest
  upserted (those whose resourceVersion did not change are left alone, unless the versions went
  back: a 504 "too large resource version" or a list older than the watch, as from an API server
  restored from a backup, where versions are reused). The list is believed whatever its
  resourceVersions say (ClusterState._stale does not judge a bulk pass). The source keeps, per
  resource, key -> (uid, resourceVersion), so a pod recreated under the same name with a new
  uid replaces the old one instead of being counted twice.
- A watch that shows neither an event nor a bookmark for `stall_timeout` (watchStallTimeout, 2 minutes:
  kube-apiserver sends a bookmark about every minute to a watch that asks for them) has stalled: it is
  relisted. While a kind waits for a relist or is silent beyond that limit the source is stale: /readyz
  says so, naming it, and filter and bind refuse to admit a queued pod (sync.freshness, SourceStale).
- An object that fails validation (InvalidObject) is skipped through state.skip (logged once
  per reason) and counted; the last good version of it stays. A DELETED event is applied from
  what the source knows of the key, so even an object whose newest version was invalid is
  removed.
- A Kueue or PodGroup resource the API server does not serve (404: CRD not installed) counts
  as empty for readiness and is looked for again every `absent_retry` seconds.

Errors are counted in `errors[(kind, cause)]`, watch restarts in `restarts[kind]`, relists in
`relists[kind]` (and by reason in `relist_reasons`), and fed to the metrics hooks (Metrics.watch_restarted, .relisted,
.watch_error) when `metrics` is given. Each (kind, cause) is logged at warning once, then at
debug. HTTP goes through a kubernetes_asyncio ApiClient (call_api with the BearerToken auth
setting), so TLS, tokens and kubeconfig handling are kubernetes-asyncio's: see make_api_client.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, replace

import aiohttp
import orjson

from ..objects.errors import InvalidObject
from ..objects.kueue import VERSIONS as KUEUE_VERSIONS
from ..state.cluster import ClusterState
from ..state.heap import settle_heap
from . import freshness
from .dispatch import apply_object, remove_object

log = logging.getLogger("quotient.sync.watch")


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str          # "" for the core API
    version: str
    plural: str
    namespaced: bool
    optional: bool = False      # a CRD that may not be installed: 404 means "none"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The all-namespaces collection."""
        return f"/api/{self.version}/{self.plural}" if not self.group else \
            f"/apis/{self.group}/{self.version}/{self.plural}"

    def object_path(self, key: str) -> str:
        """One object, by its key ("namespace/name" or "name")."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        ns, _, name = key.rpartition("/")
        return f"{base}/namespaces/{ns}/{self.plural}/{name}" if ns else f"{base}/{self.plural}/{name}"


KUEUE = "kueue.x-k8s.io"
# Applied in this order in the bulk pass: what pods refer to comes first.
RESOURCES = (
    Resource("Namespace", "", "v1", "namespaces", False),
    Resource("Node", "", "v1", "nodes", False),
    Resource("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
    Resource("WorkloadPriorityClass", KUEUE, "v1beta1", "workloadpriorityclasses", False, optional=True),
    Resource("ResourceFlavor", KUEUE, "v1beta1", "resourceflavors", False, optional=True),
    Resource("Cohort", KUEUE, "v1beta1", "cohorts", False, optional=True),
    Resource("ClusterQueue", KUEUE, "v1beta1", "clusterqueues", False, optional=True),
    Resource("LocalQueue", KUEUE, "v1beta1", "localqueues", True, optional=True),
    Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
    Resource("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True, optional=True),
    Resource("Job", "batch", "v1", "jobs", True),
    Resource("Pod", "", "v1", "pods", True),
)


# A watch that failed with one of these is resumed from its resourceVersion; every other error
# relists. Timeouts and broken connections say nothing about the resourceVersion; a 429 asks
# for patience.
RESUMABLE = frozenset({"timeout", "watch idle", "connection failed", "connection dropped", "http 429"})


# The cause of a watch answered 504 "Too large resource version": the server is behind what this source saw
# (restored from a backup), so resourceVersions are being reused and the relist trusts none of them.
WENT_BACK = "http 504"
# The read of a watch's canary (_went_back_since) failed: whether the server went back is unknown, so the kind is
# relisted instead of resumed.
CANARY_UNREAD = "canary unread"


# A watch that shows neither an event nor a bookmark for this long (seconds) is stale and relisted: kube-apiserver's
# watch cache sends a bookmark about every minute (k8s.io/apiserver cacher, defaultBookmarkFrequency) to a
# watch that asked for them, so two minutes of silence is a watch that stalled, not a quiet resource.
STALL_TIMEOUT = 120.0
STALLED = "stalled"


class Gone(Exception):
    """The resourceVersion is too old (410): relist."""


DISCOVERY = Resource("APIGroup", KUEUE, "", "kueue.x-k8s.io discovery", False)


DISCOVERY_ATTEMPTS = 3


def kueue_version(group: object) -> str | None:
    """The served version to read: the preferred one (the highest-priority served version of Kueue's CRDs)
    if Quotient reads it, else the newest one it reads; None for an answer of any other shape."""
    if not isinstance(group, dict):
        return None
    versions = group.get("versions")
    served = [v.get("version") for v in versions if isinstance(v, dict)] if isinstance(versions, list) else []
    preferred = group.get("preferredVersion")
    preferred = preferred.get("version") if isinstance(preferred, dict) else None
    if preferred in KUEUE_VERSIONS:
        return preferred
    known = [v for v in KUEUE_VERSIONS if v in served]
    return known[-1] if known else None


class WatchError(Exception):
    """A failed request or stream; `cause` is a short, bounded label."""

    def __init__(self, cause: str, detail: str = ""):
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail


class Absent(Exception):
    """An optional resource the API server does not serve (404)."""


async def make_api_client(kubeconfig: str | None = None, context: str | None = None):
    """An ApiClient from a kubeconfig file, else from the pod's service account (in-cluster)."""
    from kubernetes_asyncio import client, config

    cfg = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    else:
        config.load_incluster_config(client_configuration=cfg)
    api = client.ApiClient(cfg)
    _environment_once(api.rest_client, cfg.host)
    return api


def _environment_once(rest, host: str) -> None:
    """Read the environment's proxy for the API server once, here, rather than on every request.

    kubernetes_asyncio's aiohttp session trusts the environment, so aiohttp looks up HTTPS_PROXY /
    NO_PROXY and ~/.netrc for each request, each time in a worker thread: with 100 evictions at once
    that was 60% of the CPU an eviction costs and most of its latency (issue 21, the preemption
    benchmark). The proxy the environment names for this host (with its credentials) is kept as the
    client's, as a kubeconfig's proxy-url would be; netrc is not read (a kubeconfig carries the
    API server's credentials)."""
    session = rest.pool_manager
    if not getattr(session, "_trust_env", False):
        return
    if not rest.proxy:
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL

        try:
            proxy, auth = get_env_proxy_for_url(URL(host))
        except LookupError:         # no proxy for this host (none set, or NO_PROXY names it)
            proxy, auth = None, None
        if proxy is not None:
            rest.proxy = str(proxy)
            if auth is not None:
                rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
    session._trust_env = False


def _key_of(obj: dict) -> tuple[str, str, str]:
    """(key, uid, resourceVersion) of a decoded JSON object, without trusting its shape."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "", "", ""
    name, ns = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        return "", "", ""
    key = f"{ns}/{name}" if isinstance(ns, str) and ns else name
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    return key, uid if isinstance(uid, str) else "", rv if isinstance(rv, str) else ""


def _older(listed: str, watched: str) -> bool:
    """The list's resourceVersion is older than the one the watch had reached (both numbers, as etcd's are;
    anything else is opaque and compared by nobody)."""
    return listed.isdigit() and watched.isdigit() and int(listed) < int(watched)


class WatchSource:
    def __init__(self, api_client, state: ClusterState, resources=RESOURCES, metrics=None, *,
                 page_size: int = 500, request_timeout: float = 60.0, watch_timeout: int = 300,
                 read_timeout: float | None = None, backoff_base: float = 0.5, backoff_max: float = 30.0,
                 absent_retry: float = 60.0, heartbeat: float = 5.0, rng: random.Random | None = None,
                 stall_timeout: float = STALL_TIMEOUT):
        self.api = api_client
        self.state = state
        self.resources = tuple(resources)
        self.metrics = metrics
        self.page_size = page_size
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout          # asked of the server (timeoutSeconds), jittered
        # A watch that sends nothing (no event, no bookmark) for this long is taken as hung.
        self.read_timeout = read_timeout if read_timeout is not None else watch_timeout + 60.0
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.absent_retry = absent_retry
        self.heartbeat = heartbeat
        # A resource whose watch shows neither an event nor a bookmark for this long is stale: relisted, and
        # no admission is decided on it meanwhile (freshness).
        self.stall_timeout = stall_timeout
        self.seen: dict[str, float] = {}          # kind -> monotonic time of its last list, event or bookmark
        self.absent: set[str] = set()             # optional kinds the API server does not serve
        self._streams: dict[str, aiohttp.ClientResponse] = {}    # kind -> its open watch, cut when versions go back
        # kind -> why its watch broke (a dropped or failed connection, a timeout), until it is answered again:
        # an API server restarting (restored from a backup, say) may take binds before this source hears of it.
        self.reconnecting: dict[str, str] = {}
        self.rng = rng or random.Random()
        self.rv: dict[str, str] = {}                          # kind -> last resourceVersion handled
        self.known: dict[str, dict[str, tuple[str, str]]] = {r.kind: {} for r in self.resources}
        self.restarts: Counter = Counter()
        self.relists: Counter = Counter()
        self.errors: Counter = Counter()                      # (kind, cause) -> count
        self.events: Counter = Counter()                      # (kind, type) -> events handled
        self._logged: set = set()
        self._ready = False
        self.stale: dict[str, str] = {}          # kind -> why it must be listed again
        self.relist_reasons: Counter = Counter()  # (kind, reason)
        self._beat = 0.0
        self._task: asyncio.Task | None = None
        self._stopping = False
        freshness.register(state, self)

    # ---- health ---------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """True once the first list of every resource has been applied, no resource awaits a relist, and none
        has been silent for longer than stall_timeout."""
        return self._ready and not self.stale and not self.silent()

    @property
    def readiness(self) -> str:
        """Why the source is not ready ("" when it is): the initial lists, the kinds a relist waits for, or
        the kinds whose watch has shown nothing for too long."""
        if not self._ready:
            return "initial lists not yet applied"
        why = self.staleness(reconnecting=False)     # a watch reconnecting is not a replica to take out
        return f"stale: {why}" if why else ""

    def silent(self) -> dict[str, float]:
        """kind -> seconds since its watch last showed anything (a list, an event or a bookmark), for the
        kinds silent longer than stall_timeout (a kind the API server does not serve is never silent)."""
        if not self._ready:
            return {}
        now = time.monotonic()
        ages = {r.kind: now - self.seen.get(r.kind, now) for r in self.resources if r.kind not in self.absent}
        return {kind: age for kind, age in ages.items() if age > self.stall_timeout}

    def staleness(self, kind: str | None = None, reconnecting: bool = True) -> str:
        """"" when every source is fresh; else, for each stale kind, why: how long its watch has shown
        nothing, the relist it waits for (the server refused to go on from its resourceVersion, or the
        watch stalled), or (reconnecting) the watch whose connection broke and is not back yet; kind: that
        kind only."""
        silent = self.silent()
        if kind is not None:
            silent = {k: v for k, v in silent.items() if k == kind}
        parts = [f"the {k} watch has shown nothing for {silent[k]:.0f}s (limit {self.stall_timeout:g}s)"
                 for k in sorted(silent)]
        parts += [f"the {k} list is being read again ({why})" for k, why in sorted(self.stale.items())
                  if k not in silent and kind in (None, k)]
        if reconnecting:
            parts += [f"the {k} watch is reconnecting ({why})" for k, why in sorted(self.reconnecting.items())
                      if k not in silent and k not in self.stale and kind in (None, k)]
        return "; ".join(parts) + ("; Quotient relists it" if len(parts) == 1 else "; Quotient relists them") \
            if parts else ""

    @property
    def alive(self) -> bool:
        """The loop is running and its heartbeat is recent (the event loop is not stuck)."""
        task = self._task
        if task is None or task.done():
            return False
        return time.monotonic() - self._beat < 3 * self.heartbeat

    # ---- running --------------------------------------------------------------------
    async def run(self) -> None:
        """Find the Kueue version to read, list everything, apply it in one bulk pass, then watch every resource
        until stop()."""
        self._task = asyncio.current_task()
        self._beat = time.monotonic()
        beat = asyncio.create_task(self._heartbeat())
        try:
            await self._discover_kueue()
            lists = await asyncio.gather(*(self._first_list(r) for r in self.resources))
            self._apply_lists(list(zip(self.resources, lists)))
            counts = [None if items is None else len(items) for items, _ in lists]
            del lists                 # the raw objects: applied, not to be kept (nor frozen) for the process's life
            settle_heap()
            self._beat = time.monotonic()     # one full collection at the start is work, not a stuck loop
            self._ready = True
            log.info("initial lists applied: %s", ", ".join(
                f"{'absent' if n is None else n} {r.plural}" for r, n in zip(self.resources, counts)))
            await asyncio.gather(*(self._watch_forever(r, n is None) for r, n in zip(self.resources, counts)))
        finally:
            beat.cancel()

    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self.run())
        return self._task

    async def stop(self) -> None:
        self._stopping = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    async def _discover_kueue(self) -> None:
        """Read Kueue's objects in the version API discovery names (kueue_version); without an answer, in the
        versions the resources name (v1beta1). An absent Kueue resource asks again (_rediscovered)."""
        version = await self._kueue_discovery()
        if version is not None:
            self.resources = tuple(replace(r, version=version) if r.group == KUEUE else r for r in self.resources)

    async def _kueue_discovery(self) -> str | None:
        """GET /apis/kueue.x-k8s.io: the version to read, or None (Kueue not installed, discovery refused or
        unreadable: logged and counted). A transient failure is tried again a few times, not forever: the
        other resources wait for it."""
        for attempt in range(DISCOVERY_ATTEMPTS):
            try:
                resp = await self._get(f"/apis/{KUEUE}", [], self.request_timeout)
                try:
                    if resp.status == 404:
                        return None
                    body = await resp.read()
                finally:
                    resp.release()
                if resp.status != 200:
                    raise WatchError(f"http {resp.status}", body[:300].decode("utf-8", "replace"))
                version = kueue_version(orjson.loads(body))
                if version is None:
                    self._error(DISCOVERY, "no version Quotient reads", body[:300].decode("utf-8", "replace"))
                else:
                    log.info("reading %s/%s (API discovery)", KUEUE, version)
                return version
            except asyncio.CancelledError:
                raise
            except WatchError as e:
                self._error(DISCOVERY, e.cause, e.detail)
                if e.cause.startswith("http 4") and e.cause != "http 429":      # refused (401, 403, ...): final
                    return None
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
                self._error(DISCOVERY, "bad answer", f"{type(e).__name__}: {e}")
            await asyncio.sleep(self._backoff(attempt))
        return None

    async def _rediscovered(self, res: Resource) -> Resource:
        """An absent Kueue resource: the version discovery names now (Kueue installed or upgraded since)."""
        if res.group != KUEUE:
            return res
        version = await self._kueue_discovery()
        return replace(res, version=version) if version and version != res.version else res

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(self.heartbeat)

    # ---- counting ---------------------------------------------------------------------
    def _error(self, res: Resource, cause: str, detail: str = "") -> None:
        self.errors[(res.kind, cause)] += 1
        if self.metrics is not None and hasattr(self.metrics, "watch_error"):
            self.metrics.watch_error(res.kind, cause)
        first = (res.kind, cause) not in self._logged
        self._logged.add((res.kind, cause))
        log.log(logging.WARNING if first else logging.DEBUG, "%s %s: %s%s", res.plural, cause, detail,
                " (further occurrences logged at debug, counted in quotient_watch_errors_total)" if first else "")

    def _restarted(self, res: Resource) -> None:
        self.restarts[res.kind] += 1
        if self.metrics is not None:
            self.metrics.watch_restarted(res.kind)

    def _relisted(self, res: Resource, reason: str) -> None:
        self.relists[res.kind] += 1
        self.relist_reasons[(res.kind, reason)] += 1
        if self.metrics is not None:
            self.metrics.relisted(res.kind, reason)

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: a random delay in [d/2, d], d = base * 2**attempt capped."""
        d = min(self.backoff_max, self.backoff_base * (2 ** min(attempt, 30)))
        return d * (0.5 + 0.5 * self.rng.random())

    # ---- HTTP -------------------------------------------------------------------------
    async def _get(self, path: str, query: list[tuple[str, str]], timeout) -> aiohttp.ClientResponse:
        try:
            return await self.api.call_api(path, "GET", query_params=query,
                                           header_params={"Accept": "application/json"},
                                           auth_settings=["BearerToken"], _preload_content=False,
                                           _request_timeout=timeout)
        except asyncio.TimeoutError:
            raise WatchError("timeout", f"no answer within the timeout ({path})") from None
        except aiohttp.ClientError as e:
            raise WatchError("connection failed", f"{type(e).__name__}: {e}") from None

    @staticmethod
    async def _status_error(resp: aiohttp.ClientResponse, res: Resource) -> Exception:
        try:
            body = (await resp.read())[:500].decode("utf-8", "replace")
        except Exception:
            body = ""
        finally:
            resp.release()
        if resp.status == 410:
            return Gone(body)
        if resp.status == 404 and res.optional:
            return Absent(body)
        return WatchError(f"http {resp.status}", body)

    async def _list(self, res: Resource) -> tuple[list[dict], str]:
        """Every object of the resource and the list's resourceVersion (paged; a 410 on a page lists again)."""
        for _ in range(3):
            items: list[dict] = []
            cont = ""
            try:
                while True:
                    query = [("limit", str(self.page_size))] if self.page_size else []
                    if cont:
                        query.append(("continue", cont))
                    resp = await self._get(res.path, query, self.request_timeout)
                    if resp.status != 200:
                        raise await self._status_error(resp, res)
                    try:
                        raw = await resp.read()
                    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                        raise WatchError("list interrupted", f"{type(e).__name__}: {e}") from None
                    finally:
                        resp.release()
                    try:
                        body = orjson.loads(raw)
                        page, meta = body["items"], body["metadata"]
                        if not isinstance(page, list) or not isinstance(meta, dict):
                            raise TypeError("items must be a list and metadata an object")
                    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
                        raise WatchError("list undecodable", str(e)) from None
                    items.extend(page or ())
                    cont = meta.get("continue") or ""
                    if not cont:
                        return items, str(meta.get("resourceVersion") or "")
            except Gone:
                self._error(res, "list continue expired")
                continue
        raise WatchError("list continue expired", "three times in a row")

    # ---- lists ------------------------------------------------------------------------
    async def _first_list(self, res: Resource) -> tuple[list[dict] | None, str]:
        attempt = 0
        while True:
            try:
                items, rv = await self._list(res)
                return items, rv
            except Absent:
                log.warning("%s (%s) is not served by the API server: none assumed; looked for again every %gs",
                            res.plural, res.api_version, self.absent_retry)
                return None, ""
            except WatchError as e:        # _list turns a 410 into a WatchError after its retries
                self._error(res, e.cause, str(e))
            except asyncio.CancelledError:
                raise
            except Exception as e:     # a bug must not stop the source: counted, logged, tried again
                self._error(res, "internal error", f"{type(e).__name__}: {e}")
                log.debug("internal error", exc_info=True)
            await asyncio.sleep(self._backoff(attempt))
            attempt += 1

    def _apply_lists(self, lists: list[tuple[Resource, tuple[list[dict] | None, str]]],
                     went_back: bool = False) -> None:
        """Reconcile each resource with its list in one bulk pass (no await inside: requests never
        see half of it); went_back: the server's versions are known to have gone back (see _reconcile)."""
        self.state.begin_bulk()
        try:
            for res, (items, rv) in lists:
                self._reconcile(res, items or [], went_back or _older(rv, self.rv.get(res.kind, "")))
                self.seen[res.kind] = time.monotonic()
                if items is None:
                    self.absent.add(res.kind)
                else:
                    self.absent.discard(res.kind)
                    self.rv[res.kind] = rv
                    if res.kind == "Job":
                        self.state.jobs_listed = True     # even none: a Job's pod may come before its Job
        finally:
            self.state.end_bulk()

    def _reconcile(self, res: Resource, items: list, went_back: bool = False) -> None:
        """The state of res becomes the list. went_back: the list is older (resourceVersion) than what the
        watch showed, as from an API server restored from a backup: versions are reused, so an object
        whose version did not change may have, and every object is applied again."""
        known = self.known[res.kind]
        listed: set[str] = set()
        for obj in items:
            if not isinstance(obj, dict):
                self._skip(res, "list item is not an object")
                continue
            obj.setdefault("kind", res.kind)            # the API leaves them out of list items
            obj.setdefault("apiVersion", res.api_version)
            key, uid, rv = _key_of(obj)
            if key:
                listed.add(key)
                seen = known.get(key)
                if seen is not None and seen == (uid, rv) and rv and not went_back:
                    continue                            # unchanged since we last applied it
            self._upsert(res, obj)
        for key in [k for k in known if k not in listed]:
            self._delete(res, key)

    # ---- applying ---------------------------------------------------------------------
    def _skip(self, res: Resource, reason: str) -> None:
        self.state.skip(f"{res.kind}: {reason}")
        self._error(res, "invalid object", reason)

    def _upsert(self, res: Resource, obj: dict) -> None:
        key, uid, rv = _key_of(obj)
        known = self.known[res.kind]
        old = known.get(key)
        if old is not None and old[0] != uid:
            self._delete(res, key)                      # same name, a new object: the old one is gone
        try:
            if obj.get("kind") != res.kind:
                raise InvalidObject(res.kind, key or "?", f"kind {obj.get('kind')!r} in a {res.plural} watch")
            apply_object(self.state, obj)
        except InvalidObject as e:
            self._skip(res, f"{e.name}: {e.reason}")
            return
        if key:
            known[key] = (uid, rv)

    def _delete(self, res: Resource, key: str) -> None:
        seen = self.known[res.kind].pop(key, None)
        if seen is None:
            return          # never applied (it was invalid all along): nothing to take out
        remove_object(self.state, res.kind, key, seen[0])

    def _handle(self, res: Resource, event: object) -> None:
        """Apply one watch event; raises Gone on a 410 ERROR, WatchError on anything unusable as an event."""
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            raise WatchError("undecodable event", repr(event)[:200])
        etype, obj = event.get("type"), event["object"]
        if etype == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(str(obj.get("message") or ""))
            raise WatchError(f"error event {code}", str(obj.get("message") or ""))
        meta = obj.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        self.seen[res.kind] = time.monotonic()
        if etype == "BOOKMARK":
            if not isinstance(rv, str) or not rv:
                raise WatchError("undecodable event", "BOOKMARK without metadata.resourceVersion")
            self.rv[res.kind] = rv
            self.events[(res.kind, etype)] += 1
            return
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            raise WatchError("undecodable event", f"unknown event type {etype!r}")
        obj.setdefault("kind", res.kind)
        obj.setdefault("apiVersion", res.api_version)
        key = _key_of(obj)[0]
        if etype == "DELETED":
            if key:
                self._delete(res, key)
            else:
                self._skip(res, "DELETED object without metadata.name")
        else:
            self._upsert(res, obj)
        self.events[(res.kind, etype)] += 1
        if isinstance(rv, str) and rv:
            self.rv[res.kind] = rv

    # ---- watching ---------------------------------------------------------------------
    async def _watch_forever(self, res: Resource, absent: bool) -> None:
        attempt = 0
        while not self._stopping:
            try:
                if absent:
                    await asyncio.sleep(self.absent_retry)
                    res = await self._rediscovered(res)
                    items, rv = await self._list(res)
                    self._apply_lists([(res, (items, rv))])
                    absent = False
                    log.info("%s now served: %d listed", res.plural, len(items))
                if res.kind in self.stale:
                    await self._relist(res)
                    attempt = 0
                progressed = await self._watch_once(res)
                self._restarted(res)
                if progressed:
                    attempt = 0
                else:       # ended without a single event or bookmark: do not spin
                    await asyncio.sleep(self._backoff(attempt))
                    attempt += 1
                continue
            except Absent:
                absent = True
                self.reconnecting.pop(res.kind, None)
                self.rv.pop(res.kind, None)
                self.stale.pop(res.kind, None)
                self._apply_lists([(res, (None, ""))])     # none served: absent, never stale
                continue
            except Gone as e:
                self._error(res, "expired", str(e) or "410 Gone")
                self.stale[res.kind] = "expired"
                continue                            # relist at once: nothing to wait for
            except WatchError as e:
                self._error(res, e.cause, e.detail)
                if e.cause in RESUMABLE:
                    self.reconnecting[res.kind] = e.cause
                if e.cause == WENT_BACK:
                    self._went_back()
                elif (res.kind in self.stale or e.cause not in RESUMABLE) and self.stale.get(res.kind) != WENT_BACK:
                    self.stale[res.kind] = e.cause      # the server said no: resuming would fail again
            except asyncio.CancelledError:
                raise
            except Exception as e:      # a bug must not stop the source
                self._error(res, "internal error", f"{type(e).__name__}: {e}")
                log.debug("internal error", exc_info=True)
                self.stale[res.kind] = "internal error"
            self._restarted(res)
            await asyncio.sleep(self._backoff(attempt))
            attempt += 1

    def _went_back(self) -> None:
        """The server is behind a resourceVersion this source saw (restored from a backup; etcd's one revision
        counter is every kind's): every kind is relisted trusting no version, and the watches still open are cut,
        since one that resumed after the restored server's versions climbed past its own would miss what came
        between without an error."""
        for r in self.resources:
            if r.kind not in self.absent:
                self.stale[r.kind] = WENT_BACK
        for resp in list(self._streams.values()):
            resp.close()

    async def _relist(self, res: Resource) -> None:
        """List `res` again and reconcile the state with it; ready again once every stale kind is relisted."""
        items, rv = await self._list(res)
        self._apply_lists([(res, (items, rv))], went_back=self.stale.get(res.kind) == WENT_BACK)
        self._relisted(res, self.stale.pop(res.kind))
        if not self.stale:
            log.info("relisted %s: ready again", res.plural)

    async def _until_stalled(self, res: Resource, step):
        """Await step (the watch's answer, or its next line) for as long as the resource may stay silent; a watch
        that shows neither an event nor a bookmark within stall_timeout of the last it showed (an API server or a
        proxy that holds the connection open and sends nothing) raises WatchError("stalled"): it is relisted."""
        left = self.stall_timeout - (time.monotonic() - self.seen.get(res.kind, time.monotonic()))
        try:
            async with asyncio.timeout(max(0.0, left)) as deadline:
                return await step
        except TimeoutError:
            if not deadline.expired():
                raise               # the request's own timeout (read_timeout): not a stall
        raise WatchError(STALLED, f"neither an event nor a bookmark for {self.stall_timeout:g}s "
                                  f"(bookmarks are asked for; kube-apiserver sends one about every minute)")

    def _canary(self, kind: str) -> tuple[str, str] | None:
        """The newest object this source applied and still holds (known), as (key, resourceVersion): a restore
        undoes every change after its backup, so when one came, this object is older now, or gone."""
        newest, newest_rv = None, -1
        for key, (_, rv) in self.known[kind].items():
            if rv.isdigit() and int(rv) > newest_rv:
                newest, newest_rv = (key, rv), int(rv)
        return newest

    async def _went_back_since(self, res: Resource) -> str:
        """Before a watch resumes (after an interruption, or after the server ended the last one: a restore may
        have come between two watches, cutting none): the key of the canary (_canary) if it is older now, or gone,
        else "". An API server restored from a backup answers a watch from a resourceVersion it has not reached with
        504, but once writes have carried its versions past that one again, the watch resumes without an error and
        never shows what the restore undid (a Binding gone, a pod pending again): one read of that object tells.
        A read that fails cannot tell: it raises WatchError (CANARY_UNREAD), and the kind is relisted rather than
        resumed blind (a relist is the API's word whatever happened)."""
        last = self._canary(res.kind)
        if last is None:
            return ""
        try:
            resp = await self._get(res.object_path(last[0]), [], self.request_timeout)
        except WatchError as e:
            raise WatchError(CANARY_UNREAD, f"{last[0]}: {e.detail}") from None
        try:
            if resp.status == 404:
                return last[0]              # held, never seen deleted: the restore undid it
            if resp.status != 200:
                raise WatchError(CANARY_UNREAD, f"{last[0]}: http {resp.status}")
            now = _key_of(orjson.loads(await resp.read()))[2]
        except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError, AttributeError) as e:
            raise WatchError(CANARY_UNREAD, f"{last[0]}: {type(e).__name__}") from None
        finally:
            resp.release()
        return last[0] if now.isdigit() and int(now) < int(last[1]) else ""

    async def _watch_once(self, res: Resource) -> bool:
        """One watch request from the last resourceVersion; True if it handled an event or bookmark.
        Returns when the server ends the stream; raises Gone, Absent or WatchError."""
        rv = self.rv.get(res.kind) or ""
        if not rv:
            raise Gone("no resourceVersion to watch from")
        went_back = await self._went_back_since(res)
        if went_back:
            raise WatchError(WENT_BACK, f"{went_back} is older than this source saw it, or gone: the API server went "
                                        "back (restored from a backup)")
        seconds = max(1, int(self.watch_timeout * (1 + self.rng.random()) / 2)) if self.watch_timeout else 0
        query = [("watch", "1"), ("resourceVersion", rv), ("allowWatchBookmarks", "true")]
        if seconds:
            query.append(("timeoutSeconds", str(seconds)))
        timeout = aiohttp.ClientTimeout(total=None, connect=self.request_timeout, sock_connect=self.request_timeout,
                                        sock_read=self.read_timeout)
        resp = await self._until_stalled(res, self._get(res.path, query, timeout))
        progressed = False
        self._streams[res.kind] = resp
        try:
            if resp.status != 200:
                raise await self._status_error(resp, res)
            self.reconnecting.pop(res.kind, None)
            content = resp.content
            while True:
                try:
                    line = await self._until_stalled(res, content.readline())
                except asyncio.TimeoutError:
                    raise WatchError("watch idle", f"nothing for {self.read_timeout:g}s") from None
                except (aiohttp.ClientError, ConnectionError) as e:
                    raise WatchError("connection dropped", f"{type(e).__name__}: {e}") from None
                except ValueError as e:         # a line longer than the read buffer
                    raise WatchError("undecodable event", str(e)) from None
                if not line:
                    return progressed           # the server ended the watch (timeoutSeconds)
                if not line.endswith(b"\n"):
                    raise WatchError("connection dropped", "stream ended in the middle of an event")
                if not line.strip():
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    raise WatchError("undecodable event", repr(line[:200])) from None
                self._handle(res, event)
                progressed = True
        finally:
            if self._streams.get(res.kind) is resp:
                del self._streams[res.kind]
            resp.release()
