"""Connections are bounded on every port: no caller keeps a connection, or a port's share of them, by sending
nothing or sending slowly, and thousands of such connections cost the event loop the verbs share next to nothing.

uvicorn starts its keep-alive timer only after a first response, so a connection that sends nothing, or half a
request, was held for ever; and its limit_concurrency answers 503 to everyone once such connections fill it.
Each port's server speaks HTTP through a protocol made by `guarded(limits)`, which adds:

- an idle timeout (`idle`): a connection with no request under way (before its first byte, or between two
  requests on a kept-alive one) is closed;
- a read timeout (`read`): a request must arrive whole, headers and body, within this many seconds of its
  first byte, else 408 (when nothing is answering it yet) and the connection is closed; an answer the client does not read (writing paused) is dropped after as long. Time the
  server itself makes a request wait (for the one-large-body slot, app/api/limits.py) does not count;
- a cap (`cap`) on the connections a port holds at once. At the cap a new connection is not refused: the port closes the connection that has
  been quiet longest among those with no request being answered (idle ones, or ones still sending a request),
  so connections that send nothing cannot keep out the ones that call. Each port has its own cap: the
  conversion webhook, the view port and the verbs cannot starve each other.

On a TLS port the subject of the client certificate the handshake verified (app/api/identity.py, Peer) is read
once per connection, on its first request, and handed to each request as scope["extensions"]["quotient.client"].

A connection that waits for its TLS handshake is not yet seen here (uvicorn's TLS layer calls connection_made
after it): the event loop closes it after 60 s. (Starting the handshake here with loop.start_tls loses a
ClientHello that arrives before start_tls takes the transport: uvloop starts reading after connection_made.)

Cheap per connection, because an attacker opens and reopens them by the thousand: until its request headers are
whole, a connection is a small `_Gate` (a buffer and a deadline; no HTTP parser, no ASGI state, no timer of its
own); uvicorn's protocol is made only for a request whose headers arrived. Deadlines sit in two queues per port
(idle, reading), each in deadline order since each has one timeout, and one sweep a few times a second closes
the expired ones, at most SWEEP_BATCH per turn of the event loop, so a burst of expiries never holds the loop.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import resource
import time
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .identity import peer_of

log = logging.getLogger("quotient.api")

IDLE_TIMEOUT = 30.0     # seconds; kube-scheduler's Go client reopens a closed keep-alive connection by itself
READ_TIMEOUT = 10.0     # seconds for a whole request; kube-apiserver sends even a 32 MiB review in well under one
MAX_CONNECTIONS = 4096  # per port: 1,000 idle and 1,000 half-sent ones fit with room, so none need closing early
RESERVED_FILES = 256    # descriptors kept for the API client's connections, the worker's pipes, logs
MAX_HEAD = 64 * 2**10   # bytes of request head a gate buffers before handing them to the HTTP parser anyway
SWEEP_BATCH = 200       # expired connections closed per turn of the event loop


@dataclass(frozen=True)
class ConnectionLimits:
    idle: float = IDLE_TIMEOUT
    read: float = READ_TIMEOUT
    cap: int = MAX_CONNECTIONS


IDLE, READING, ANSWERING = "idle", "reading", "answering"
_UNSEEN = object()
_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
              b"content-length: %d\r\n\r\n%s")
_END_OF_HEAD = b"\r\n\r\n"


class _Port:
    """The connections one port holds: those idle and those reading a request, each queue oldest first (its
    deadline order); answering ones are counted but in neither queue."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self.idle: collections.OrderedDict[_Gate, float] = collections.OrderedDict()
        self.reading: collections.OrderedDict[_Gate, float] = collections.OrderedDict()
        self.count = 0
        self.evicted = 0
        self._loop = None
        self._sweeping = None

    def admit(self, conn: _Gate) -> bool:
        """Count `conn`; at the cap, close the quietest connection that no request is being answered on.
        False when every held connection is answering (then `conn` is closed instead)."""
        if self.count >= self.limits.cap:
            victim = self._quietest()
            if victim is None:
                return False
            self.evicted += 1
            victim.close()
        self.count += 1
        if self._loop is not conn.loop:         # one sweep per event loop (tests run several in turn)
            self._loop, self._sweeping = conn.loop, None
        if self._sweeping is None:
            self._sweeping = conn.loop.call_later(self._period(), self._sweep)
        return True

    def _quietest(self) -> _Gate | None:
        """The connection whose idle time or request began longest ago (the front of either queue)."""
        fronts = []
        for queue, timeout in ((self.idle, self.limits.idle), (self.reading, self.limits.read)):
            if queue:
                conn, deadline = next(iter(queue.items()))
                fronts.append((deadline - timeout, conn))
        return min(fronts, key=lambda f: f[0])[1] if fronts else None

    def forget(self, conn: _Gate) -> None:
        self.idle.pop(conn, None)
        self.reading.pop(conn, None)
        self.count -= 1

    def _period(self) -> float:
        return min(1.0, max(0.05, min(self.limits.idle, self.limits.read) / 20))

    def _sweep(self) -> None:
        """Close the connections past their deadline, SWEEP_BATCH at a time; then come again."""
        now, closed = time.monotonic(), 0
        for queue in (self.reading, self.idle):
            while queue and closed < SWEEP_BATCH:
                conn, deadline = next(iter(queue.items()))
                if deadline > now:
                    break
                queue.popitem(last=False)
                conn.expired(queue is self.reading)
                closed += 1
        loop = self._loop
        if closed >= SWEEP_BATCH:
            self._sweeping = loop.call_soon(self._sweep)       # more are due: after what else is ready
        elif self.count > 0:
            self._sweeping = loop.call_later(self._period(), self._sweep)
        else:
            self._sweeping = None


