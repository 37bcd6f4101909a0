"""The /debug routes: the quota tree, one queue, one pod, recent decisions and explain, as JSON or text.

JSON by default; `?format=text` (or `Accept: text/plain`) renders the same view as
aligned tables (app.api.text). An unknown queue or pod is a 404 naming what was
looked up, a body explain cannot read is a 400 naming the problem. Nothing here
changes the state but reactivate, which only a trusted caller may call (with client certificates: role admin,
app/api/identity.py).
"""
from __future__ import annotations

from typing import Awaitable, Callable

import orjson

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..observe.topology_view import DOMAINS_SHOWN, topologies_view
from ..observe.explain import BadManifest, explain, parse_manifest
from .exposure import trusted_caller
from ..observe.podview import pod_view
from ..observe.view_query import DebugError, asked_decisions, build_queue_view, int_param
from ..observe.views import PENDING_SHOWN, NotFound, queues_view
from . import text

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


def wants_text(request: Request) -> bool:
    fmt = request.query_params.get("format")
    if fmt is not None:
        if fmt not in ("json", "text"):
            raise DebugError(400, f"format {fmt!r} is not one of json, text")
        return fmt == "text"
    accept = request.headers.get("accept", "")
    return "text/plain" in accept and "application/json" not in accept


async def respond(request: Request, build: Callable[[], Awaitable[dict]], render: Callable[[dict], str]) -> Response:
    as_text = False
    try:
        as_text = wants_text(request)
        view = await build()
    except DebugError as e:
        return _error(as_text, e.status, e.view)
    except NotFound as e:
        view = {"error": e.message, "lookedUp": e.looked_up}
        if e.known is not None:
            view["known"] = e.known
        return _error(as_text, 404, view)
    except BadManifest as e:
        return _error(as_text, 400, {"error": f"explain: {e}"})
    if as_text:
        return Response(text.printable(render(view)), media_type=TEXT)
    return Response(orjson.dumps(view, option=orjson.OPT_NON_STR_KEYS), media_type=JSON)


def _as_json_text(view: dict) -> str:
    return orjson.dumps(view, option=orjson.OPT_INDENT_2).decode() + "\n"


def _error(as_text: bool, status: int, view: dict) -> Response:
    if as_text:
        return Response(text.printable(text.render_error(view)), status_code=status, media_type=TEXT)
    return Response(orjson.dumps(view), status_code=status, media_type=JSON)


def debug_router(scheduler, clients_verified: bool = False, view_port: bool = False) -> APIRouter:
    """The routes; the one that changes state (reactivate) answers only a trusted caller (app.api.exposure),
    and never on the view port (`quotient serve --view-port`), which asks no caller who it is."""
    state, journal = scheduler.state, scheduler.journal
    router = APIRouter(prefix="/debug")

    def now(build: Callable[[], dict]) -> Callable[[], Awaitable[dict]]:
        async def run() -> dict:
            return build()
        return run

    @router.get("/queues")
    async def queues(request: Request) -> Response:
        return await respond(request, now(lambda: queues_view(state)), text.render_queues)

    @router.get("/queues/{name}")
    async def queue(name: str, request: Request) -> Response:
        async def build() -> dict:
            return await build_queue_view(state, journal, name, int_param(request.query_params, "limit", PENDING_SHOWN))
        return await respond(request, build, text.render_queue)

    @router.get("/pods/{namespace}/{name:path}")
    async def pod(namespace: str, name: str, request: Request) -> Response:
        return await respond(request, now(lambda: pod_view(state, journal, namespace, name, scheduler.actions,
                                                                   scheduler.refusals)), text.render_pod)

    @router.get("/topologies")
    async def topologies(request: Request) -> Response:
        """Each Topology's domains per level with their free room (issue 36)."""
        return await respond(request, now(lambda: topologies_view(state, int_param(request.query_params, "limit",
                                                                                   DOMAINS_SHOWN))),
                             text.render_topologies)

    @router.get("/decisions")
    async def decisions(request: Request) -> Response:
        return await respond(request, now(lambda: asked_decisions(journal, request.query_params)), text.render_decisions)

    @router.get("/workloads")
    async def workloads(request: Request) -> Response:
        """waitForPodsReady records: admitted workloads waiting to be Ready, requeues and deactivations."""
        def build() -> dict:
            return {"admitted": {u.shown: {"admittedAt": r.admitted_at, "readyAt": r.ready_at,
                                                          "unreadyAt": r.unready_at}
                                 for u, r in state.readiness.items()},
                    "requeued": {k: {"count": q.count, "backoffUntil": q.at, "deactivated": q.deactivated}
                                 for k, q in state.requeues.items()}}
        return await respond(request, now(build), _as_json_text)

    @router.post("/workloads/{key:path}/reactivate")
    async def reactivate(key: str, request: Request) -> Response:
        """Clear a workload's PodsReadyTimeout evictions (its deactivation and backoff)."""
        def build() -> dict:
            if view_port:
                raise DebugError(403, "reactivate changes state: it is not served on the view port "
                                 "(--view-port), which asks callers for no certificate; use the main port")
            if not trusted_caller(request.scope, clients_verified):
                raise DebugError(403, "reactivate changes state: it is served only to loopback callers (kubectl "
                                 "exec, kubectl port-forward) or over TLS with a client certificate of role admin "
                                 "(--tls-client-ca, clientIdentities)")
            if not scheduler.reactivate(key):
                raise DebugError(404, f"no requeued workload {key!r}; GET /debug/workloads lists them")
            return {"reactivated": key}
        return await respond(request, now(build), _as_json_text)

    @router.post("/explain")
    async def explain_pod(request: Request) -> Response:
        body = await request.body()

        def build() -> dict:       # app.api.limits.BodyLimit has bounded the body's size
            if view_port and not trusted_caller(request.scope, False):
                raise DebugError(403, "explain runs admission decisions: on the view port (--view-port) it is "
                                 "served only to loopback callers (kubectl port-forward); use the main port")
            obj, names = parse_manifest(body, request.headers.get("content-type", ""))
            return explain(state, obj, names)
        return await respond(request, now(build), text.render_explain)

    return router
