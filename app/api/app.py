"""The HTTP application: FastAPI for health, /debug and /metrics, and a lean ASGI path for the four verbs.

kube-scheduler calls filter for every pod with up to thousands of node names, so
the verbs skip FastAPI's and Starlette's per-request machinery (middleware, Request,
routing, Response objects): QuotientApp hands them to VerbApp, which reads the raw
body, hands it to Verbs (decode, the Scheduler, encode), and answers its bytes; all it adds for metrics is one
histogram observation per request. POST /convert, the CRD conversion webhook, and POST /mutate-pods, the pod
gate's admission webhook, take the same lean path (app/api/convert.py; `quotient serve --conversion-port` also
serves them alone on a port of their own).
Everything else is an ordinary FastAPI route. The scheduler's background loops (app/scheduler/loops.py) run
for the application's lifetime.
"""
from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from time import perf_counter

import orjson
from fastapi import FastAPI
from fastapi.responses import RedirectResponse, Response
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from ..config import DEFAULT_CLIENT_IDENTITIES
from ..observe import attach
from ..observe.metrics import CONTENT_TYPE, Metrics
from ..scheduler import loops as background
from ..scheduler.request import InvalidRequest
from ..scheduler.scheduler import Scheduler
from ..ui.pages import ui_router
from ..version import build_info
from .debug import debug_router
from .exposure import LoopbackHostOnly, foreign_host, refuse_host
from .identity import Authorizer
from .convert import PATHS as WEBHOOK_PATHS
from .convert import ConvertApp
from .limits import (LARGE_BODY, BodyLimit, BodyTooLarge, ClientGone, LargeBodies, answer, read_body, refuse,
                     too_many_items)
from .verbs import Verbs
from .wire import WireError

log = logging.getLogger("quotient.api")
JSON = "application/json"


VERBS = ("filter", "prioritize", "preempt", "bind")


class QuotientApp(FastAPI):
    """FastAPI, except that the verbs go straight to their handler (`verbs`, set by create_app): kube-scheduler
    waits for each answer inside its scheduling loop, and the middleware stack FastAPI and Starlette put
    around every route (exception telemetry, body limit, server errors, routing) was a sixth of a filter's
    CPU in-process (issue 19, README "Performance")."""

    verbs = None          # ASGI app answering the verb paths
    verb_paths: frozenset[str] = frozenset()
    convert = ConvertApp()  # the webhooks (/convert, /mutate-pods), for callers this port admits (no state changed)
    loopback_only = False   # on a loopback address: only requests addressed to a loopback name (LoopbackHostOnly)
    authorize = None        # with client certificates: each caller's role against the route (app/api/identity.py)

    async def __call__(self, scope, receive, send) -> None:
        if self.loopback_only:
            host = foreign_host(scope)
            if host is not None:
                return await refuse_host(send, host)
        if scope["type"] == "http":
            if self.authorize is not None:
                forbidden = self.authorize(scope)
                if forbidden is not None:
                    return await answer(send, 403, forbidden)
            if scope["path"] in self.verb_paths:
                return await self.verbs(scope, receive, send)
            if scope["path"] in WEBHOOK_PATHS:
                return await self.convert(scope, receive, send)
        return await super().__call__(scope, receive, send)


class VerbApp:
    """POST {prefix}/filter|prioritize|preempt|bind: the raw body to Verbs, its bytes back."""

    def __init__(self, verbs: Verbs, prefix: str = "", metrics: Metrics | None = None, leading=None):
        self.leading = leading
        self.verbs = verbs
        self.sync_verbs = {f"{prefix}/filter": verbs.filter, f"{prefix}/prioritize": verbs.prioritize,
                           f"{prefix}/preempt": verbs.preempt}
        self.timers = {verb: metrics.timer(verb) for verb in VERBS} \
            if metrics is not None else {}
        self.large = LargeBodies(LARGE_BODY)

    async def __call__(self, scope, receive, send) -> None:
        path = scope["path"]
        handler = self.sync_verbs.get(path)       # None: bind, the one verb that awaits (its API write)
        verb = path.rsplit("/", 1)[-1]
        if self.leading is not None and not self.leading():
            # A standby (or a leader whose lease lapsed) must not answer: its decisions could collide. The
            # connection is closed: the caller's next one goes through the Service to the labelled leader.
            return await answer(send, 503, orjson.dumps({"error": f"{verb}: this replica is not the leader"}),
                                close=True)
        started = perf_counter()
        try:
            if scope["method"] != "POST":
                return await answer(send, 405, orjson.dumps({"error": f"{verb}: use POST"}))
            try:
                async with self.large.admit(scope):     # one large body in memory at a time
                    body = await read_body(scope, receive)
                    crowded = too_many_items(body)
                    if crowded:
                        return await answer(send, 413, orjson.dumps({"error": f"{verb}: {crowded}"}))
                    out = await self.verbs.bind(body) if handler is None else handler(body)
            except BodyTooLarge as e:
                return await refuse(send, verb, e.limit)
            except ClientGone:
                return None
            except (WireError, InvalidRequest) as e:
                return await answer(send, 400, orjson.dumps({"error": f"{verb}: {e}"}))
            except Exception as e:  # never crash on a bug: kube-scheduler sees a 500 and retries the pod
                log.exception("internal error on %s", path)
                return await answer(send, 500, orjson.dumps({"error": f"{verb}: internal error: "
                                                                       f"{type(e).__name__}: {e}"}))
            await answer(send, 200, out)
        finally:
            timer = self.timers.get(verb)
            if timer is not None:
                timer.observe(perf_counter() - started)


