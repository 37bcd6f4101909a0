"""Certificates renewed in place are served without a restart (app/api/certs.py): the TLS files of a running
`quotient serve` are swapped the way the kubelet updates a mounted Secret (a new directory, the ..data symlink
moved atomically), and new connections see the new serving certificate on the main and conversion ports, a new
client CA replaces the old one, a half-done swap keeps the old certificate, and the expiry metric follows.
"""
from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from serving import QUOTIENT_BIN, REPO, free_port
from test_identities import CLIENT_EXT
from test_tls import FILTER_BODY, SNAPSHOT, _ca, _issue, _refused, serve_tls

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

SERVER_EXT = ("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")


def _server_cert(d: Path, name: str, cn: str, days: int) -> None:
    (d / f"{name}.ext").write_text(SERVER_EXT)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-subj", f"/CN={cn}",
                    "-out", f"{name}.csr"], cwd=d, check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-days", str(days), "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt"],
                   cwd=d, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("reload")
    _ca(d, "ca")
    _server_cert(d, "old", "quotient-old", 2)         # within 30 days: a warning at start
    _server_cert(d, "new", "quotient-new", 400)
    _issue(d, "client", "/CN=quotient-scheduler", CLIENT_EXT)
    _issue(d, "metrics", "/CN=quotient-metrics", CLIENT_EXT)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca2.key", "-out", "ca2.crt",
                    "-days", "90", "-subj", "/CN=ca2", "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign"], cwd=d, check=True, capture_output=True)
    _issue(d, "client2", "/CN=quotient-scheduler", CLIENT_EXT, ca="ca2")
    _issue(d, "metrics2", "/CN=quotient-metrics", CLIENT_EXT, ca="ca2")
    (d / "snapshot.yaml").write_text(SNAPSHOT)
    return d


class Mounted:
    """A Secret volume as the kubelet lays it out: tls.crt -> ..data/tls.crt, ..data -> ..<version>/."""

    def __init__(self, root: Path):
        self.root, self.version = root, 0
        root.mkdir()
        for name in ("tls.crt", "tls.key", "ca.crt"):
            os.symlink(f"..data/{name}", root / name)

    def swap(self, files: dict[str, Path]) -> None:
        self.version += 1
        new = self.root / f"..v{self.version}"
        new.mkdir()
        for name, source in files.items():
            shutil.copy(source, new / name)
        os.symlink(new.name, self.root / "..data_tmp")
        os.replace(self.root / "..data_tmp", self.root / "..data")

    def path(self, name: str) -> str:
        return str(self.root / name)


