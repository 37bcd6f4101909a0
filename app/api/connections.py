"""Connections are bounded on every port: no caller keeps a connection, or a port's share of them, by sending
nothing or sending slowly.

uvicorn starts its keep-alive timer only after a first response, so a connection that sends nothing, or half a
request, was held for ever; and its limit_concurrency answers 503 to everyone once such connections fill it.
Each port's server speaks HTTP through a protocol made by `guarded(limits)`, which adds:

- an idle timeout (`idle`): a connection with no request under way (before its first byte, or between two
  requests on a kept-alive one) is closed;
- a read timeout (`read`): a request must arrive whole, headers and body, within this many seconds of its
  first byte, else 408 (when nothing is answering it yet) and the connection is closed; an answer the client
  does not read (writing paused) is dropped after as long;
- a cap (`cap`) on the connections a port holds at once. At the cap a new connection is not refused: the port
  closes the connection that has been quiet longest among those with no request being answered (idle ones,
  or ones still sending a request), so connections that send nothing cannot keep out the ones that call.
  Each port has its own cap: the conversion webhook, the view port and the verbs cannot starve each other.

A connection that waits for its TLS handshake is not yet seen here: the event loop closes it after 60 s.
"""
from __future__ import annotations

import collections
import logging
import resource
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("quotient.api")

IDLE_TIMEOUT = 30.0     # seconds; kube-scheduler's Go client reopens a closed keep-alive connection by itself
READ_TIMEOUT = 10.0     # seconds for a whole request; kube-apiserver sends even a 32 MiB review in well under one
MAX_CONNECTIONS = 4096  # per port: 1,000 idle and 1,000 half-sent ones fit with room, so none need closing early
RESERVED_FILES = 256    # descriptors kept for the API client's connections, the worker's pipes, logs


@dataclass(frozen=True)
class ConnectionLimits:
    idle: float = IDLE_TIMEOUT
    read: float = READ_TIMEOUT
    cap: int = MAX_CONNECTIONS


IDLE, READING, ANSWERING = "idle", "reading", "answering"
_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
              b"content-length: %d\r\n\r\n%s")


class _Port:
    """The connections one port holds, quietest first."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self.held: collections.OrderedDict[GuardedProtocol, None] = collections.OrderedDict()
        self.evicted = 0

    def admit(self, conn: GuardedProtocol) -> bool:
        """Hold `conn`; at the cap, close the quietest connection that no request is being answered on.
        False when every held connection is answering (then `conn` is closed instead)."""
        if len(self.held) >= self.limits.cap:
            victim = next((c for c in self.held if c._phase != ANSWERING), None)
            if victim is None:
                return False
            self.held.pop(victim)
            self.evicted += 1
            victim._close()
        self.held[conn] = None
        return True

    def touch(self, conn: GuardedProtocol) -> None:
        if conn in self.held:
            self.held.move_to_end(conn)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the idle and read timeouts and the per-port cap (the module docstring)."""

    port: _Port

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._phase = IDLE
        self._timer = None
        self._in_message = False

    def _arm(self, seconds: float | None, why: str | None = None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(seconds, self._expired, why) if seconds is not None else None

    def _expired(self, why: str | None) -> None:
        self._timer = None
        if self.transport is None or self.transport.is_closing():
            return
        if why and (self.cycle is None or self.cycle.response_complete):    # nothing answers it: say why
            body = b'{"error":"%s"}' % why.encode()
            self.transport.write(_TIMED_OUT % (len(body), body))
        self._close()

    def _close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if not self.port.admit(self):
            log.warning("a connection to %s:%s closed at once: all %d connections the port holds are being answered",
                        *(self.server or ("?", 0)), self.port.limits.cap)
            self._close()
            return
        self._arm(self.port.limits.idle)

    def connection_lost(self, exc) -> None:
        self.port.held.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True
        if self._phase == IDLE:
            self._phase = READING
            self._arm(self.port.limits.read, f"request not received whole within {self.port.limits.read:g} s")
        self.port.touch(self)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_message = False
        if self._phase == READING:
            self._phase = ANSWERING
            self._arm(None)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._unset_keepalive_if_required()     # uvicorn's own keep-alive timer: ours replaces it
        if self.transport.is_closing():
            return
        self.port.touch(self)
        if self._in_message:                    # the next request has begun (pipelined), or this one's body is
            self._phase = READING               # still coming after an early answer
            self._arm(self.port.limits.read, f"request not received whole within {self.port.limits.read:g} s")
        elif self.cycle is not None and not self.cycle.response_complete:
            self._phase = ANSWERING             # a pipelined request started
            self._arm(None)
        else:
            self._phase = IDLE
            self._arm(self.port.limits.idle)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._phase == ANSWERING:            # a client that does not read its answer is not waited for
            self._arm(self.port.limits.read)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._phase == ANSWERING:
            self._arm(None)


def guarded(limits: ConnectionLimits) -> type[GuardedProtocol]:
    """The protocol class of one port: its own cap and connections."""
    return type("GuardedProtocol", (GuardedProtocol,), {"port": _Port(limits)})


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
