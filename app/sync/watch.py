"""The live source: one list+watch reflector per kind Quotient reads from the API server, feeding ClusterState.

For each resource (Namespaces, Nodes, PriorityClasses, the Kueue kinds with WorkloadPriorityClasses,
PodDisruptionBudgets, PodGroups, Jobs, Pods: sync.resources) a reflector (sync.reflector) lists (paged with
limit/continue: sync.paging) and watches from the list's resourceVersion with bookmarks. Every object goes through
sync.dispatch.apply_object, the same door the snapshot uses, by way of the source's store (sync.known_objects).

- The first lists of all resources are applied in one bulk pass (pods last), so the quota
  tree is built once; `health.ready` turns True only then, and is False again while a resource
  waits for a relist (its state may be wrong: /readyz says so until the new list is in; sync.health).
- A relist reconciles (sync.known_objects): the objects of that kind the new list lacks are deleted through
  apply_object(..., deleted=True), the rest upserted (those whose resourceVersion did not change are left alone,
  unless the versions went back: a 504 "too large resource version" or a list older than the watch, as from an API
  server restored from a backup, where versions are reused). The list is believed whatever its resourceVersions
  say (ClusterState._stale does not judge a bulk pass).
- An object that fails validation (InvalidObject) is skipped through state.skip (logged once
  per reason) and counted; the last good version of it stays.
- The Kueue kinds are read in the version API discovery names (sync.discovery).

Each kind's ReflectorState (`kinds[kind]`, sync.reflector) counts its errors by cause, its watch restarts, its
relists (and by reason), and its events by type; they are fed to the metrics hooks (Metrics.watch_restarted,
.relisted, .watch_error) when `metrics` is given. Each (kind, cause) is logged at warning once, then at
debug. HTTP goes through sync.apiserver (make_api_client).
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict

from ..state.cluster import ClusterState
from ..state.heap import settle_heap
from . import freshness
from .apiserver import Absent, WatchError
from .discovery import in_version, kueue_discovery
from .health import SourceHealth
from .paging import list_all
from .reflector import STALL_TIMEOUT, WENT_BACK, Reflector, ReflectorState
from .resources import RESOURCES, Resource
from .known_objects import Store, older

log = logging.getLogger("quotient.sync.watch")


class WatchSource:
    """Every kind's reflector, the store they apply to, each kind's state, and the health read off them."""

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
        self.rng = rng or random.Random()
        self.store = Store(state, self.resources, self.skip)
        # kind -> its ReflectorState; API discovery (the APIGroup) counts its errors here too.
        self.kinds: defaultdict[str, ReflectorState] = defaultdict(ReflectorState)
        # A resource whose watch shows neither an event nor a bookmark for stall_timeout is stale: relisted, and
        # no admission is decided on it meanwhile (freshness).
        self.health = SourceHealth({r.kind: self.kinds[r.kind] for r in self.resources}, stall_timeout, heartbeat)
        self._logged: set = set()
        self._task: asyncio.Task | None = None
        self.stopping = False
        freshness.register(state, self.health)

    # ---- running --------------------------------------------------------------------
    async def run(self) -> None:
        """Find the Kueue version to read, list everything, apply it in one bulk pass, then watch every resource
        until stop()."""
        self._task = asyncio.current_task()
        self.health.started(self._task)
        beat = asyncio.create_task(self.health.beating())
        try:
            version = await kueue_discovery(self.api, self.request_timeout, self.count_error, self.backoff)
            self.resources = in_version(self.resources, version)
            lists = await asyncio.gather(*(self._first_list(r) for r in self.resources))
            self.apply_lists(list(zip(self.resources, lists)))
            counts = [None if items is None else len(items) for items, _ in lists]
            del lists                 # the raw objects: applied, not to be kept (nor frozen) for the process's life
            settle_heap()
            self.health.beat = time.monotonic()     # one full collection at the start is work, not a stuck loop
            self.health.listed = True
            log.info("initial lists applied: %s", ", ".join(
                f"{'absent' if n is None else n} {r.plural}" for r, n in zip(self.resources, counts)))
            await asyncio.gather(*(Reflector(self, r).run(n is None) for r, n in zip(self.resources, counts)))
        finally:
            beat.cancel()

    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self.run())
        return self._task

    async def stop(self) -> None:
        self.stopping = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    # ---- lists ------------------------------------------------------------------------
    async def list_kind(self, res: Resource) -> tuple[list[dict], str]:
        """Every object of res and the list's resourceVersion (sync.paging)."""
        return await list_all(self.api, res, self.page_size, self.request_timeout, self.count_error)

    async def _first_list(self, res: Resource) -> tuple[list[dict] | None, str]:
        attempt = 0
        while True:
            try:
                items, rv = await self.list_kind(res)
                return items, rv
            except Absent:
                log.warning("%s (%s) is not served by the API server: none assumed; looked for again every %gs",
                            res.plural, res.api_version, self.absent_retry)
                return None, ""
            except WatchError as e:        # list_all turns a 410 into a WatchError after its retries
                self.count_error(res, e.cause, str(e))
            except asyncio.CancelledError:
                raise
            except Exception as e:     # a bug must not stop the source: counted, logged, tried again
                self.count_error(res, "internal error", f"{type(e).__name__}: {e}")
                log.debug("internal error", exc_info=True)
            await asyncio.sleep(self.backoff(attempt))
            attempt += 1

    def apply_lists(self, lists: list[tuple[Resource, tuple[list[dict] | None, str]]],
                    went_back: bool = False) -> None:
        """Reconcile each resource with its list in one bulk pass (no await inside: requests never
        see half of it); went_back: the server's versions are known to have gone back (see Store.reconcile)."""
        self.state.begin_bulk()
        try:
            for res, (items, rv) in lists:
                k = self.kinds[res.kind]
                self.store.reconcile(res, items or [], went_back or older(rv, k.rv))
                k.seen = time.monotonic()
                k.absent = items is None
                if items is not None:
                    k.rv = rv
                    if res.kind == "Job":
                        self.state.jobs_listed = True     # even none: a Job's pod may come before its Job
        finally:
            self.state.end_bulk()

    def went_back(self) -> None:
        """The server is behind a resourceVersion this source saw (restored from a backup; etcd's one revision
        counter is every kind's): every kind is relisted trusting no version, and the watches still open are cut,
        since one that resumed after the restored server's versions climbed past its own would miss what came
        between without an error."""
        for k in self.health.kinds.values():
            if not k.absent:
                k.stale = WENT_BACK
        for resp in [k.stream for k in self.kinds.values() if k.stream is not None]:
            resp.close()

    # ---- counting ---------------------------------------------------------------------
    def skip(self, res: Resource, reason: str) -> None:
        self.state.skip(f"{res.kind}: {reason}")
        self.count_error(res, "invalid object", reason)

    def count_error(self, res: Resource, cause: str, detail: str = "") -> None:
        self.kinds[res.kind].errors[cause] += 1
        if self.metrics is not None and hasattr(self.metrics, "watch_error"):
            self.metrics.watch_error(res.kind, cause)
        first = (res.kind, cause) not in self._logged
        self._logged.add((res.kind, cause))
        log.log(logging.WARNING if first else logging.DEBUG, "%s %s: %s%s", res.plural, cause, detail,
                " (further occurrences logged at debug, counted in quotient_watch_errors_total)" if first else "")

    def count_restart(self, res: Resource) -> None:
        self.kinds[res.kind].restarts += 1
        if self.metrics is not None:
            self.metrics.watch_restarted(res.kind)

    def count_relist(self, res: Resource, reason: str) -> None:
        k = self.kinds[res.kind]
        k.relists += 1
        k.relist_reasons[reason] += 1
        if self.metrics is not None:
            self.metrics.relisted(res.kind, reason)

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: a random delay in [d/2, d], d = base * 2**attempt capped."""
        d = min(self.backoff_max, self.backoff_base * (2 ** min(attempt, 30)))
        return d * (0.5 + 0.5 * self.rng.random())