def _served_cn(port: int, ca: Path, sni: str | None = None) -> str:
    """The CN of the certificate a new connection is served (no SNI unless `sni`)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        with ctx.wrap_socket(sock, server_hostname=sni) as tls:
            return dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]


def _eventually(check, within: float = 10.0):
    deadline = time.monotonic() + within
    while True:
        try:
            found = check()
            if found:
                return found
        except (httpx.TransportError, ssl.SSLError, OSError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError("not within the time")
        time.sleep(0.1)


def _expiry(text: str) -> dict[tuple[str, str], float]:
    found = {}
    for line in text.splitlines():
        if line.startswith("quotient_tls_certificate_expiry_timestamp_seconds{"):
            labels, value = line.split("{", 1)[1].rsplit("} ", 1)
            pairs = dict(p.split("=", 1) for p in labels.split(","))
            found[(pairs["port"].strip('"'), pairs["certificate"].strip('"'))] = float(value)
    return found


def _metrics(pki: Path, port: int, who: str) -> str:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / f"{who}.crt"), str(pki / f"{who}.key"))
    with httpx.Client(verify=ctx, timeout=5, trust_env=False) as client:
        r = client.get(f"https://127.0.0.1:{port}/metrics")
        assert r.status_code == 200, r.text
        return r.text


def _client(pki: Path, who: str, keep_alive: bool = False) -> httpx.Client:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / f"{who}.crt"), str(pki / f"{who}.key"))
    return httpx.Client(verify=ctx, timeout=5, trust_env=False, headers={} if keep_alive else {"connection": "close"})


def test_swapped_certificate_files_are_served_without_a_restart(pki, tmp_path):
    secret = Mounted(tmp_path / "tls")
    secret.swap({"tls.crt": pki / "old.crt", "tls.key": pki / "old.key", "ca.crt": pki / "ca.crt"})
    conversion = free_port()
    with serve_tls(pki, "--tls-cert", secret.path("tls.crt"), "--tls-key", secret.path("tls.key"),
                   "--tls-client-ca", secret.path("ca.crt"), "--conversion-port", str(conversion),
                   "--tls-reload-interval", "0.2") as port:
        log = next(pki.glob(f"serve-{port}.log"))
        assert _served_cn(port, pki / "ca.crt") == "quotient-old"
        assert _served_cn(conversion, pki / "ca.crt") == "quotient-old"
        assert "expires in" in log.read_text()                 # the 2-day certificate: warned at start
        before = _expiry(_metrics(pki, port, "metrics"))
        assert set(before) == {(str(port), "serving"), (str(port), "client-ca"), (str(conversion), "serving")}

        # a half-done swap: the new certificate with the old key keeps the old certificate in use
        secret.swap({"tls.crt": pki / "new.crt", "tls.key": pki / "old.key", "ca.crt": pki / "ca.crt"})
        _eventually(lambda: f'quotient_tls_reload_errors_total{{port="{port}"}} 1.0' in _metrics(pki, port, "metrics"))
        assert _served_cn(port, pki / "ca.crt") == "quotient-old"
        with _client(pki, "client") as scheduler:
            assert scheduler.post(f"https://127.0.0.1:{port}/filter", json=FILTER_BODY).status_code == 200

        # the whole pair: new connections, with or without a server name, get the new certificate on both ports
        secret.swap({"tls.crt": pki / "new.crt", "tls.key": pki / "new.key", "ca.crt": pki / "ca.crt"})
        _eventually(lambda: _served_cn(port, pki / "ca.crt") == "quotient-new")
        assert _served_cn(port, pki / "ca.crt", sni="localhost") == "quotient-new"
        _eventually(lambda: _served_cn(conversion, pki / "ca.crt") == "quotient-new")
        after = _expiry(_metrics(pki, port, "metrics"))
        for p in (str(port), str(conversion)):
            assert after[(p, "serving")] - before[(p, "serving")] > 300 * 86400
        assert after[(str(port), "client-ca")] == before[(str(port), "client-ca")]

        # a new client CA replaces the old one: a certificate of the old CA no longer gets through, on a new
        # connection nor on one it kept alive from before
        kept = _client(pki, "client", keep_alive=True)
        assert kept.post(f"https://127.0.0.1:{port}/filter", json=FILTER_BODY).status_code == 200
        secret.swap({"tls.crt": pki / "new.crt", "tls.key": pki / "new.key", "ca.crt": pki / "ca2.crt"})

        def old_ca_refused() -> bool:
            with _client(pki, "client") as old:
                return _refused(lambda: old.get(f"https://127.0.0.1:{port}/livez"))
        _eventually(old_ca_refused)
        assert _refused(lambda: kept.post(f"https://127.0.0.1:{port}/filter", json=FILTER_BODY))
        kept.close()
        with _client(pki, "client2") as scheduler:
            assert scheduler.post(f"https://127.0.0.1:{port}/filter", json=FILTER_BODY).status_code == 200
        ca_changed = _expiry(_metrics(pki, port, "metrics2"))
        assert ca_changed[(str(port), "client-ca")] - before[(str(port), "client-ca")] > 80 * 86400
        text = log.read_text()
        assert "do not load" in text and "TLS reloaded" in text


def _days(message: str) -> float:
    return float(message.split("expires in ", 1)[1].split(" days", 1)[0])


def test_a_truncated_file_keeps_the_old_context_and_a_daily_warning_is_logged(pki, tmp_path, caplog):
    """In process: ServingTLS.poll with a half-written certificate, then the whole one; the expiry warning once a
    day from 30 days before (the 2-day certificate), with a fake clock."""
    from app.api.certs import ServingTLS

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki / "old.crt", cert)
    shutil.copy(pki / "old.key", key)
    now = [time.time()]
    with caplog.at_level("WARNING", logger="quotient.tls"):
        tls = ServingTLS(8888, str(cert), str(key), clock=lambda: now[0])
        first = tls.context
        (warned,) = [_days(r.message) for r in caplog.records if "expires in" in r.message]
        assert 1.5 < warned <= 2.0
        caplog.clear()
        tls.warn_expiry()
        now[0] += 3600
        tls.warn_expiry()
        assert not caplog.records                               # not again within the day
        now[0] += 86400
        tls.warn_expiry()
        assert len(caplog.records) == 1 and abs(_days(caplog.records[0].message) - (warned - 1.04)) < 0.11
    whole = (pki / "new.crt").read_bytes()
    cert.write_bytes(whole[: len(whole) // 2])                   # the writer is half-way through
    shutil.copy(pki / "new.key", key)
    assert not tls.poll() and tls.context is first and tls.reload_errors == 1
    assert not tls.poll() and tls.reload_errors == 1             # the same files are not tried (and logged) again
    cert.write_bytes(whole)
    assert tls.poll() and tls.context is not first and tls.reload_errors == 1
    assert tls.expiry["serving"] - time.time() > 300 * 86400


def test_off_loopback_the_view_port_reloads_its_certificate_too(pki):
    """Checked on the server `quotient serve` would start (binding 0.0.0.0 here would open a port to the network)."""
    import argparse

    from app.cli import _view, build_from_snapshot

    args = argparse.Namespace(view_port=free_port(), view_host="0.0.0.0", tls_cert=str(pki / "old.crt"),
                              tls_key=str(pki / "old.key"), log_level="info")
    config = _view(args, build_from_snapshot(str(pki / "snapshot.yaml"), None)).config
    assert config.tls is not None and config.tls.client_ca is None and config.tls.port == args.view_port
    assert config.tls.listening.sni_callback is not None
    config.load()
    assert config.ssl is config.tls.listening
