"""The webhook port's routes: POST /convert, the CRD conversion webhook deploy/crds/crds.yaml names, for the Kueue
kinds it serves in both kueue.x-k8s.io/v1beta1 and v1beta2 (app/objects/conversion.py does the converting), and
POST /mutate-pods, the mutating admission webhook deploy/base/pod-gate.yaml names, which holds plain pods behind
Kueue's scheduling gate when the Configuration's integrations.frameworks lists "pod" (app/api/pod_gate.py).

kube-apiserver sends an apiextensions.k8s.io/v1 ConversionReview or an admission.k8s.io/v1 AdmissionReview and
presents no client certificate, so `quotient serve --conversion-port` serves these two alone on a port of its own
(ConvertApp answers 404 for every other path): they read and change no state, so any caller may use them. A
conversion review that cannot be answered gets `result: {status: Failure, message}` (the API server shows the
message to its client); an admission review is always allowed; a body that is not a review with a uid gets a 400.
"""
from __future__ import annotations

import asyncio
import logging
import time

import orjson

from . import pod_gate
from .convertworker import ANSWERED, CROWDED, ConversionWorker
from .limits import BodyTooLarge, ClientGone, LargeBodies, answer, read_body, refuse, too_many_items
from .review import review
from .wire import WireError

log = logging.getLogger("quotient.api")
PATH = "/convert"
MUTATE_PODS_PATH = "/mutate-pods"
PATHS = frozenset((PATH, MUTATE_PODS_PATH))
# One review carries every object of a list the API server converts; a ClusterQueue is a few KiB.
CONVERT_BODY = 32 * 2**20
# An AdmissionReview carries one Pod (the API server stores none above 1.5 MiB) and the request's attributes.
MUTATE_BODY = 3 * 2**20


# A review larger than this (about 15 ClusterQueues) is decoded, converted and encoded in a child process
# (app/api/convertworker.py), so the verbs sharing the event loop keep answering; one such review is read and
# converted at a time, in the whole process, whichever port it came by: anyone may reach the conversion port,
# and memory stays bounded.
INLINE_BODY = 64 * 2**10
_large = LargeBodies(INLINE_BODY)
# Pods above INLINE_BODY are read one at a time too, apart from conversions: a gate decision never waits behind a
# paced 32 MiB conversion (kube-apiserver gives this webhook 5 s, deploy/base/pod-gate.yaml).
_large_pods = LargeBodies(INLINE_BODY)
_worker = None


def worker():
    """The process's conversion worker, started when a first large review comes."""
    global _worker
    if _worker is None:
        _worker = ConversionWorker()
    return _worker


class ConvertApp:
    """ASGI: POST /convert answers a ConversionReview, POST /mutate-pods an AdmissionReview (gate_pods: the
    Configuration's integrations.frameworks lists "pod"); any other path is 404 (the webhook port serves
    nothing else)."""

    def __init__(self, gate_pods: bool = False):
        self.gate_pods = gate_pods

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path not in PATHS:
            return await answer(send, 404, orjson.dumps({"error": f"{path}: not found (this port serves only POST "
                                                               f"{PATH} and POST {MUTATE_PODS_PATH})"}))
        if scope["method"] != "POST":
            return await answer(send, 405, orjson.dumps({"error": f"{path[1:]}: use POST"}))
        if path == MUTATE_PODS_PATH:
            return await self._mutate_pods(scope, receive, send)
        try:
            async with _large.admit(scope):
                large = _large.is_large(scope)
                body = await read_body(scope, _paced(receive) if large else receive, CONVERT_BODY,
                                       bytearray() if large else None)
                if len(body) > INLINE_BODY:
                    return await self._converted_apart(body, send)
        except BodyTooLarge as e:
            return await refuse(send, "convert", e.limit)
        except ClientGone:
            return None
        body = bytes(body)      # a small one that came without a declared length
        crowded = too_many_items(body)
        if crowded:
            return await answer(send, 413, orjson.dumps({"error": f"convert: {crowded}"}))
        try:
            out = review(body)
        except WireError as e:
            return await answer(send, 400, orjson.dumps({"error": f"convert: {e}"}))
        await answer(send, 200, out)

    async def _mutate_pods(self, scope, receive, send) -> None:
        try:
            async with _large_pods.admit(scope):
                body = await read_body(scope, receive, MUTATE_BODY)
                crowded = too_many_items(body)
                if crowded:
                    return await answer(send, 413, orjson.dumps({"error": f"mutate-pods: {crowded}"}))
                out = pod_gate.review(body, self.gate_pods)
        except BodyTooLarge as e:
            return await refuse(send, "mutate-pods", e.limit)
        except ClientGone:
            return None
        except WireError as e:
            return await answer(send, 400, orjson.dumps({"error": f"mutate-pods: {e}"}))
        await answer(send, 200, out)

    async def _converted_apart(self, body: bytes, send) -> None:
        try:
            kind, out = await worker().convert(body)
        except RuntimeError as e:
            log.error("conversion review of %d bytes not answered: %s", len(body), e)
            return await answer(send, 500, orjson.dumps({"error": f"convert: {e}"}))
        del body
        if kind == ANSWERED:
            return await _answer_in_pieces(send, out)
        return await answer(send, 413 if kind == CROWDED else 400,
                            orjson.dumps({"error": f"convert: {out.decode(errors='replace')}"}))



# A large review is read and answered at most this fast (bytes a second each way, whole process): the verbs'
# event loop then spends a bounded share of its time on conversion traffic, in short slices, and the conversion
# worker converts no faster than that (tests/bench/bench_connections.py: unpaced, 4 connections sending 32 MiB
# reviews took filter's p99 to 4-6x its idle value; paced at 16 MiB/s, under 2x). The largest review the limit
# admits then takes about 4 s in all, well within kube-apiserver's webhook timeout (10 s by default, 30 at most);
# a real one (a few KiB per object) is not paced at all.
CONVERT_RATE = 16 * 2**20
ANSWER_PIECE = 128 * 2**10


class _Pace:
    """A token bucket with no burst: take(n) returns once n more bytes fit in CONVERT_RATE since the last take."""

    def __init__(self, rate: float):
        self.rate = rate
        self._next = 0.0

    async def take(self, n: int) -> None:
        now = time.monotonic()
        self._next = max(now, self._next) + n / self.rate
        if self._next - now > 0.001:
            await asyncio.sleep(self._next - now)


_pace = _Pace(CONVERT_RATE)


def _paced(receive):
    """receive, paced: uvicorn stops reading the socket meanwhile (its flow control), so the body waits in the
    client and the kernel, not in this process."""
    async def paced():
        message = await receive()
        await _pace.take(len(message.get("body", b"")))
        return message
    return paced


async def _answer_in_pieces(send, out: bytearray) -> None:
    """A large answer written ANSWER_PIECE at a time (views, not copies) at CONVERT_RATE: the transport never
    takes much of it in one call, which would copy it on the event loop, and a slow reader is paced by uvicorn's
    flow control."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(out))]})
    view = memoryview(out)
    for start in range(0, len(out), ANSWER_PIECE):
        await _pace.take(min(ANSWER_PIECE, len(out) - start))
        await send({"type": "http.response.body", "body": view[start:start + ANSWER_PIECE],
                    "more_body": start + ANSWER_PIECE < len(out)})
    if not out:
        await send({"type": "http.response.body", "body": b""})
