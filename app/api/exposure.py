"""Who may reach what: the verbs and the one debug route that changes state are served only to
callers Quotient can trust, a process on the same host (loopback) or, with --tls-client-ca, one holding a
client certificate of the route's role (app/api/identity.py).

Quotient holds cluster-wide pods/binding and pods/eviction, so a caller of `bind` can place any
pending pod on any node, and a caller of `filter` can make Quotient learn and reserve quota for
pods that do not exist. `quotient serve` therefore refuses a non-loopback --host without client
certificates unless the admin says so with INSECURE_FLAG.
"""
from __future__ import annotations

import functools
import ipaddress
import logging

import orjson

from .limits import answer

log = logging.getLogger("quotient.api")
INSECURE_FLAG = "--insecure-no-client-auth"


class ExposureError(ValueError):
    """`quotient serve` would let any caller that reaches the port change state."""


@functools.lru_cache(maxsize=256)
def is_loopback(host: str) -> bool:
    """(Asked of every request's Host: parsed once per name.)"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, client_ca: str | None, insecure: bool) -> None:
    """Raise ExposureError for a --host others can reach without client certificates, unless `insecure`
    (then a warning is logged: the admin has chosen another fence, a NetworkPolicy or a private network)."""
    if is_loopback(host) or client_ca:
        return
    if insecure:
        log.warning("serving on %s without client certificates (%s): anyone who can reach this port can bind "
                    "pods, reserve quota and reactivate workloads; only a NetworkPolicy or the network stands "
                    "in their way", host, INSECURE_FLAG)
        return
    raise ExposureError(
        f"--host {host} is not a loopback address and no --tls-client-ca verifies callers: anyone who can reach "
        "the port could bind any pending pod to any node, make Quotient reserve quota for pods that do not exist "
        "and reactivate workloads. Serve on 127.0.0.1 beside kube-scheduler, or add --tls-cert, --tls-key and "
        f"--tls-client-ca (deploy/README.md, TLS), or pass {INSECURE_FLAG} to allow it anyway")


def check_conversion_exposure(host: str, port: int, conversion_port: int, cert: str | None) -> None:
    """Raise ExposureError for a --conversion-port that cannot serve kube-apiserver safely. It needs no client
    certificates (POST /convert reads and changes no state), but HTTPS beyond loopback: kube-apiserver calls
    webhooks over HTTPS only, and the objects it sends would otherwise cross the network in clear."""
    if conversion_port == port:
        raise ExposureError(f"--conversion-port {conversion_port} is --port: the conversion webhook needs a port "
                            "of its own, one that asks for no client certificate")
    if cert is None and not is_loopback(host):
        raise ExposureError(f"--conversion-port on --host {host} needs --tls-cert and --tls-key: kube-apiserver "
                            "calls conversion webhooks over HTTPS only (deploy/README.md, TLS); without them, "
                            "serve on 127.0.0.1")


def trusted_caller(scope, clients_verified: bool) -> bool:
    """A request that may change state: it came over loopback, or the server verifies client certificates (then
    the Authorizer in front, app/api/identity.py, has let through only a certificate of role admin)."""
    if clients_verified:
        return True
    client = scope.get("client")
    return bool(client) and is_loopback(str(client[0]))


def check_view_exposure(view_host: str, view_port: int, ports: tuple[int | None, ...], cert: str | None) -> None:
    """Raise ExposureError for a --view-port that would collide with another port, or show pods, queues and
    decisions in clear beyond the host: off loopback it needs the serving certificate. No client certificate
    is asked for there (that is its point: kubectl port-forward or a browser), and nothing there changes state."""
    if view_port in ports:
        raise ExposureError(f"--view-port {view_port} is already taken by --port or --conversion-port")
    if cert is None and not is_loopback(view_host):
        raise ExposureError(f"--view-port on --view-host {view_host} needs --tls-cert and --tls-key: it would "
                            "show pods, queues and decisions in clear to the network; without them, serve it on "
                            "127.0.0.1 and reach it with kubectl port-forward")


def host_named(scope) -> str | None:
    """The host a request is addressed to (its Host header without the port), or None without one."""
    for name, value in scope.get("headers", ()):
        if name == b"host":
            host = value.decode("latin-1")
            if host.startswith("["):
                return host[:host.find("]") + 1]
            return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return None


def foreign_host(scope) -> str | None:
    """The host an HTTP request names when it is not a loopback name (None when it is, or names none)."""
    if scope["type"] != "http":
        return None
    host = host_named(scope)
    return host if host is not None and not is_loopback(host) else None


async def refuse_host(send, host: str) -> None:
    await answer(send, 400, orjson.dumps({"error": (
        f"this Quotient listens on a loopback address and answers only requests addressed to localhost, "
        f"127.0.0.1 or [::1], not to {host[:100]!r} (a web page could otherwise reach it by DNS rebinding); "
        "call it by one of those names")}))


class LoopbackHostOnly:
    """For a server on a loopback address: answer only requests addressed to a loopback name (localhost,
    127.0.0.1, [::1]). A web page the admin opens can point its own domain at 127.0.0.1 (DNS rebinding) and
    reach the port, but its requests still name that domain: refused, so it can neither read /ui and /debug
    nor call the verbs. kube-scheduler beside Quotient calls http://127.0.0.1:8888 or http://localhost:8888."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        host = foreign_host(scope)
        if host is not None:
            return await refuse_host(send, host)
        await self.app(scope, receive, send)
