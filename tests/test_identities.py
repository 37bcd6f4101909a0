"""Each caller limited to its job, over real TLS: a `quotient serve --tls-client-ca` with clientIdentities, called
with each role's certificate (and one matched by its organization, one outside the map, none, one of another CA)
on each kind of route: allowed, or 403 with a reason and counted in quotient_forbidden_requests_total.

Certificates are made with the `openssl` command (tests/test_tls.py's helpers); the server is a real
`quotient serve` subprocess on a free 127.0.0.1 port.
"""
from __future__ import annotations

import shutil
import ssl
import subprocess
from collections import Counter
from pathlib import Path

import httpx
import pytest

from test_tls import FILTER_BODY, SNAPSHOT, _ca, _client_context, _issue, _refused, serve_tls

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

CLIENT_EXT = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"

CONFIG = """\
apiVersion: quotient.dev/v1alpha1
kind: Configuration
clientIdentities:
- {role: scheduler, commonName: quotient-scheduler}
- {role: admin, commonName: quotient-admin}
- {role: viewer, commonName: quotient-viewer}
- {role: metrics, commonName: quotient-metrics}
- {role: viewer, organization: sre}
"""

# who -> certificate subject (None: no certificate at all)
CALLERS = {"scheduler": "/CN=quotient-scheduler", "admin": "/CN=quotient-admin", "viewer": "/CN=quotient-viewer",
           "metrics": "/CN=quotient-metrics", "sre": "/O=sre/CN=alice", "unmapped": "/CN=someone-else",
           "anonymous": None}
# the role label each caller's refusals are counted under
LABEL = {"sre": "viewer"}

POD = b"""{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a",
 "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
 "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}"""