def create_app(scheduler: Scheduler, path_prefix: str = "", ready=lambda: True,
               reconcile_interval: float | None = None, leading=None, alive=lambda: True,
               clients_verified: bool = False, loopback_only: bool = False, readiness=lambda: "",
               identities=None, gate_pods: bool = False) -> FastAPI:
    """The application; with reconcile_interval, Scheduler.reconcile runs that often in the background;
    with leading (leader election), only the leader answers the verbs (every synced replica is ready); alive says
    whether the state's source still runs (the live watch loop), for /livez; clients_verified: the
    server verifies client certificates, so each caller is held to its role (identities: the Configuration's
    clientIdentities, app/api/identity.py) and the routes that change state need admin; loopback_only:
    the server listens on a loopback address, so only requests addressed to a loopback name are answered
    (app.api.exposure.LoopbackHostOnly); readiness: why the state's source is not ready, for /readyz ("stale: ...");
    gate_pods: POST /mutate-pods gates plain pods (the Configuration's gate_pods, app/api/pod_gate.py)."""

    loops = background.Loops()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        tasks = background.start(scheduler, reconcile_interval, loops, leading) if reconcile_interval else []
        yield
        for task in tasks:
            task.cancel()

    app = QuotientApp(title="Quotient", docs_url=None, redoc_url=None, lifespan=lifespan)
    observers = attach(scheduler)
    app.state.scheduler = scheduler
    app.state.metrics = observers.metrics
    app.state.loops = loops
    observers.metrics.watch_loops(loops)
    prefix = path_prefix.rstrip("/")
    app.verb_paths = frozenset(f"{prefix}/{verb}" for verb in VERBS)
    app.verbs = VerbApp(Verbs(scheduler), prefix, observers.metrics, leading)
    app.loopback_only = loopback_only
    app.convert = ConvertApp(gate_pods)
    if clients_verified:
        app.authorize = Authorizer(identities or DEFAULT_CLIENT_IDENTITIES, prefix, observers.metrics.forbidden,
                                   observers.metrics.client_certificate_expiry)
    # A request a local reverse proxy forwards is judged by the address it names (trusted_caller), as uvicorn
    # did for every route before its proxy-header middleware was turned off for the verbs' sake.
    app.add_middleware(ProxyHeadersMiddleware, trusted_hosts="127.0.0.1")
    app.add_middleware(BodyLimit)        # no route reads a byte of a body over its limit (read_body: the verbs)
    app.include_router(debug_router(scheduler, clients_verified))
    app.include_router(ui_router(scheduler))

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(observers.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/livez")
    @app.get("/healthz")        # kube components' older name for the same check
    async def livez() -> Response:
        reason = "watch loop not running" if not alive() else loops.stuck()
        if reason is None:
            return Response(b'{"live":true}', media_type=JSON)
        return Response(orjson.dumps({"live": False, "reason": reason}), status_code=503, media_type=JSON)

    @app.get("/readyz")
    async def readyz() -> Response:
        """Every replica whose state is synced is ready, leader or standby (the body says which): Service
        quotient selects the leader's pod by its label (app/leader_label.py), not by readiness."""
        if ready():
            role = b"" if leading is None else b": leader" if leading() else b": standby"
            return Response(b"ok" + role, media_type="text/plain")
        reason = readiness() or "not ready"
        return Response(orjson.dumps({"ready": False, "reason": reason}), status_code=503, media_type=JSON)

    @app.get("/version")
    async def version() -> Response:
        return Response(orjson.dumps(build_info()), media_type=JSON)

    @app.get("/")
    async def root() -> Response:
        return RedirectResponse("/ui", status_code=307)

    return app


def create_view_app(scheduler: Scheduler, loopback: bool = True) -> FastAPI:
    """The view port's application (`quotient serve --view-port`): /ui and /debug for a browser or curl that
    holds no client certificate (through kubectl port-forward, say). It reads the state the main application
    keeps and runs none of its loops; nothing on it changes state (reactivate answers 403). On loopback it
    answers only requests addressed to a loopback name: a web page the admin opens cannot read it through
    DNS rebinding (its Host header names the page's own domain)."""
    app = FastAPI(title="Quotient view", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodyLimit)
    if loopback:
        app.add_middleware(LoopbackHostOnly)
    app.include_router(debug_router(scheduler, view_port=True))
    app.include_router(ui_router(scheduler))
    app.add_api_route("/", lambda: RedirectResponse("/ui", status_code=307), methods=["GET"])
    return app
