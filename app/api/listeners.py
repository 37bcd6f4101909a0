"""The uvicorn servers of `quotient serve`: the main one (verbs, /ui, /debug, health), with --conversion-port
the conversion webhook's own, and with --view-port one for /ui and /debug alone; all in one process on one
event loop.

The conversion port exists because kube-apiserver presents no client certificate to a conversion webhook
while the main port requires one (--tls-client-ca): it serves only POST /convert (app/api/convert.py),
which reads and changes no state, with the same serving certificate and no client certificates.
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl

import uvicorn

from .certs import ReloadingConfig, ServingTLS, TLSCollector
from .connections import ConnectionLimits, guarded
from .convert import ConvertApp

# Each port holds at most limits.cap connections, closes idle and slow ones, and at the cap makes room by closing
# its quietest idle one rather than refusing (app/api/connections.py): neither port can starve another. What a
# port's requests hold in memory is bounded by the bodies: one large ConversionReview or verb body read at a
# time (app/api/limits.py, LargeBodies).


class PortError(RuntimeError):
    """A port cannot be listened on (taken, not allowed); the message names it."""


class _Listening(uvicorn.Server):
    """A server on the socket listen() bound before anything started (no lease taken, no watch opened for a
    port that cannot be had); `announce` is called once it accepts connections (the "serving ..." line)."""

    bound: socket.socket | None = None
    flag = "--port"
    announce = None

    async def startup(self, sockets=None) -> None:
        given = sockets is None and self.bound is not None
        await super().startup(sockets=[self.bound] if given else sockets)
        if self.started and given:
            self._log_started_message([self.bound])     # uvicorn's own line, which it skips for given sockets
        if self.started and self.announce is not None:
            self.announce()


def listen(*servers: uvicorn.Server | None) -> None:
    """Bind each server's host and port now, as uvicorn would (SO_REUSEADDR, IPv6 for an address with a colon);
    PortError, with every socket bound so far closed, when one cannot be bound."""
    done = []
    for srv in servers:
        if srv is None:
            continue
        host, port = srv.config.host, srv.config.port
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            sock.close()
            for other in done:
                other.bound.close()
                other.bound = None
            reason = e.strerror or str(e)
            raise PortError(f"cannot listen on {host}:{port} ({srv.flag}): {reason[:1].lower() + reason[1:]}") \
                from None
        srv.bound = sock
        done.append(srv)


class _Reloading(_Listening):
    """A server whose certificates are reloaded while it serves (app/api/certs.py)."""

    async def serve(self, sockets=None) -> None:
        tls = getattr(self.config, "tls", None)
        watching = asyncio.create_task(tls.watch()) if tls is not None else None
        try:
            await super().serve(sockets)
        finally:
            if watching is not None:
                watching.cancel()


class _Main(_Reloading):
    """The main server: it takes SIGINT and SIGTERM and stops, but does not raise the signal again once stopped
    (uvicorn does, and the default handler would then kill the process before serve_live's cleanup: the
    leader's Lease released for a quick hand-over, the watches closed)."""

    @contextlib.contextmanager
    def capture_signals(self):
        with super().capture_signals():
            yield
            self._captured_signals.clear()      # uvicorn raises these again as its context closes


def server(app, host: str, port: int, log_level: str, tls: dict, cls=_Main,
           limits: ConnectionLimits = ConnectionLimits(), **options) -> uvicorn.Server:
    """A uvicorn server as Quotient runs them: uvicorn's lines through the root handler (log_config=None),
    no access log, no proxy headers (create_app adds their middleware where a route needs them), connections
    bounded by `limits` (app/api/connections.py)."""
    config = ReloadingConfig(app, host=host, port=port, log_level=log_level, access_log=False, proxy_headers=False,
                             log_config=None, http=guarded(limits), **tls, **options)
    if tls.get("ssl_certfile"):     # the port's own SSLContext, reloaded when its files change (app/api/certs.py)
        config.tls = ServingTLS(port, tls["ssl_certfile"], tls["ssl_keyfile"], tls.get("ssl_ca_certs"),
                                tls.get("ssl_cert_reqs", ssl.CERT_NONE))
        config.tls.retire = config.http.retire
    return cls(config)


class _Beside(_Reloading):
    """A server beside the main one: the main one takes SIGINT and SIGTERM (two would replace each other's
    handlers), and serve_all stops this one when the main one stops."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


def conversion_server(host: str, port: int, log_level: str, tls: dict,
                      limits: ConnectionLimits = ConnectionLimits(), gate_pods: bool = False) -> uvicorn.Server:
    """The conversion (webhook) port: /convert and /mutate-pods only (gate_pods: the Configuration's), `tls`
    without client certificates."""
    srv = server(ConvertApp(gate_pods), host, port, log_level, tls, cls=_Beside, limits=limits, lifespan="off")
    srv.flag = "--conversion-port"
    return srv


def view_server(scheduler, host: str, port: int, log_level: str, cert: str | None, key: str | None,
                limits: ConnectionLimits = ConnectionLimits()) -> uvicorn.Server:
    """The view port: /ui and /debug (app.api.app.create_view_app), never with client certificates. On loopback,
    where kubectl port-forward arrives through the API server's TLS, plain HTTP (a browser needs no certificate
    exception) and only requests addressed to a loopback name; elsewhere HTTPS with the serving certificate
    (check_view_exposure made sure there is one)."""
    from .app import create_view_app
    from .exposure import is_loopback
    from .tls import uvicorn_tls_options

    loopback = is_loopback(host)
    tls = {} if loopback else uvicorn_tls_options(cert, key, None)
    srv = server(create_view_app(scheduler, loopback), host, port, log_level, tls, cls=_Beside, limits=limits,
                 lifespan="off")
    srv.flag = "--view-port"
    return srv


async def serve_all(main: uvicorn.Server, *beside: uvicorn.Server | None) -> None:
    """Serve until the main server stops (a signal), or any one fails to start; then stop them all."""
    servers = [main, *(b for b in beside if b is not None)]
    export_tls(main, servers)
    if len(servers) == 1:
        return await main.serve()
    tasks = [asyncio.create_task(s.serve()) for s in servers]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for s in servers:
            s.should_exit = True
        await asyncio.gather(*tasks)


def export_tls(main: uvicorn.Server, servers: list[uvicorn.Server]) -> None:
    """Every port's certificate expiry and reload errors on the main application's /metrics."""
    ports = [s.config.tls for s in servers if getattr(s.config, "tls", None) is not None]
    metrics = getattr(getattr(main.config.app, "state", None), "metrics", None)
    if ports and metrics is not None:
        metrics.registry.register(TLSCollector(ports))
