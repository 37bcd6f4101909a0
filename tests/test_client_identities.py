"""clientIdentities in the Configuration (app/config.py) and the Authorizer's reading of it (app/api/identity.py),
without TLS: bad entries are refused by field, a certificate gets the union of the roles of the entries it
matches, and refusals are counted by role and route template (never the raw path). The identity matrix over real
TLS is tests/test_identities.py."""
from __future__ import annotations

import pytest

from app.api.identity import Authorizer, Peer
from app.config import DEFAULT_CLIENT_IDENTITIES, ClientIdentity, ConfigError, decode_configuration
from app.observe.metrics import Metrics


def _config(entries):
    return decode_configuration({"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration",
                                 "clientIdentities": entries})


def test_without_client_identities_the_default_map_applies():
    assert decode_configuration({}).client_identities == DEFAULT_CLIENT_IDENTITIES
    assert {(c.role, c.common_name) for c in DEFAULT_CLIENT_IDENTITIES} == {
        ("scheduler", "quotient-scheduler"), ("admin", "quotient-admin"), ("viewer", "quotient-viewer"),
        ("metrics", "quotient-metrics")}


def test_entries_are_read():
    cfg = _config([{"role": "scheduler", "commonName": "system:kube-scheduler"},
                   {"role": "viewer", "organization": "sre"}])
    assert cfg.client_identities == (ClientIdentity("scheduler", "system:kube-scheduler"),
                                      ClientIdentity("viewer", "", "sre"))


@pytest.mark.parametrize("entries, message", [
    ([], "non-empty list"),
    ("admin", "non-empty list"),
    ([{"role": "root", "commonName": "x"}], "clientIdentities[0].role 'root' is not one of"),
    ([{"role": "admin"}], "names neither a commonName nor an organization"),
    ([{"role": "admin", "commonName": "x", "groups": ["a"]}], "may hold role, commonName and organization"),
    ([{"role": "admin", "commonName": 3}], "must be strings"),
])
def test_bad_entries_are_refused_by_field(entries, message):
    with pytest.raises(ConfigError) as e:
        _config(entries)
    assert message in str(e.value)


def test_a_certificate_gets_the_union_of_the_roles_it_matches():
    authorize = Authorizer(_config([{"role": "viewer", "organization": "sre"},
                                    {"role": "metrics", "commonName": "alice", "organization": "sre"},
                                    {"role": "admin", "commonName": "alice", "organization": "ops"}]).client_identities)
    alice = Peer("alice", ("sre",))

    def call(path, peer, method="GET"):
        return authorize({"path": path, "method": method, "extensions": {"quotient.client": peer}})
    assert call("/debug/queues", alice) is None and call("/metrics", alice) is None
    assert b"has roles viewer, metrics; POST /debug/workloads/{key}/reactivate needs role admin" in call("/debug/workloads/a/b/reactivate", alice, "POST")
    assert alice.label == "viewer+metrics"
    assert call("/metrics", Peer("bob", ("sre",))) is not None         # the CN rule needs alice
    assert b"matches no entry" in call("/debug/queues", Peer("alice", ("ops-not",)))


def test_refusals_are_counted_by_role_and_route_template(load_extender):
    metrics = Metrics(load_extender("").state)
    authorize = Authorizer(DEFAULT_CLIENT_IDENTITIES, "/scheduler", metrics.forbidden)
    metrics_cert = Peer("quotient-metrics", ())
    for path in ("/debug/queues/a", "/debug/queues/b", "/scheduler/bind", "/debug/pods/ns/p"):
        assert authorize({"path": path, "method": "GET", "extensions": {"quotient.client": metrics_cert}})
    assert authorize({"path": "/scheduler/filter", "extensions": {}})
    assert authorize({"path": "/nowhere", "extensions": {"quotient.client": Peer("x", ())}})
    assert authorize({"path": "/nowhere", "extensions": {"quotient.client": metrics_cert}}) is None   # a 404
    # with a prefix, /filter is no verb: any mapped certificate is let through to its 404
    assert authorize({"path": "/filter", "extensions": {"quotient.client": Peer("quotient-scheduler", ())}}) is None
    for public in ("/livez", "/readyz", "/healthz", "/version", "/"):
        assert authorize({"path": public, "extensions": {}}) is None
    counted = {(s.labels["role"], s.labels["route"]): s.value for m in metrics.registry.collect()
               if m.name == "quotient_forbidden_requests" for s in m.samples if s.name.endswith("_total")}
    assert counted == {("metrics", "/debug/queues/{name}"): 2, ("metrics", "/scheduler/bind"): 1,
                       ("metrics", "/debug/pods/{namespace}/{name}"): 1, ("anonymous", "/scheduler/filter"): 1,
                       ("unmapped", "other"): 1}


def test_a_callers_certificate_near_expiry_is_shown_and_warned_once_a_day(caplog, load_extender):
    """kube-scheduler reads its extender certificate once: Quotient shows what each role last presented and warns
    from 30 days before it expires, once a day per role, never for an unmapped certificate."""
    now = [1_000_000_000.0]
    metrics = Metrics(load_extender("").state)
    authorize = Authorizer(DEFAULT_CLIENT_IDENTITIES, forbidden=metrics.forbidden,
                           client_expiry=metrics.client_certificate_expiry, clock=lambda: now[0])

    def connect(cn, days_left):
        peer = Peer(cn, (), now[0] + days_left * 86400)
        authorize({"path": "/filter", "method": "POST", "extensions": {"quotient.client": peer}})

    def gauge(role):
        return metrics.registry.get_sample_value("quotient_tls_client_certificate_expiry_timestamp_seconds",
                                                 {"role": role})
    with caplog.at_level("WARNING", logger="quotient.tls"):
        connect("quotient-scheduler", 200)
        assert gauge("scheduler") == now[0] + 200 * 86400 and not caplog.records
        connect("quotient-scheduler", 20)
        connect("quotient-scheduler", 20)           # the same day: one warning
        connect("nobody", 1)                        # no role: neither shown nor warned
        now[0] += 86400
        connect("quotient-scheduler", 19)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and "CN=quotient-scheduler (role scheduler) expires in 20.0 days" in warnings[0]
    assert "restart it" in warnings[0] and gauge("unmapped") is None
