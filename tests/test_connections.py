"""Connections are bounded on every port of a real `quotient serve` (app/api/connections.py): an idle connection
is closed after --idle-timeout, a request that does not arrive whole within --read-timeout gets a 408 and is
closed, and a port at --max-connections makes room by closing its quietest idle connection instead of answering
503 to everyone; the main port, the view port and the conversion port each keep their own connections.

Everything runs over real sockets on 127.0.0.1; timeouts are short so the tests are quick, and each wait is
bounded generously (these are not timing tests: they check that a connection is closed, not how fast)."""
from __future__ import annotations

import socket
import time

import httpx
import orjson
import pytest

from serving import free_port, served
from test_conversion_webhook import review_body

IDLE, READ = 1.0, 1.0


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def closed_within(s: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """(whether the server closed `s` within `seconds`, what it sent before closing)."""
    s.settimeout(0.2)
    got, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return True, got
        if not chunk:
            return True, got
        got += chunk
    return False, got


@pytest.fixture(scope="module")
def ports():
    conversion, view = free_port(), free_port()
    with served("--conversion-port", str(conversion), "--view-port", str(view), "--idle-timeout", str(IDLE),
                "--read-timeout", str(READ), "--max-connections", "20") as server:
        yield {"main": server.port, "conversion": conversion, "view": view}


@pytest.mark.parametrize("port", ["main", "conversion", "view"])
def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(ports, port):
    with connect(ports[port]) as s:
        closed, got = closed_within(s, IDLE + 5)
        assert closed and got == b""


def test_a_kept_alive_connection_is_closed_once_idle(ports):
    with connect(ports["main"]) as s:
        s.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        closed, got = closed_within(s, IDLE + 5)
        assert got.startswith(b"HTTP/1.1 200") and closed


@pytest.mark.parametrize("port", ["main", "conversion", "view"])
def test_headers_dripped_byte_by_byte_get_a_408_within_the_read_timeout(ports, port):
    """A slow-loris client keeps sending, so no idle timeout would fire: the request as a whole is timed."""
    with connect(ports[port]) as s:
        s.sendall(b"POST /convert HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < READ + 5:
            try:
                s.sendall(b"X")
            except OSError:
                closed = True
                break
            time.sleep(0.1)
        closed, got = closed_within(s, 3) if not closed else (True, s.recv(65536))
        assert closed and time.monotonic() - started < READ + 5
        assert got.startswith(b"HTTP/1.1 408") and b"not received whole within 1 s" in got, got


@pytest.mark.parametrize("port, path", [("main", "/filter"), ("conversion", "/convert")])
def test_a_body_that_never_arrives_whole_is_dropped(ports, port, path):
    with connect(ports[port]) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n".encode() + b"{" * 10)
        closed, _ = closed_within(s, READ + 5)
        assert closed


def _get(url: str, **kw) -> httpx.Response:
    with httpx.Client(trust_env=False, timeout=5) as c:
        return c.request(kw.pop("method", "GET"), url, **kw)


@pytest.fixture(scope="module")
def capped():
    """Connections are never idle long enough to time out here: only the cap closes them."""
    conversion, view = free_port(), free_port()
    with served("--conversion-port", str(conversion), "--view-port", str(view), "--idle-timeout", "120",
                "--max-connections", "20") as server:
        yield {"main": server.port, "conversion": conversion, "view": view}


def test_idle_connections_past_the_cap_do_not_keep_callers_out_nor_reach_other_ports(capped):
    """Before: 4 idle connections made the conversion port answer 503 to everyone, 16 the view port. Now each
    port holds 20 here; 60 idle connections on each make room for every caller, port by port."""
    ports = capped
    held = {name: [connect(port) for _ in range(60)] for name, port in ports.items()}
    try:
        time.sleep(0.2)
        main, conversion, view = (f"http://127.0.0.1:{ports[p]}" for p in ("main", "conversion", "view"))
        for _ in range(3):
            assert _get(f"{main}/readyz").status_code == 200
            r = _get(f"{conversion}/convert", method="POST", content=orjson.dumps(review_body()))
            assert r.status_code == 200 and r.json()["response"]["result"]["status"] == "Success", r.text
            assert _get(f"{view}/debug/queues").status_code == 200
        for name, conns in held.items():
            gone = [closed_within(s, 0.05)[0] for s in conns]
            assert all(gone[:40]) and not any(gone[-15:]), (name, gone)    # the quietest closed to make room
    finally:
        for conns in held.values():
            for s in conns:
                s.close()


def test_a_flag_that_is_not_a_duration_is_refused():
    from app.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--idle-timeout", "0"])
    with pytest.raises(SystemExit):
        main(["serve", "--max-connections", "none"])

