"""Each caller limited to its job: on a main port that verifies client certificates (--tls-client-ca), the subject
of the caller's certificate (CN, O) has roles (the Configuration's clientIdentities), and each route needs one.

    scheduler  the verbs: POST <pathPrefix>/{filter,prioritize,preempt,bind}
    viewer     GET /debug/*, /ui*, POST /debug/explain (and POST /convert and /mutate-pods, the webhooks, which
               read and change nothing)
    admin      what viewer may, and every write: POST /debug/workloads/{key}/reactivate
    metrics    GET /metrics

/livez, /readyz, /healthz, /version and / answer anyone, with or without a certificate (as kube-scheduler's and
kube-apiserver's health routes do), so probes are plain httpGet. Anything else answers 403 with a reason an
admin can act on, counted in quotient_forbidden_requests_total{role,route}: role "anonymous" without a
certificate, "unmapped" for one no entry matches; route is the route's template, never the raw path.

The verbs pay one dict lookup (the path's route) and a bit test: the caller's roles are worked out once per
connection (app/api/connections.py puts the verified subject in scope["extensions"]["quotient.client"]).
Without --tls-client-ca there are no identities and no Authorizer: every route is served as before.
"""
from __future__ import annotations

import logging
import ssl
import time

import orjson

from ..config import DEFAULT_CLIENT_IDENTITIES, ROLES, ClientIdentity
from .certs import ExpiryWarnings

BIT = {role: 1 << i for i, role in enumerate(ROLES)}
SCHEDULER, VIEWER, ADMIN, METRICS = (BIT[r] for r in ROLES)
READS = VIEWER | ADMIN
PUBLIC = 0                       # a route anyone may call
ANY_ROLE = (1 << len(ROLES)) - 1  # a path no route serves: any mapped certificate learns so (404), others 403
_NONE: dict = {}
log = logging.getLogger("quotient.tls")
PUBLIC_PATHS = ("/livez", "/readyz", "/healthz", "/version", "/")


class Peer:
    """The verified subject of one connection's client certificate; its roles are cached here by the Authorizer
    on the connection's first request."""

    __slots__ = ("common_name", "organizations", "not_after", "mask", "label")

    def __init__(self, common_name: str, organizations: tuple[str, ...], not_after: float = 0.0):
        self.common_name, self.organizations, self.not_after = common_name, organizations, not_after
        self.mask: int | None = None
        self.label = ""

    def __str__(self) -> str:
        orgs = "".join(f", O={o}" for o in self.organizations)
        return f"CN={self.common_name}{orgs}" if self.common_name or not orgs else orgs[2:]


