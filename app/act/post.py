"""Writes (POST, PATCH) of ready JSON bytes to the API server on kept-alive HTTP/1.1 connections of Quotient's
own.

The Binding is written once per scheduled pod (and, for a gated pod, the gate's removal once more), and on a
busy cluster its write was the largest share of Quotient's CPU per pod: aiohttp's client builds a request
object, timers, a connection key and tracing hooks for every call (issue 19, tests/bench/bench_throughput.py).
Here a request is one write of bytes and a response the status line, headers and a Content-Length (or
chunked) body, on the same TLS settings as the kubeconfig's ApiClient (CA, client certificate, server name,
verification).
A proxy is not spoken here: with one configured, KubeWriter posts through the ApiClient instead.
A write that fails on a kept-alive connection is not sent again here: the server may have read it before the
connection went (a restart, even from a backup), and, as Go's net/http does for a POST, whether to send it again
is the caller's (KubeWriter._retry, after its backoff and its check that no watch broke meanwhile). An idle
connection already seen closed is never written to (_spent); the next write opens a fresh one.
"""
from __future__ import annotations

import asyncio
import re
import ssl
from urllib.parse import urlsplit

# Connections at most, all kept alive; more writes at once wait for one (as aiohttp's connector limit does).
# Opening one per write in flight instead costs a TLS handshake each under a burst of binds, and the
# handshakes then slow every write further (seen: a fifth of the CPU in do_handshake at 10,000 pods).
MAX_CONNECTIONS = 16
MAX_HEADER_LINES = 100
HEX = re.compile(rb"[0-9A-Fa-f]{1,8}")
MAX_BODY = 4 * 2**20       # an API answer to a write is a small Status or object


class PostError(OSError):
    """The connection failed or the answer was not HTTP; a write that may pass on a retry."""


class Answer:
    """An HTTP answer, read whole; shaped as app.act.kube._checked reads an aiohttp response."""

    def __init__(self, status: int, reason: str, body: bytes):
        self.status, self.reason, self.body = status, reason, body

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass


def ssl_context(configuration) -> ssl.SSLContext:
    """The TLS settings kubernetes-asyncio's REST client takes from the same configuration."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _spent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """An idle connection not to send on: closed, or holding bytes nobody asked for (a proxy's 408 before
    it closed), which would be read as the next request's answer."""
    return reader.at_eof() or writer.is_closing() or bool(getattr(reader, "_buffer", b""))


class ApiPoster:
    def __init__(self, configuration, max_connections: int = MAX_CONNECTIONS):
        url = urlsplit(configuration.host)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"API server URL {configuration.host!r} is not http(s)://host[:port]")
        self.host, self.base = url.hostname, url.path.rstrip("/")
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.authority = url.netloc.rsplit("@", 1)[-1].encode()
        self.tls = ssl_context(configuration) if url.scheme == "https" else None
        self.server_name = configuration.tls_server_name or self.host if self.tls else None
        self.slots = asyncio.Semaphore(max_connections)
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes, headers: dict[str, str], method: bytes = b"POST") -> Answer:
        """POST (or method) body to path, on an idle kept-alive connection not seen closed, or a new one."""
        head = b"".join([method, b" ", (self.base + path).encode(), b" HTTP/1.1\r\nHost: ", self.authority,
                         b"\r\nContent-Length: %d\r\n" % len(body),
                         *(f"{k}: {v}\r\n".encode("latin-1") for k, v in headers.items()), b"\r\n"])
        async with self.slots:
            return await self._post(head, body)

    async def _post(self, head: bytes, body: bytes) -> Answer:
        while self.idle:
            conn = self.idle.pop()
            if _spent(*conn):
                conn[1].close()
                continue
            return await self._exchange(conn, head, body)
        conn = await asyncio.open_connection(self.host, self.port, ssl=self.tls, server_hostname=self.server_name,
                                             limit=MAX_BODY)
        return await self._exchange(conn, head, body)

    async def _exchange(self, conn, head: bytes, body: bytes) -> Answer:
        reader, writer = conn
        reusable = False
        try:
            writer.write(head + body)
            answer, reusable = await _read_answer(reader)
            return answer
        except asyncio.IncompleteReadError as e:
            raise PostError(f"the API server closed the connection mid-answer ({len(e.partial)} bytes)") from None
        except asyncio.LimitOverrunError:
            raise PostError("an answer's header line is too long") from None
        except ValueError as e:         # whatever the checks above missed is still a broken answer
            raise PostError(f"unreadable answer: {e}") from None
        finally:
            if reusable:
                self.idle.append(conn)
            else:
                writer.close()

    def close(self) -> None:
        """Close the idle connections (at shutdown)."""
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[Answer, bool]:
    """(the final answer, whether the connection may carry another request). Interim 1xx answers (103
    Early Hints from a proxy, say) are read past; a 101 would switch protocols, so it is an error."""
    while True:
        status, reason, keep, head = await _read_head(reader)
        if status == 101:
            raise PostError("the API server switched protocols (101)")
        if status >= 200:
            break
    length, chunked = head
    if chunked:
        body = await _read_chunked(reader)
    elif length is not None:
        body = await reader.readexactly(length)
    elif status in (204, 304):
        body = b""
    else:                      # no framing: the body runs to the end of the connection
        body, keep = await _read_to_end(reader), False
    return Answer(status, reason, body), keep


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, str, bool, tuple[int | None, bool]]:
    """Status, reason, keep-alive, and the body's framing (Content-Length or None, chunked)."""
    line = await reader.readuntil(b"\r\n")
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _decimal(parts[1]) or len(parts[1]) != 3:
        raise PostError(f"not an HTTP answer: {line[:80]!r}")
    status, reason = int(parts[1]), parts[2] if len(parts) > 2 else ""
    length, chunked, keep = None, False, parts[0] == "HTTP/1.1"
    for _ in range(MAX_HEADER_LINES):
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            return status, reason, keep, (length, chunked)
        name, _, value = line.decode("latin-1").partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            if not _decimal(value) or int(value) > MAX_BODY:
                raise PostError(f"bad Content-Length {value[:20]!r}")
            length = int(value)
        elif name == "transfer-encoding":
            chunked = "chunked" in value
        elif name == "connection":
            keep = "close" not in value if keep else "keep-alive" in value
    raise PostError(f"more than {MAX_HEADER_LINES} header lines")


def _decimal(text: str) -> bool:
    """ASCII digits only (str.isdigit also takes "²", which int() refuses)."""
    return 0 < len(text) <= 12 and text.isascii() and text.isdigit()


async def _read_to_end(reader: asyncio.StreamReader) -> bytes:
    chunks, total = [], 0
    while total <= MAX_BODY:
        chunk = await reader.read(MAX_BODY + 1 - total)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
    raise PostError("answer too long")


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks, total = [], 0
    while True:
        size_line = (await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip()
        if not HEX.fullmatch(size_line):
            raise PostError(f"bad chunk size {size_line[:20]!r}")
        size = int(size_line, 16)
        if size == 0:
            for _ in range(MAX_HEADER_LINES):                       # trailers, then the blank line
                if await reader.readuntil(b"\r\n") == b"\r\n":
                    return b"".join(chunks)
            raise PostError(f"more than {MAX_HEADER_LINES} trailer lines")
        total += size
        if total > MAX_BODY:
            raise PostError("chunked answer too long")
        chunk = await reader.readexactly(size + 2)
        if chunk[-2:] != b"\r\n":
            raise PostError("a chunk does not end with CRLF")
        chunks.append(chunk[:-2])
