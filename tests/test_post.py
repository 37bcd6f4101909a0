"""app/act/post.py: the Binding's POST on Quotient's own kept-alive connections, against servers on
127.0.0.1 that answer as an API server may (Content-Length, chunked, Connection: close, an idle
connection closed, garbage), and over HTTPS against the fake API server."""
from __future__ import annotations

import asyncio
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from app.act.post import ApiPoster, PostError
from fakeapi import FakeApiServer

STATUS = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'


def configuration(host: str, **kw) -> SimpleNamespace:
    fields = {"host": host, "ssl_ca_cert": None, "cert_file": None, "key_file": None, "verify_ssl": True,
              "tls_server_name": None}
    return SimpleNamespace(**{**fields, **kw})


CLOSE, HANG = object(), object()     # script entries: close after answering; never answer


class Scripted:
    """An HTTP/1.1 server answering each request with the next scripted bytes: None closes instead of
    answering, (CLOSE, bytes) closes right after answering, HANG waits for the client to give up."""

    def __init__(self, answers: list[bytes | None]):
        self.answers, self.requests, self.connections = list(answers), [], 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if answer is None:
                    break
                if answer is HANG:
                    await reader.read()
                    break
                close = isinstance(answer, tuple)
                writer.write(answer[1] if close else answer)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()


