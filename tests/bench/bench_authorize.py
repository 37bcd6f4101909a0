"""What holding each caller to its role costs the verbs (issue 33): a filter through QuotientApp in process, on a
port that verifies client certificates (the Authorizer before routing) and on one that does not.

    .venv/bin/python tests/bench/bench_authorize.py [--calls 20000]

Not a pytest test (tests/bench/conftest.py keeps pytest out). No HTTP and no TLS: the ASGI call from a whole
request to the answer's bytes, the connection's Peer (its verified subject) already in the scope as
app/api/connections.py puts it there, so what is measured is what the Authorizer adds per request: the route's
dict lookup and a bit test (the caller's roles are worked out on a connection's first request only).

Prints microseconds per filter both ways, their ratio within this run, and nanoseconds per authorization alone.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.api.app import create_app  # noqa: E402
from app.api.identity import Peer  # noqa: E402
from app.cli import build_from_snapshot  # noqa: E402
from app.sync.snapshot import DEFAULT_SNAPSHOT  # noqa: E402

BODY = orjson.dumps({"Pod": {"metadata": {"name": "p", "namespace": "team-a", "uid": "bench-1",
                                          "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
                             "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                     "Nodes": None, "NodeNames": ["od-1", "od-2", "spot-1", "spot-2"]})


async def _calls(app, n: int, peer: Peer | None) -> float:
    async def receive():
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise AssertionError(f"filter answered {message['status']}")

    started = time.perf_counter()
    for _ in range(n):
        scope = {"type": "http", "method": "POST", "path": "/filter", "headers": [], "query_string": b"",
                 "extensions": {"quotient.client": peer}}
        await app(scope, receive, send)
    return (time.perf_counter() - started) / n


def run(calls: int) -> dict:
    plain = create_app(build_from_snapshot(DEFAULT_SNAPSHOT))
    verified = create_app(build_from_snapshot(DEFAULT_SNAPSHOT), clients_verified=True)
    peer = Peer("quotient-scheduler", ())
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_calls(plain, 200, None))           # warm both
        loop.run_until_complete(_calls(verified, 200, peer))
        without = min(loop.run_until_complete(_calls(plain, calls, None)) for _ in range(3))
        with_roles = min(loop.run_until_complete(_calls(verified, calls, peer)) for _ in range(3))
    finally:
        loop.close()
    authorize, scope = verified.authorize, {"path": "/filter", "extensions": {"quotient.client": peer}}
    started = time.perf_counter()
    for _ in range(calls * 10):
        assert authorize(scope) is None
    alone = (time.perf_counter() - started) / (calls * 10)
    return {"without_us": without * 1e6, "with_us": with_roles * 1e6, "ratio": with_roles / without,
            "authorize_ns": alone * 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    r = run(parser.parse_args().calls)
    print(f"filter without identities {r['without_us']:8.1f} us")
    print(f"filter with identities    {r['with_us']:8.1f} us   ratio {r['ratio']:.3f}")
    print(f"authorization alone       {r['authorize_ns']:8.0f} ns")


if __name__ == "__main__":
    main()
