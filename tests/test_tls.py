"""`quotient serve --tls-cert --tls-key [--tls-client-ca]`: HTTPS, and client certificates required when a CA is given.

A throwaway CA, a server certificate for 127.0.0.1 and a client certificate are made with
the `openssl` command at test time; the server is a real `quotient serve` subprocess on a
free 127.0.0.1 port.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, ResourceFlavor, snapshot_yaml
from serving import QUOTIENT_BIN, REPO, free_port, stop_process

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

SNAPSHOT = snapshot_yaml(
    Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
    ClusterQueue("team-a-cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", 4)).obj(),
    LocalQueue("user-queue", "team-a").cluster_queue("team-a-cq").obj(), Node("node-1").cpu("8").memory("32Gi").obj())

FILTER_BODY = {
    "Pod": {"metadata": {"name": "tls-1", "namespace": "team-a", "uid": "tls-1",
                         "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
    "Nodes": None, "NodeNames": ["node-1"]}


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _issue(d: Path, name: str, subject: str, ext: str, ca: str = "ca") -> None:
    """A key and a certificate for `name`, signed by the CA `ca`, with the extensions in `ext`."""
    (d / f"{name}.ext").write_text(ext)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-subj", subject,
             "-out", f"{name}.csr", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt",
             "-days", "2", "-subj", f"/CN={name}", "-sha256",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _issue(d, "server", "/CN=quotient.quotient-system.svc",
           "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=serverAuth\n"
           "subjectAltName=DNS:quotient.quotient-system.svc,DNS:localhost,IP:127.0.0.1\n")
    _issue(d, "client", "/CN=quotient-scheduler",        # role scheduler in the default clientIdentities
           "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=clientAuth\n")
    _issue(d, "viewer", "/CN=quotient-viewer",
           "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=clientAuth\n")
    # A client certificate from a CA the server does not trust.
    _ca(d, "other-ca")
    _issue(d, "stranger", "/CN=stranger",
           "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=clientAuth\n", ca="other-ca")
    (d / "snapshot.yaml").write_text(SNAPSHOT)
    return d


def _client_context(pki: Path, cert: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert is not None:
        ctx.load_cert_chain(str(pki / f"{cert}.crt"), str(pki / f"{cert}.key"))
    return ctx


@contextlib.contextmanager
def serve_tls(pki: Path, *tls_args: str, ready_within: float = 20.0):
    port = free_port()
    log_path = pki / f"serve-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(QUOTIENT_BIN), "serve", "--host", "127.0.0.1", "--port", str(port),
                                 "--snapshot", str(pki / "snapshot.yaml"), *tls_args],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(REPO))
    url = f"https://127.0.0.1:{port}"
    try:
        ctx = _client_context(pki, "client")
        deadline = time.monotonic() + ready_within
        with httpx.Client(verify=ctx, timeout=2.0, trust_env=False) as client:
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"quotient serve exited with {proc.returncode}:\n{log_path.read_text()}")
                try:
                    if client.get(f"{url}/livez").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"no HTTPS answer within {ready_within} s:\n{log_path.read_text()}")
                time.sleep(0.05)
        yield port
    finally:
        stop_process(proc)


def _refused(call) -> bool:
    """True when the request fails: the handshake is refused or the connection is closed."""
    try:
        call()
    except (httpx.TransportError, ssl.SSLError, ConnectionError):
        return True
    return False  # any answer, even an error status, means the connection was accepted


@pytest.fixture(scope="module")
def mtls_port(pki):
    with serve_tls(pki, "--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key"),
                   "--tls-client-ca", str(pki / "ca.crt")) as port:
        yield port


def test_https_with_the_client_certificate_runs_the_verbs(pki, mtls_port):
    with httpx.Client(verify=_client_context(pki, "client"), timeout=5.0, trust_env=False) as client:
        r = client.post(f"https://127.0.0.1:{mtls_port}/filter", json=FILTER_BODY)
        assert r.status_code == 200
        assert r.json()["NodeNames"] == ["node-1"]
        assert client.get(f"https://127.0.0.1:{mtls_port}/readyz").text == "ok"


def test_a_client_without_a_certificate_gets_the_health_routes_and_403_elsewhere(pki, mtls_port):
    with httpx.Client(verify=_client_context(pki, None), timeout=5.0, trust_env=False) as client:
        r = client.post(f"https://127.0.0.1:{mtls_port}/filter", json=FILTER_BODY)
        assert r.status_code == 403 and "presented none" in r.json()["error"]
        assert client.get(f"https://127.0.0.1:{mtls_port}/livez").status_code == 200


def test_a_client_certificate_from_another_ca_is_refused(pki, mtls_port):
    with httpx.Client(verify=_client_context(pki, "stranger"), timeout=5.0, trust_env=False) as client:
        assert _refused(lambda: client.post(f"https://127.0.0.1:{mtls_port}/filter", json=FILTER_BODY))


def test_plain_http_is_refused(mtls_port):
    with httpx.Client(timeout=5.0, trust_env=False) as client:
        try:
            r = client.post(f"http://127.0.0.1:{mtls_port}/filter", json=FILTER_BODY)
        except httpx.TransportError:
            return      # the TLS server closed the connection: refused
        # Some TLS stacks answer a plain request with an HTTP 400; it must never run the verb.
        assert r.status_code == 400 and "NodeNames" not in r.text


def test_https_without_a_client_ca_needs_no_client_certificate(pki):
    with serve_tls(pki, "--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key")) as port:
        with httpx.Client(verify=_client_context(pki, None), timeout=5.0, trust_env=False) as client:
            r = client.post(f"https://127.0.0.1:{port}/filter", json=FILTER_BODY)
            assert r.status_code == 200 and r.json()["NodeNames"] == ["node-1"]


def test_the_web_view_is_behind_the_client_certificate_like_debug(pki, mtls_port):
    url = f"https://127.0.0.1:{mtls_port}"
    with httpx.Client(verify=_client_context(pki, None), timeout=5.0, trust_env=False) as anonymous:
        assert anonymous.get(f"{url}/ui").status_code == 403
        assert anonymous.get(f"{url}/ui/static/ui.js").status_code == 403
    with httpx.Client(verify=_client_context(pki, "client"), timeout=5.0, trust_env=False) as scheduler:
        assert scheduler.get(f"{url}/ui").status_code == 403          # the verbs' certificate: role scheduler
    with httpx.Client(verify=_client_context(pki, "viewer"), timeout=5.0, trust_env=False) as client:
        r = client.get(f"{url}/ui")
        assert r.status_code == 200 and 'data-name="team-a-cq"' in r.text


def test_the_view_port_serves_ui_and_debug_without_a_client_certificate(pki):
    """On loopback (where kubectl port-forward arrives) the view port is plain HTTP: no certificate at all."""
    view = free_port()
    with serve_tls(pki, "--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key"),
                   "--tls-client-ca", str(pki / "ca.crt"), "--view-port", str(view)) as port:
        with httpx.Client(timeout=5.0, trust_env=False) as anonymous:
            ui = anonymous.get(f"http://127.0.0.1:{view}/ui")
            queues = anonymous.get(f"http://127.0.0.1:{view}/debug/queues")
            reactivate = anonymous.post(f"http://127.0.0.1:{view}/debug/workloads/team-a/x/reactivate")
            verb = anonymous.post(f"http://127.0.0.1:{view}/filter", json=FILTER_BODY)
        with httpx.Client(verify=_client_context(pki, None), timeout=5.0, trust_env=False) as anonymous:
            assert anonymous.get(f"https://127.0.0.1:{port}/ui").status_code == 403     # the main port still asks
    assert ui.status_code == 200 and 'data-name="team-a-cq"' in ui.text
    assert queues.json()["clusterQueues"][0]["name"] == "team-a-cq"
    assert reactivate.status_code == 403 and verb.status_code == 404


def test_off_loopback_the_view_port_is_https_without_client_certificates(pki):
    """Checked on the server `quotient serve` would start (binding 0.0.0.0 here would open a port to the network)."""
    import argparse

    from app.cli import _view, build_from_snapshot

    extender = build_from_snapshot(str(pki / "snapshot.yaml"), None)

    def view(host: str):
        args = argparse.Namespace(view_port=free_port(), view_host=host, tls_cert=str(pki / "server.crt"),
                                  tls_key=str(pki / "server.key"), log_level="info")
        return _view(args, extender).config

    wide, local = view("0.0.0.0"), view("127.0.0.1")
    assert (wide.ssl_certfile, wide.ssl_keyfile) == (str(pki / "server.crt"), str(pki / "server.key"))
    assert wide.ssl_cert_reqs == ssl.CERT_NONE and wide.ssl_ca_certs is None
    assert local.ssl_certfile is None                    # loopback: plain HTTP for kubectl port-forward
    assert wide.limit_concurrency is None and wide.http.port.limits.cap == 4096     # no 503: app/api/connections.py


@pytest.mark.parametrize("args, message", [
    (["--tls-cert", "CERT"], "--tls-cert and --tls-key go together"),
    (["--tls-client-ca", "CA"], "--tls-client-ca needs --tls-cert and --tls-key"),
    (["--tls-cert", "CERT", "--tls-key", "/nonexistent/key.pem"], "not a readable file"),
    (["--tls-cert", "CERT", "--tls-key", "OTHERKEY"], "--tls-key"),
])
def test_bad_tls_flags_stop_the_command_with_a_message(pki, args, message):
    subst = {"CERT": str(pki / "server.crt"), "CA": str(pki / "ca.crt"), "OTHERKEY": str(pki / "client.key")}
    args = [subst.get(a, a) for a in args]
    r = subprocess.run([str(QUOTIENT_BIN), "serve", "--port", str(free_port()), "--snapshot",
                        str(pki / "snapshot.yaml"), *args], capture_output=True, text=True, timeout=60,
                       cwd=str(REPO), env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 2, r.stderr
    assert message in r.stderr


HEALTHCHECK = REPO / "deploy" / "healthcheck.py"


def _healthcheck(env: dict, path: str = "/livez") -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("QUOTIENT_HEALTH_")}
    return subprocess.run([str(REPO / ".venv" / "bin" / "python"), str(HEALTHCHECK), path],
                          env={**clean, **env}, capture_output=True, timeout=30).returncode


def test_the_image_healthcheck_presents_a_client_certificate_when_given_one(pki, mtls_port):
    url = f"https://127.0.0.1:{mtls_port}"
    with_cert = {"QUOTIENT_HEALTH_URL": url, "QUOTIENT_HEALTH_CA": str(pki / "ca.crt"),
                 "QUOTIENT_HEALTH_CERT": str(pki / "client.crt"), "QUOTIENT_HEALTH_KEY": str(pki / "client.key")}
    assert _healthcheck(with_cert) == 0
    assert _healthcheck(with_cert, "/readyz") == 0
    assert _healthcheck(with_cert, "/no-such-path") == 1
    assert _healthcheck({"QUOTIENT_HEALTH_URL": url, "QUOTIENT_HEALTH_CA": str(pki / "ca.crt")}) == 0   # public
    assert _healthcheck({"QUOTIENT_HEALTH_URL": f"http://127.0.0.1:{mtls_port}"}) == 1
