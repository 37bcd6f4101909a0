"""One kind's list+watch reflector: watch from the last resourceVersion, resume or relist when the watch ends.

- A watch that ends (timeoutSeconds), times out, or whose connection fails or drops is started again from the
  last resourceVersion seen (an applied event or a BOOKMARK), after a jittered exponential backoff when it failed;
  so is one answered 429 (the server asks for patience). Events are applied in order and the resourceVersion
  advances only past events handled, so a reconnect neither loses nor repeats one.
- Every other error the server reports (410 Gone, a 504 "too large resource version" from an API server restored
  from a backup, any other HTTP error or ERROR event, an undecodable event) relists after the backoff, as
  client-go's reflector does: resuming from a resourceVersion the server rejected would fail for good.
- Before a watch resumes, reads of the canaries (the few newest objects the store holds) tell whether the server
  went back (restored from a backup) without saying so; a watch silent beyond stall_timeout is relisted.
- A kind the API server does not serve (404 of an optional resource) is looked for again every absent_retry
  seconds.

Each kind's bookkeeping (rv, seen, stale, reconnecting, absent, its open watch and its counts) is its
ReflectorState, which the reflector writes and the source's health (sync.health) reads; the store and the
discovery of a server that went back (every kind relists) are the source's (sync.watch.WatchSource).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import orjson

from .apiserver import Absent, Gone, WatchError, get, status_error
from .discovery import rediscovered
from .resources import Resource
from .stall import StallGuard
from .known_objects import key_of, older

log = logging.getLogger("quotient.sync.watch")


# A watch that failed with one of these is resumed from its resourceVersion; every other error
# relists. Timeouts and broken connections say nothing about the resourceVersion; a 429 asks
# for patience.
RESUMABLE = frozenset({"timeout", "watch idle", "connection failed", "connection dropped", "http 429"})


# The cause of a watch answered 504 "Too large resource version": the server is behind what this source saw
# (restored from a backup), so resourceVersions are being reused and the relist trusts none of them.
WENT_BACK = "http 504"
# The read of a watch's canary (went_back_since) failed: whether the server went back is unknown, so the kind is
# relisted instead of resumed, trusting no resourceVersion (a restored server hands its versions out again).
CANARY_UNREAD = "canary unread"
CANARIES = 3        # the newest objects read before a watch resumes (went_back_since)


# A watch that shows neither an event nor a bookmark for this long (seconds) is stale and relisted: kube-apiserver's
# watch cache sends a bookmark about every minute (k8s.io/apiserver cacher, defaultBookmarkFrequency) to a
# watch that asked for them, so two minutes of silence is a watch that stalled, not a quiet resource.
STALL_TIMEOUT = 120.0
STALLED = "stalled"


@dataclass(slots=True, eq=False)
class ReflectorState:
    """One kind's list+watch bookkeeping: written by its reflector and the source's bulk pass, read by health."""
    rv: str = ""                # last resourceVersion handled ("" before the first list, and while absent)
    seen: float | None = None   # monotonic time of its last list, event or bookmark
    stale: str = ""             # why it must be listed again ("" when it need not be)
    # Why its watch broke (a dropped or failed connection, a timeout), until it is answered again: an API server
    # restarting (restored from a backup, say) may take binds before this source hears of it.
    reconnecting: str = ""
    absent: bool = False        # an optional kind the API server does not serve
    stream: aiohttp.ClientResponse | None = None    # its open watch, cut when versions go back
    restarts: int = 0           # watches started again
    relists: int = 0
    relist_reasons: Counter = field(default_factory=Counter)    # reason -> relists
    errors: Counter = field(default_factory=Counter)            # cause -> count
    events: Counter = field(default_factory=Counter)            # event type -> events handled


class Reflector:
    """ListAndWatch for one kind (res) into the source's store, until the source stops."""

    def __init__(self, source, res: Resource):
        self.source = source
        self.res = res
        self.kind_state: ReflectorState = source.kinds[res.kind]

    async def run(self, absent: bool) -> None:
        """Watch, resuming or relisting, until the source stops; absent: the server did not serve res."""
        s, res, k = self.source, self.res, self.kind_state
        attempt = 0
        while not s.stopping:
            try:
                if absent:
                    await asyncio.sleep(s.absent_retry)
                    res = self.res = await rediscovered(s.api, res, s.request_timeout, s.count_error, s.backoff)
                    items, rv = await s.list_kind(res)
                    s.apply_lists([(res, (items, rv))])
                    absent = False
                    log.info("%s now served: %d listed", res.plural, len(items))
                if k.stale:
                    await self.relist()
                    attempt = 0
                progressed = await self.watch_once()
                s.count_restart(res)
                if progressed:
                    attempt = 0
                else:       # ended without a single event or bookmark: do not spin
                    await asyncio.sleep(s.backoff(attempt))
                    attempt += 1
                continue
            except Absent:
                absent = True
                k.reconnecting = k.rv = k.stale = ""
                s.apply_lists([(res, (None, ""))])     # none served: absent, never stale
                continue
            except Gone as e:
                s.health.breaks += 1
                s.count_error(res, "expired", str(e) or "410 Gone")
                k.stale = "expired"
                continue                            # relist at once: nothing to wait for
            except WatchError as e:
                s.health.breaks += 1
                s.count_error(res, e.cause, e.detail)
                if e.cause in RESUMABLE:
                    k.reconnecting = e.cause
                if e.cause == WENT_BACK:
                    s.went_back()
                elif (k.stale or e.cause not in RESUMABLE) and k.stale != WENT_BACK:
                    k.stale = e.cause      # the server said no: resuming would fail again
            except asyncio.CancelledError:
                raise
            except Exception as e:      # a bug must not stop the source
                s.count_error(res, "internal error", f"{type(e).__name__}: {e}")
                log.debug("internal error", exc_info=True)
                k.stale = "internal error"
            s.count_restart(res)
            await asyncio.sleep(s.backoff(attempt))
            attempt += 1

    async def relist(self) -> None:
        """List the kind again and reconcile the state with it; ready again once every stale kind is relisted."""
        s, res, k = self.source, self.res, self.kind_state
        items, rv = await s.list_kind(res)
        s.apply_lists([(res, (items, rv))], went_back=k.stale in (WENT_BACK, CANARY_UNREAD))
        why, k.stale = k.stale, ""
        s.count_relist(res, why)
        if not s.health.stale():
            log.info("relisted %s: ready again", res.plural)

    async def until_stalled(self, step):
        """Await step (the watch's answer; its lines: StallGuard) for as long as the resource may stay silent; a watch
        that shows neither an event nor a bookmark within stall_timeout of the last it showed (an API server or a
        proxy that holds the connection open and sends nothing) raises WatchError("stalled"): it is relisted."""
        limit, seen, now = self.source.health.stall_timeout, self.kind_state.seen, time.monotonic()
        left = limit - (now - (now if seen is None else seen))
        try:
            async with asyncio.timeout(max(0.0, left)) as deadline:
                return await step
        except TimeoutError:
            if not deadline.expired():
                raise               # the request's own timeout (read_timeout): not a stall
        raise self.stall_error()

    def stall_error(self) -> WatchError:
        return WatchError(STALLED, f"neither an event nor a bookmark for {self.source.health.stall_timeout:g}s "
                                   f"(bookmarks are asked for; kube-apiserver sends one about every minute)")

    async def went_back_since(self) -> str:
        """Before a watch resumes (after an interruption, or after the server ended the last one: a restore may
        have come between two watches, cutting none): the key of a canary (Store.canaries, the CANARIES newest
        objects applied) that is older now, or gone, else "". An API server restored from a backup answers a watch
        from a resourceVersion it has not reached with 504, but once writes have carried its versions past that one
        again, the watch resumes without an error and never shows what the restore undid (a Binding gone, a pod
        pending again): reads of those objects tell, unless every one was written again since (one alone was, in
        tests/test_api_truth_faults.py). A read that fails cannot tell: it raises WatchError (CANARY_UNREAD), and the
        kind is relisted rather than resumed blind (a relist is the API's word whatever happened)."""
        s, res = self.source, self.res
        for key, known in s.store.canaries(res.kind, CANARIES):
            try:
                resp = await get(s.api, res.object_path(key), [], s.request_timeout)
            except WatchError as e:
                raise WatchError(CANARY_UNREAD, f"{key}: {e.detail}") from None
            try:
                if resp.status == 404:
                    return key              # held, never seen deleted: the restore undid it
                if resp.status != 200:
                    raise WatchError(CANARY_UNREAD, f"{key}: http {resp.status}")
                now = key_of(orjson.loads(await resp.read()))[2]
            except (aiohttp.ClientError, asyncio.TimeoutError, orjson.JSONDecodeError, AttributeError) as e:
                raise WatchError(CANARY_UNREAD, f"{key}: {type(e).__name__}") from None
            finally:
                resp.release()
            if older(now, known):
                return key
        return ""

    async def watch_once(self) -> bool:
        """One watch request from the last resourceVersion; True if it handled an event or bookmark.
        Returns when the server ends the stream; raises Gone, Absent or WatchError."""
        s, res, k = self.source, self.res, self.kind_state
        rv = k.rv
        if not rv:
            raise Gone("no resourceVersion to watch from")
        went_back = await self.went_back_since()
        if went_back:
            raise WatchError(WENT_BACK, f"{went_back} is older than this source saw it, or gone: the API server went "
                                        "back (restored from a backup)")
        seconds = max(1, int(s.watch_timeout * (1 + s.rng.random()) / 2)) if s.watch_timeout else 0
        query = [("watch", "1"), ("resourceVersion", rv), ("allowWatchBookmarks", "true")]
        if seconds:
            query.append(("timeoutSeconds", str(seconds)))
        timeout = aiohttp.ClientTimeout(total=None, connect=s.request_timeout, sock_connect=s.request_timeout,
                                        sock_read=s.read_timeout)
        resp = await self.until_stalled(get(s.api, res.path, query, timeout))
        progressed = False
        k.stream = resp
        try:
            if resp.status != 200:
                raise await status_error(resp, res)
            k.reconnecting = ""
            content = resp.content
            with StallGuard(s.health.stall_timeout, lambda: k.seen) as guard:
                while True:
                    try:
                        line = await content.readline()
                    except asyncio.CancelledError:
                        if guard.stalled():
                            raise self.stall_error() from None
                        raise
                    except asyncio.TimeoutError:
                        raise WatchError("watch idle", f"nothing for {s.read_timeout:g}s") from None
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
                    self.handle(event)
                    progressed = True
        finally:
            if k.stream is resp:
                k.stream = None
            resp.release()

    def handle(self, event: object) -> None:
        """Apply one watch event; raises Gone on a 410 ERROR, WatchError on anything unusable as an event."""
        s, res, k = self.source, self.res, self.kind_state
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
        k.seen = time.monotonic()
        if etype == "BOOKMARK":
            if not isinstance(rv, str) or not rv:
                raise WatchError("undecodable event", "BOOKMARK without metadata.resourceVersion")
            k.rv = rv
            k.events[etype] += 1
            return
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            raise WatchError("undecodable event", f"unknown event type {etype!r}")
        obj.setdefault("kind", res.kind)
        obj.setdefault("apiVersion", res.api_version)
        key = key_of(obj)[0]
        if etype == "DELETED":
            if key:
                s.store.delete(res, key)
            else:
                s.skip(res, "DELETED object without metadata.name")
        else:
            s.store.upsert(res, obj)
        k.events[etype] += 1
        if isinstance(rv, str) and rv:
            k.rv = rv