READERS = {"viewer", "admin", "sre"}
EVERYONE = set(CALLERS)
# (method, path, body, route template, who may call it)
ROUTES = [
    ("POST", "/filter", FILTER_BODY, "/filter", {"scheduler"}),
    ("POST", "/prioritize", FILTER_BODY, "/prioritize", {"scheduler"}),
    ("POST", "/bind", {"PodName": "nope", "PodNamespace": "team-a", "PodUID": "nope", "Node": "node-1"}, "/bind",
     {"scheduler"}),
    ("GET", "/debug/queues", None, "/debug/queues", READERS),
    ("GET", "/debug/queues/team-a-cq", None, "/debug/queues/{name}", READERS),
    ("GET", "/debug/decisions", None, "/debug/decisions", READERS),
    ("GET", "/ui", None, "/ui", READERS),
    ("POST", "/debug/explain", POD, "/debug/explain", READERS),
    ("POST", "/debug/workloads/team-a/job-1/reactivate", None, "/debug/workloads/{key}/reactivate", {"admin"}),
    ("GET", "/metrics", None, "/metrics", {"metrics"}),
    ("GET", "/livez", None, "/livez", EVERYONE),
    ("GET", "/readyz", None, "/readyz", EVERYONE),
    ("GET", "/healthz", None, "/healthz", EVERYONE),
    ("GET", "/version", None, "/version", EVERYONE),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("identities")
    _ca(d, "ca")
    _issue(d, "server", "/CN=quotient.quotient-system.svc",
           "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for who, subject in CALLERS.items():
        if subject is not None:
            _issue(d, who, subject, CLIENT_EXT)
    _issue(d, "client", "/CN=quotient-scheduler", CLIENT_EXT)      # what serve_tls presents while it waits
    _ca(d, "other-ca")          # the admin's name, signed by a CA the server does not trust
    _issue(d, "impostor", "/CN=quotient-admin", CLIENT_EXT, ca="other-ca")
    (d / "snapshot.yaml").write_text(SNAPSHOT)
    (d / "config.yaml").write_text(CONFIG)
    return d


def _client(pki: Path, who: str | None) -> httpx.Client:
    return httpx.Client(verify=_client_context(pki, who), timeout=10.0, trust_env=False)


def _forbidden_counts(text: str) -> dict[tuple[str, str], float]:
    counts = {}
    for line in text.splitlines():
        if line.startswith("quotient_forbidden_requests_total{"):
            labels, value = line[len("quotient_forbidden_requests_total{"):].rsplit("} ", 1)
            pairs = dict(p.split("=", 1) for p in labels.split('",') if p)
            counts[(pairs["role"].strip('"'), pairs["route"].strip('"'))] = float(value)
    return counts


def test_each_certificate_reaches_exactly_the_routes_of_its_role(pki):
    with serve_tls(pki, "--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key"),
                   "--tls-client-ca", str(pki / "ca.crt"), "--config", str(pki / "config.yaml")) as port:
        url = f"https://127.0.0.1:{port}"
        refused, wrong = Counter(), []
        for who, subject in CALLERS.items():
            with _client(pki, None if subject is None else who) as client:
                for method, path, body, template, allowed in ROUTES:
                    content = body if isinstance(body, bytes) or body is None else None
                    r = client.request(method, url + path, content=content,
                                       json=None if content is not None or body is None else body)
                    if who in allowed:
                        if r.status_code == 403:
                            wrong.append(f"{who} {method} {path}: 403 {r.text}")
                    elif r.status_code != 403:
                        wrong.append(f"{who} {method} {path}: {r.status_code}, not 403: {r.text[:200]}")
                    else:
                        reason = r.json()["error"]
                        assert template in reason and "clientIdentities" in reason, reason
                        refused[(LABEL.get(who, who), template)] += 1
        assert not wrong, "\n".join(wrong)
        # the checks served what the roles allow (not just "not 403")
        with _client(pki, "scheduler") as client:
            assert client.post(url + "/filter", json=FILTER_BODY).json()["NodeNames"] == ["node-1"]
        with _client(pki, "sre") as client:
            assert client.get(url + "/debug/queues").json()["clusterQueues"][0]["name"] == "team-a-cq"
        with _client(pki, "admin") as client:       # served, and no such requeued workload
            assert client.post(url + "/debug/workloads/team-a/job-1/reactivate").status_code == 404
        with _client(pki, "metrics") as client:
            metrics = client.get(url + "/metrics").text
        assert _forbidden_counts(metrics) == dict(refused)
        # when each role's caller's certificate expires, as it presented it (kube-scheduler does not reload it)
        not_after = subprocess.run(["openssl", "x509", "-in", str(pki / "scheduler.crt"), "-noout", "-enddate"],
                                   capture_output=True, text=True, check=True).stdout.strip().split("=", 1)[1]
        line = next(m for m in metrics.splitlines()
                    if m.startswith('quotient_tls_client_certificate_expiry_timestamp_seconds{role="scheduler"}'))
        assert float(line.rsplit(" ", 1)[1]) == ssl.cert_time_to_seconds(not_after)
        # a certificate of another CA does not get through the handshake, whatever its name
        with _client(pki, "impostor") as client:
            assert _refused(lambda: client.get(url + "/livez"))


def test_the_default_map_names_each_caller_by_its_common_name(pki):
    with serve_tls(pki, "--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key"),
                   "--tls-client-ca", str(pki / "ca.crt")) as port:
        url = f"https://127.0.0.1:{port}"
        with _client(pki, "admin") as admin, _client(pki, "sre") as sre, _client(pki, "metrics") as metrics:
            assert admin.post(url + "/bind", json=ROUTES[2][2]).status_code == 403       # the issue's bind
            assert admin.get(url + "/debug/queues").status_code == 200
            assert sre.get(url + "/debug/queues").status_code == 403          # O=sre is mapped only in CONFIG
            assert metrics.get(url + "/metrics").status_code == 200


def test_the_cli_asks_with_the_admin_or_viewer_certificate(pki):
    import os
    import subprocess

    from serving import QUOTIENT_BIN

    with serve_tls(pki, "--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key"),
                   "--tls-client-ca", str(pki / "ca.crt")) as port:
        for who, code in (("admin", 0), ("viewer", 0), ("metrics", 1), (None, 1)):
            env = {**os.environ, "QUOTIENT_SERVER": f"https://127.0.0.1:{port}", "QUOTIENT_CA": str(pki / "ca.crt")}
            if who is not None:
                env.update(QUOTIENT_CERT=str(pki / f"{who}.crt"), QUOTIENT_KEY=str(pki / f"{who}.key"))
            else:
                env = {k: v for k, v in env.items() if k not in ("QUOTIENT_CERT", "QUOTIENT_KEY")}
            done = subprocess.run([str(QUOTIENT_BIN), "queues"], env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == code, (who, done.stdout, done.stderr)
            assert ("team-a-cq" in done.stdout) if code == 0 else ("403" in done.stderr or "role" in done.stderr)
