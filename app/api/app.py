"""FastAPI application: the verbs under the configured prefix, plus /livez and /readyz.

Handlers read the raw body and answer raw bytes (orjson), skipping pydantic: the
filter path must cost little more than decoding the request.
"""
from __future__ import annotations

import logging

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from ..extender import Extender
from .wire import WireError

log = logging.getLogger("quotient.api")
JSON = "application/json"


def _bad_request(verb: str, error: Exception) -> Response:
    return Response(orjson.dumps({"error": f"{verb}: {error}"}), status_code=400, media_type=JSON)


def create_app(extender: Extender, path_prefix: str = "", ready=lambda: True) -> FastAPI:
    app = FastAPI(title="Quotient", docs_url=None, redoc_url=None)
    app.state.extender = extender
    prefix = path_prefix.rstrip("/")

    def sync_verb(verb: str, handler):
        async def endpoint(request: Request) -> Response:
            try:
                return Response(handler(await request.body()), media_type=JSON)
            except WireError as e:
                return _bad_request(verb, e)
        app.add_api_route(f"{prefix}/{verb}", endpoint, methods=["POST"], name=verb)

    sync_verb("filter", extender.filter)
    sync_verb("prioritize", extender.prioritize)
    sync_verb("preempt", extender.preempt)

    @app.post(f"{prefix}/bind", name="bind")
    async def bind(request: Request) -> Response:
        try:
            return Response(await extender.bind(await request.body()), media_type=JSON)
        except WireError as e:
            return _bad_request("bind", e)

    @app.get("/livez")
    async def livez() -> Response:
        return Response(b'{"live":true}', media_type=JSON)

    @app.get("/readyz")
    async def readyz() -> Response:
        ok = bool(ready())
        return Response(orjson.dumps({"ready": ok}), status_code=200 if ok else 503, media_type=JSON)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> Response:
        # Never crash the server on a bug; kube-scheduler sees a 500 and retries the pod.
        log.exception("internal error on %s", request.url.path)
        return Response(orjson.dumps({"error": f"internal error: {type(exc).__name__}: {exc}"}),
                        status_code=500, media_type=JSON)

    return app