def peer_of(transport) -> Peer | None:
    """The subject of the certificate the client presented on this TLS transport (verified against the client CA
    by the handshake), or None: plain HTTP, or no certificate."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    try:
        cert = ssl_object.getpeercert()
    except ValueError:          # no handshake done: nothing was verified
        return None
    if not cert:
        return None
    cn, orgs = "", []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":     # the last CN, as Kubernetes' x509 authenticator (Go's pkix.Name) reads it
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    try:
        not_after = ssl.cert_time_to_seconds(cert["notAfter"])
    except (KeyError, ValueError):
        not_after = 0.0
    return Peer(cn, tuple(orgs), not_after)


class Route:
    __slots__ = ("template", "needs")

    def __init__(self, template: str, needs: int):
        self.template, self.needs = template, needs


def role_names(mask: int) -> str:
    return " or ".join(r for r in ROLES if mask & BIT[r])


class Authorizer:
    """The 403 for a request whose caller lacks the route's role; None lets the rest through."""

    def __init__(self, identities: tuple[ClientIdentity, ...] = DEFAULT_CLIENT_IDENTITIES, prefix: str = "",
                 forbidden=None, client_expiry=None, clock=time.time):
        self.identities = identities
        self.forbidden = forbidden      # Metrics.forbidden: quotient_forbidden_requests_total{role,route}
        self.client_expiry = client_expiry  # Metrics.client_certificate_expiry: {role} -> notAfter last presented
        self.warnings = ExpiryWarnings(clock)
        routes = {p: Route(p, PUBLIC) for p in PUBLIC_PATHS}
        routes.update({f"{prefix}/{verb}": Route(f"{prefix}/{verb}", SCHEDULER)
                       for verb in ("filter", "prioritize", "preempt", "bind")})
        routes["/metrics"] = Route("/metrics", METRICS)
        for path in ("/debug/queues", "/debug/decisions", "/debug/workloads", "/debug/explain", "/ui", "/ui/",
                     "/ui/decisions", "/ui/decisions/rows", "/convert", "/mutate-pods"):
            routes[path] = Route(path, READS)
        self.routes = routes
        self.reactivate = Route("/debug/workloads/{key}/reactivate", ADMIN)
        self.patterns = (("/debug/queues/", Route("/debug/queues/{name}", READS)),
                         ("/debug/pods/", Route("/debug/pods/{namespace}/{name}", READS)),
                         ("/ui/queues/", Route("/ui/queues/{name}", READS)),
                         ("/ui/pods/", Route("/ui/pods/{namespace}/{name}", READS)),
                         ("/ui/static/", Route("/ui/static/{name}", READS)),
                         ("/ui/", Route("/ui/*", READS)),
                         ("/debug/", Route("/debug/*", READS)))
        self.other = Route("other", ANY_ROLE)

    def route(self, path: str) -> Route:
        found = self.routes.get(path)
        if found is not None:
            return found
        if path.startswith("/debug/workloads/") and path.endswith("/reactivate"):
            return self.reactivate
        for start, route in self.patterns:
            if path.startswith(start):
                return route
        return self.other

    def grant(self, peer: Peer) -> int:
        """The roles of a certificate subject (a bit mask), cached on its connection's Peer."""
        mask, roles = 0, []
        for rule in self.identities:
            if (not rule.common_name or rule.common_name == peer.common_name) \
                    and (not rule.organization or rule.organization in peer.organizations):
                if not mask & BIT[rule.role]:
                    roles.append(rule.role)
                mask |= BIT[rule.role]
        peer.label = "+".join(r for r in ROLES if r in roles) or "unmapped"
        peer.mask = mask
        if peer.not_after and mask:
            self.presented(peer)
        return mask

    def presented(self, peer: Peer) -> None:
        """A caller's certificate expiry, seen once per connection: Quotient reloads its own certificates, but
        kube-scheduler reads its extender client certificate once at start, so a renewed Secret does not help
        until it restarts. The gauge shows the certificate each role last presented; a warning from 30 days out."""
        if self.client_expiry is not None:
            self.client_expiry.labels(peer.label).set(peer.not_after)
        when = self.warnings.due(peer.label, peer.not_after)
        if when is not None:
            log.warning("the client certificate %s (role %s) %s: give its caller a renewed one; kube-scheduler "
                        "reads its extender certificate at start, so restart it after the Secret or file is renewed",
                        peer, peer.label, when)

    def __call__(self, scope) -> bytes | None:
        """None when the caller may call the request's route, else the 403 body (the refusal counted)."""
        path = scope["path"]
        route = self.routes.get(path) or self.route(path)
        needs = route.needs
        if not needs:                                   # PUBLIC
            return None
        peer = scope.get("extensions", _NONE).get("quotient.client")
        if peer is not None:
            mask = peer.mask
            if (mask if mask is not None else self.grant(peer)) & needs:
                return None
        return self.refusal(scope, route, peer)

    def refusal(self, scope, route: Route, peer: Peer | None) -> bytes:
        needs = role_names(route.needs) if route.needs != ANY_ROLE else "any role"
        call = f"{scope.get('method', 'GET')} {route.template}"
        if peer is None:
            role = "anonymous"
            reason = (f"{call} needs a client certificate with role {needs}, and this caller presented none: call "
                      "with a certificate the --tls-client-ca signed whose subject the Configuration's "
                      "clientIdentities maps to that role (only /livez, /readyz, /healthz, /version and / answer "
                      "without one)")
        elif not peer.mask:
            role = "unmapped"
            reason = (f"the client certificate {peer} matches no entry of the Configuration's clientIdentities, so "
                      f"it has no role; {call} needs role {needs}: add an entry for its CN or O, or call with a "
                      "certificate issued for that role")
        else:
            role = peer.label
            has = f"roles {role.replace('+', ', ')}" if "+" in role else f"role {role}"
            reason = (f"the client certificate {peer} has {has}; {call} needs role "
                      f"{needs}: call with a certificate of that role, or map this one to it in the Configuration's "
                      "clientIdentities")
        if self.forbidden is not None:
            self.forbidden.labels(role, route.template).inc()
        return orjson.dumps({"error": reason})