class _Gate:
    """One connection from its accept: until its request head is whole it is only this (a buffer, a phase, a
    place in its port's queues); then uvicorn's protocol (GuardedProtocol) is made and takes the transport."""

    __slots__ = ("factory", "loop", "transport", "phase", "buffer", "http", "lost", "client", "__weakref__")
    port: _Port

    def __init__(self, factory, loop):
        self.factory, self.loop = factory, loop
        self.transport = self.http = None
        self.phase, self.buffer, self.lost = IDLE, None, False
        self.client = _UNSEEN         # the client certificate's subject (identity.Peer) or None, on first request

    # deadlines
    def idle(self) -> None:
        self.phase = IDLE
        port = self.port
        port.reading.pop(self, None)
        port.idle.pop(self, None)
        port.idle[self] = time.monotonic() + port.limits.idle

    def reading(self, restart: bool = False) -> None:
        """A request is under way: its read deadline starts now, unless it already runs."""
        port = self.port
        if self.phase != READING or restart or self not in port.reading:
            port.idle.pop(self, None)
            port.reading.pop(self, None)
            port.reading[self] = time.monotonic() + port.limits.read
        self.phase = READING

    def answering(self) -> None:
        self.phase = ANSWERING
        self.port.idle.pop(self, None)
        self.port.reading.pop(self, None)

    def pause(self) -> None:
        """The server, not the client, makes this request wait: its read deadline stops."""
        self.port.reading.pop(self, None)

    def expired(self, reading: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        cycle = self.http.cycle if self.http is not None else None
        if reading and (cycle is None or cycle.response_complete) \
                and not (self.http is not None and self.http.flow is not None and self.http.flow.write_paused):
            limit = self.port.limits.read
            body = b'{"error":"request not received whole within %s s"}' % (b"%g" % limit)
            self.transport.write(_TIMED_OUT % (len(body), body))
        self.close()

    def close(self) -> None:
        """Close the connection; it stops counting against the cap at once."""
        self._uncount()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # the transport's protocol until the request head is whole
    def connection_made(self, transport) -> None:
        self.transport = transport
        if not self.port.admit(self):
            self.lost = True
            log.warning("a connection to port %s closed at once: all %d connections the port holds are being "
                        "answered", (transport.get_extra_info("sockname") or ("?", "?"))[1], self.port.limits.cap)
            transport.close()
            return
        self.factory.connections.add(self)      # uvicorn's shutdown closes it
        self.idle()

    def data_received(self, data: bytes) -> None:
        if self.buffer is None:
            self.buffer = bytearray(data)
            seen = 0
        else:
            seen = len(self.buffer)
            self.buffer += data
        if self.phase != READING:
            self.reading()
        self._hand_over_if_whole(max(0, seen - 3))

    def _hand_over_if_whole(self, start: int) -> None:
        buf = self.buffer
        if buf.find(_END_OF_HEAD, start) < 0 and len(buf) < MAX_HEAD:
            return
        self.buffer = None
        self.factory.connections.discard(self)
        http = self.http = self.factory.make(self)
        self.transport.set_protocol(http)
        self.transport = OneSend(self.transport, self.loop)     # (the gate's 408 and close go through it too)
        http.connection_made(self.transport)
        http.data_received(bytes(buf))

    def eof_received(self) -> bool | None:
        return None                             # the transport closes; connection_lost forgets it

    def connection_lost(self, exc) -> None:
        self._lost()

    def _lost(self) -> None:
        self._uncount()
        self.factory.connections.discard(self)

    def _uncount(self) -> None:
        if not self.lost:
            self.lost = True
            self.port.forget(self)

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: a connection with no request under way is closed."""
        self.close()


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol for a connection whose request head is whole: its idle and read deadlines
    are its gate's (the module docstring)."""

    gate: _Gate
    _in_message = False

    def connection_lost(self, exc) -> None:
        self.gate._lost()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True
        gate = self.gate
        if gate.client is _UNSEEN:      # once per connection: the subject the TLS handshake verified, if any
            gate.client = peer_of(self.transport)
        self.scope["extensions"] = {**self.scope.get("extensions", {}), "quotient.connection": gate,
                                    "quotient.client": gate.client}
        if self.gate.phase == IDLE:
            self.gate.reading()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_message = False
        if self.gate.phase == READING:
            self.gate.answering()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._unset_keepalive_if_required()     # uvicorn's own keep-alive timer: ours replaces it
        if self.transport.is_closing():
            return
        if self._in_message:                    # the next request has begun (pipelined), or this one's body is
            self.gate.reading(restart=True)     # still coming after an early answer
        elif self.cycle is not None and not self.cycle.response_complete:
            self.gate.answering()               # a pipelined request started
        else:
            self.gate.idle()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.gate.phase == ANSWERING:        # a client that does not read its answer is not waited for
            self.gate.reading(restart=True)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.gate.phase == READING and self.cycle is not None and not self.cycle.response_complete:
            self.gate.answering()


class OneSend:
    """The transport uvicorn answers on, its writes of one turn of the event loop sent together: uvicorn writes an
    answer's head and its body apart, so each answer cost two system calls, one of them a few bytes (issue 32: a
    tenth of Quotient's time under Kueue's scale test went to them). What is written leaves in one write, in order,
    once the callbacks already queued in this turn have run (call_soon); closing sends it first."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport, loop: asyncio.AbstractEventLoop):
        self._transport, self._loop, self._held = transport, loop, []

    def write(self, data: bytes) -> None:
        if not self._held:
            self._loop.call_soon(self._send)
        self._held.append(data)

    def writelines(self, lines) -> None:
        for data in lines:
            self.write(data)

    def _send(self) -> None:
        held, self._held = self._held, []
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self._send()
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._held))

    def __getattr__(self, name: str):
        return getattr(self._transport, name)


class _Factory:
    """What uvicorn calls per accepted connection (its http protocol class): a gate, nothing more."""

    def __init__(self, port: _Port):
        self.port = port
        self.protocol = type("GuardedProtocol", (GuardedProtocol,), {})
        self.gate = type("_Gate", (_Gate,), {"port": port, "__slots__": ()})

    def __call__(self, config, server_state, app_state, _loop=None):
        self.config, self.server_state, self.app_state = config, server_state, app_state
        self.connections = server_state.connections
        return self.gate(self, _loop or asyncio.get_running_loop())

    def retire(self) -> int:
        """Close each of this port's connections once no answer is under way on it (at once for idle ones), as
        uvicorn's graceful shutdown does: their client certificates were verified by a client CA since replaced
        (app/api/certs.py). Returns how many there were."""
        held = list(getattr(self, "connections", ()))
        for conn in held:
            conn.shutdown()
        return len(held)

    def make(self, gate: _Gate) -> GuardedProtocol:
        http = self.protocol(config=self.config, server_state=self.server_state, app_state=self.app_state,
                             _loop=gate.loop)
        http.gate = gate
        return http


def guarded(limits: ConnectionLimits) -> _Factory:
    """The protocol factory of one port: its own cap and connections."""
    return _Factory(_Port(limits))


def waiting_on_server(scope):
    """`with waiting_on_server(scope):` around a wait the server imposes (the one-large-body slot): the
    request's read deadline stops meanwhile and starts afresh after."""
    return _Paused(scope.get("extensions", {}).get("quotient.connection"))


class _Paused:
    __slots__ = ("gate",)

    def __init__(self, gate):
        self.gate = gate

    def __enter__(self):
        if self.gate is not None and self.gate.phase == READING:
            self.gate.pause()
        return self

    def __exit__(self, *exc):
        if self.gate is not None and self.gate.phase == READING and not self.gate.lost:
            self.gate.reading(restart=True)
        return False

def raise_file_limit(ports: int, limits: ConnectionLimits) -> ConnectionLimits:
    """Raise the soft limit on open files to the hard one (Python starts at the soft one, often 1,024), so each
    of `ports` ports can hold its cap; a cap that still does not fit is lowered, with a warning."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, ports * limits.cap + RESERVED_FILES)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, wanted, e)
    fits = max(16, (soft - RESERVED_FILES) // max(1, ports))
    if fits < limits.cap:
        log.warning("open-file limit %d holds %d connections per port on %d ports, not --max-connections %d: "
                    "raise the container's nofile limit", soft, fits, ports, limits.cap)
        return ConnectionLimits(limits.idle, limits.read, fits)
    return limits
