"""Request body limits, enforced before a body is decoded.

A body is refused from its Content-Length before a byte of it is read, and while
it streams as soon as it passes the limit, on every route: a 400 MB upload costs
nothing but the refusal. Verbs also refuse a body with more JSON items than any
cluster sends (counted in C, a few ms for 8 MiB), because decoding four million
one-letter node names holds the event loop for a quarter of a second.

A body is decoded on the event loop the verbs share, so what one may hold it for is bounded by its size:
VERB_BODY is what kube-scheduler can really send with nodeCacheCapable (every shipped configuration): one Pod
(the API server stores none above 1.5 MiB) and at most app.api.wire.MAX_NODES node names of at most 253
characters (DNS subdomains), 5.3 MiB in all. Large bodies are also read one at a time (LargeBodies), so
connections that each send one cannot add up to more than one in memory.
"""
from __future__ import annotations

import asyncio
import contextlib

import orjson

# 8 MiB: 15,000 node names of 253 characters and a 1.5 MiB Pod fit with room. Without nodeCacheCapable the body
# carries whole Node objects (5 to 20 KiB each with their image lists), so clusters beyond about 1,000 nodes
# need nodeCacheCapable: true, which every configuration under scheduler-config/ and deploy/ sets.
VERB_BODY = 8 * 2**20
OTHER_BODY = 4 * 2**20     # /debug/explain takes one manifest; nothing else takes a body
# kube-scheduler sends one Pod and the node names it passed (5,000 nodes is Kubernetes' tested
# limit); a million items is far beyond that and decodes in about 70 ms at worst.
MAX_JSON_ITEMS = 1_000_000
LARGE_BODY = 2**20         # a verb body above this (or of no declared length) is read while no other one is


class ClientGone(Exception):
    """Raised by read_body: the client closed the connection (or a timeout did) before its body was whole."""


class LargeBodies:
    """One large body at a time: `async with bodies.admit(scope):` around reading and decoding it waits while
    another large one is under way (uvicorn stops reading the waiting connection's socket meanwhile). A body of
    no declared length counts as large."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self._one: asyncio.Semaphore | None = None
        self._loop = None

    def is_large(self, scope) -> bool:
        declared = _content_length(scope)
        return declared is None or declared > self.threshold

    def admit(self, scope):
        if not self.is_large(scope):
            return contextlib.nullcontext()
        loop = asyncio.get_running_loop()
        if self._loop is not loop:      # one per event loop (tests run several in turn)
            self._one, self._loop = asyncio.Semaphore(1), loop
        return self._admitted(scope)

    @contextlib.asynccontextmanager
    async def _admitted(self, scope):
        from .connections import waiting_on_server

        with waiting_on_server(scope):  # the wait is the server's: the connection's read timeout stops meanwhile
            await self._one.acquire()
        try:
            yield
        finally:
            self._one.release()


class BodyTooLarge(Exception):
    """Raised from the wrapped receive: the body passed its route's limit while streaming."""

    def __init__(self, limit: int):
        super().__init__(f"body larger than {limit} bytes")
        self.limit = limit


def too_many_items(raw: bytes) -> str | None:
    """Why a verb body has too many JSON items to decode, or None."""
    if len(raw) > MAX_JSON_ITEMS and raw.count(b",") >= MAX_JSON_ITEMS:
        return f"body has more than {MAX_JSON_ITEMS:,} JSON items"
    return None


async def read_body(scope, receive, limit: int = VERB_BODY, into: bytearray | None = None) -> bytes | bytearray:
    """A verb's whole body; BodyTooLarge from its Content-Length, or as soon as it streams past the limit;
    ClientGone when the connection closes first. With `into`, the body is gathered there and `into` returned
    (a large body then costs no final join: one copy less of it on the event loop)."""
    declared = _content_length(scope)
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)
    if into is not None:
        async for chunk in _chunks(receive, limit):
            into += chunk
        return into
    chunks = [chunk async for chunk in _chunks(receive, limit)]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _chunks(receive, limit: int):
    """The body's chunks as they come; BodyTooLarge as soon as they pass the limit, ClientGone on a disconnect."""
    seen = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            raise BodyTooLarge(limit)
        yield chunk
        if not message.get("more_body"):
            return


class BodyLimit:
    """ASGI middleware for the routes other than the verbs (which read_body bounds): 413 for a body over the
    limit, from Content-Length or while it streams."""

    def __init__(self, app, limit: int = OTHER_BODY):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit
        what = scope.get("path", "").rsplit("/", 1)[-1] or "request"
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            return await refuse(send, what, limit)
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watched_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge:
            if not started:
                await refuse(send, what, limit)


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def answer(send, status: int, body: bytes, close: bool = False) -> None:
    """A whole JSON response, straight to the ASGI server (the lean routes skip Starlette's Response)."""
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status,
                "headers": headers + [(b"connection", b"close")] if close else headers})
    await send({"type": "http.response.body", "body": body})


async def refuse(send, what: str, limit: int) -> None:
    """413, and the connection closed: the rest of the body is not read."""
    await answer(send, 413, orjson.dumps({"error": f"{what}: body larger than {limit} bytes"}), close=True)