def ok(body: bytes = STATUS, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


async def test_one_connection_carries_every_post_and_the_request_is_what_an_api_server_reads():
    async with Scripted([ok(), ok()]) as server:
        poster = ApiPoster(configuration(server.url))
        headers = {"Content-Type": "application/json", "Authorization": "Bearer t"}
        first = await poster.post("/api/v1/namespaces/ns/pods/p/binding", b'{"a":1}', headers)
        second = await poster.post("/api/v1/namespaces/ns/pods/q/binding", b'{"b":2}', headers)
        assert (first.status, second.status) == (201, 201) and await first.read() == STATUS
        assert server.connections == 1
        request = server.requests[0]
        assert request.startswith(b"POST /api/v1/namespaces/ns/pods/p/binding HTTP/1.1\r\n")
        assert b"\r\nContent-Length: 7\r\n" in request and b"\r\nAuthorization: Bearer t\r\n" in request
        assert request.endswith(b'\r\n\r\n{"a":1}')
        poster.close()


async def test_chunked_answers_and_connection_close_are_read_as_http_says():
    chunked = (b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\n{\"a\":\r\n3;ext=1\r\n 1}\r\n0\r\n\r\n")
    async with Scripted([chunked, ok(extra=b"Connection: close\r\n"), ok()]) as server:
        poster = ApiPoster(configuration(server.url))
        conflict = await poster.post("/x", b"{}", {})
        assert (conflict.status, conflict.reason, conflict.body) == (409, "Conflict", b'{"a": 1}')
        assert (await poster.post("/x", b"{}", {})).status == 201       # then the server closes it
        assert (await poster.post("/x", b"{}", {})).status == 201
        assert server.connections == 2


async def test_a_write_a_kept_alive_connection_drops_is_not_sent_again_here():
    """The server closes a kept-alive connection as the write arrives: the server may have read it (a restart,
    even from a backup), so the write fails and its caller decides (KubeWriter._retry); the next goes fresh."""
    async with Scripted([ok(), None, ok()]) as server:
        poster = ApiPoster(configuration(server.url))
        assert (await poster.post("/x", b"{}", {})).status == 201
        with pytest.raises(PostError):
            await poster.post("/x", b"{}", {})                          # sent, unanswered: not sent again
        assert server.connections == 1
        assert (await poster.post("/x", b"{}", {})).status == 201
        assert server.connections == 2


async def test_an_idle_connection_seen_closed_is_not_written_to():
    async with Scripted([(CLOSE, ok()), ok()]) as server:
        poster = ApiPoster(configuration(server.url))
        assert (await poster.post("/x", b"{}", {})).status == 201
        await asyncio.sleep(0.1)                        # the server's FIN arrives: the idle one is at EOF
        assert (await poster.post("/x", b"{}", {})).status == 201
        assert server.connections == 2 and len(server.requests) == 2


async def test_bytes_nobody_asked_for_on_an_idle_connection_are_not_read_as_the_next_answer():
    """A proxy's 408 on an idle keep-alive connection, then its close: the next write goes elsewhere."""
    timeout = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    async with Scripted([ok(b"first") + timeout, ok(b"second")]) as server:
        poster = ApiPoster(configuration(server.url))
        assert (await poster.post("/x", b"{}", {})).body == b"first"
        second = await poster.post("/x", b"{}", {})
        assert (second.status, second.body) == (201, b"second")
        assert server.connections == 2


async def test_interim_answers_are_read_past_to_the_final_one():
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
    async with Scripted([early + ok(b"one"), ok(b"two")]) as server:
        poster = ApiPoster(configuration(server.url))
        assert [(await poster.post("/x", b"{}", {})).body for _ in range(2)] == [b"one", b"two"]
        assert server.connections == 1


async def test_a_write_that_times_out_closes_its_connection_and_frees_its_slot():
    async with Scripted([HANG, ok()]) as server:
        poster = ApiPoster(configuration(server.url), max_connections=1)
        with pytest.raises(asyncio.TimeoutError):
            async with asyncio.timeout(0.2):
                await poster.post("/x", b"{}", {})
        assert poster.idle == []
        assert (await asyncio.wait_for(poster.post("/x", b"{}", {}), 5)).status == 201
        assert server.connections == 2


async def test_an_answer_without_framing_runs_to_the_close():
    async with Scripted([(CLOSE, b"HTTP/1.1 500 Internal Server Error\r\n\r\npart1-part2")]) as server:
        poster = ApiPoster(configuration(server.url))
        answer = await poster.post("/x", b"{}", {})
        assert (answer.status, answer.body) == (500, b"part1-part2") and poster.idle == []


@pytest.mark.parametrize("answer,why", [
    (b"SSH-2.0-OpenSSH\r\n", "not an HTTP answer"),
    (b"HTTP/1.1 201 Created\r\nContent-Length: -5\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 201 Created\r\nContent-Length: 99999999999\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\nshort", "closed the connection mid-answer"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", "more than 100 header lines"),
    ("HTTP/1.1 201 Created\r\nContent-Length: \u00b2\r\n\r\n".encode("latin-1"), "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd", "does not end with CRLF"),
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "switched protocols"),
])
async def test_an_answer_that_is_not_http_is_an_error_not_a_hang(answer, why):
    async with Scripted([answer]) as server:
        poster = ApiPoster(configuration(server.url))
        with pytest.raises(PostError, match=why):
            await asyncio.wait_for(poster.post("/x", b"{}", {}), 5)
        assert poster.idle == []                       # a broken connection is not kept


async def test_writes_in_flight_share_at_most_the_connection_limit():
    async with Scripted([ok()] * 40) as server:
        poster = ApiPoster(configuration(server.url), max_connections=4)
        answers = await asyncio.gather(*(poster.post("/x", b"{}", {}) for _ in range(40)))
        assert [a.status for a in answers] == [201] * 40
        assert server.connections <= 4 and len(poster.idle) <= 4


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a certificate")
async def test_over_https_with_the_kubeconfig_ca_a_binding_is_made(tmp_path):
    cert, key = tmp_path / "api.crt", tmp_path / "api.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=fake", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    async with FakeApiServer(tls=(str(cert), str(key))) as api:
        api.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
                   "spec": {"containers": [{"name": "c"}]}})
        poster = ApiPoster(configuration(api.url, ssl_ca_cert=str(cert)))
        body = b'{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","namespace":"ns"},' \
               b'"target":{"apiVersion":"v1","kind":"Node","name":"n1"}}'
        answer = await poster.post("/api/v1/namespaces/ns/pods/p/binding", body,
                                   {"Content-Type": "application/json", "Authorization": f"Bearer {api.token}"})
        assert answer.status == 201, answer.body
        assert api.get("Pod", "ns", "p")["spec"]["nodeName"] == "n1"
        untrusted = ApiPoster(configuration(api.url))          # the system CAs do not know this server
        with pytest.raises(OSError):
            await untrusted.post("/api/v1/namespaces/ns/pods/p/binding", body, {})
        poster.close()
