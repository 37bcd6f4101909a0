"""Certificates renewed in place are served without a restart: each HTTPS port keeps its own SSLContext, rebuilt
when the serving certificate, its key or the client CA change on disk, and counts down to their expiry.

cert-manager renews a certificate in its Secret and the kubelet swaps the mounted files atomically (a symlink
to a new directory); certs.sh's Secrets are replaced the same way. Every POLL_INTERVAL seconds each port stats
its files (following the symlinks: inode, size, mtime); when one changed, a fresh SSLContext is built from them.
Only a whole, matching set replaces the one in use: a certificate without its new key yet (a half-done swap),
a truncated file or an unreadable one keeps the old context, logs why and counts it
(quotient_tls_reload_errors_total{port}); the next change is tried again. Nothing here stops the server or lets
it serve without TLS.

The listening socket's context never changes (uvicorn hands it to the event loop once): its sni_callback, which
OpenSSL calls on every ClientHello (with or without a server name), moves the new connection to the context in
use, so its handshake presents the current certificate and verifies the client against the current client CA,
which replaces the old one (a CA dropped from the file no longer verifies anyone). Connections made before keep
the serving certificate they negotiated; when the client CA changed they are closed as soon as no answer is under
way on them (a keep-alive connection kube-scheduler never leaves idle would otherwise keep a caller the new CA
does not verify), and their callers reconnect. Session tickets are off, so no connection resumes a session the
old client CA verified. Files rewritten with the same content (the kubelet moves every file of a Secret when
one changes) rebuild nothing.

quotient_tls_certificate_expiry_timestamp_seconds{port,certificate} says when each expires (certificate
"serving", or "client-ca": the first CA of the bundle to expire); from EXPIRY_WARNING before, a warning is
logged at start, on each reload and once a day.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
import time

import uvicorn
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

log = logging.getLogger("quotient.tls")

POLL_INTERVAL = 10.0             # seconds between two looks at the files (--tls-reload-interval)
EXPIRY_WARNING = 30 * 86400.0    # seconds before expiry from which a warning is logged
WARN_EVERY = 86400.0             # once a day


class ExpiryWarnings:
    """When a certificate is to be warned about: from EXPIRY_WARNING before it expires, once a WARN_EVERY per
    certificate (those this port serves, app/api/identity.py's those its callers present)."""

    def __init__(self, clock=time.time):
        self.clock = clock
        self._warned: dict[str, float] = {}

    def due(self, which: str, at: float) -> str | None:
        """"expires in N days (date)" when `which`, expiring at `at`, is to be warned about now (counted as
        warned), else None."""
        now = self.clock()
        if at - now > EXPIRY_WARNING or now - self._warned.get(which, -WARN_EVERY) < WARN_EVERY:
            return None
        self._warned[which] = now
        left = at - now
        when = f"expires in {left / 86400:.1f} days" if left > 0 else f"expired {-left / 86400:.1f} days ago"
        return f"{when} ({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(at))})"

    def forget(self, which: str) -> None:
        """A renewed certificate is warned about anew, should it need it."""
        self._warned.pop(which, None)


def _decode(path: str) -> dict:
    """The first certificate of a PEM file as ssl's getpeercert() shows one (subject, serialNumber, notAfter)."""
    return ssl._ssl._test_decode_cert(path)     # the one decoder the standard library has for a file


class ServingTLS:
    """The TLS of one port: the context new handshakes use, rebuilt from `cert`, `key` and `client_ca` (None:
    no client certificates asked for) when they change."""

    def __init__(self, port: int, cert: str, key: str, client_ca: str | None = None,
                 cert_reqs: int = ssl.CERT_NONE, clock=time.time):
        self.port, self.cert, self.key, self.client_ca, self.cert_reqs = port, cert, key, client_ca, cert_reqs
        self.warnings = ExpiryWarnings(clock)
        self.reload_errors = 0
        self.reloads = 0
        self.expiry: dict[str, float] = {}
        self.retire = None      # closes the port's connections (connections._Factory.retire): a client CA changed
        self.signature = self._stat()
        self.digests = self._digests()
        self._failed = None
        self.context = self._build()                 # a bad set at start raises: cli reports it
        self.listening = self.context
        self.listening.sni_callback = self._choose
        self.expiry = self._expiry()
        self.warn_expiry()

    @property
    def files(self) -> tuple[str, ...]:
        return (self.cert, self.key) + ((self.client_ca,) if self.client_ca else ())

    def _stat(self) -> tuple:
        """What changes when a file is replaced or rewritten (stat follows the kubelet's symlinks)."""
        seen = []
        for path in self.files:
            try:
                st = os.stat(path)
                seen.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError as e:
                seen.append(("missing", str(e)))
        return tuple(seen)

    def _digests(self) -> tuple[bytes, ...]:
        """What the files hold: a swap that rewrites them unchanged (the kubelet moves every file of a Secret
        when one changes) rebuilds nothing."""
        found = []
        for path in self.files:
            try:
                with open(path, "rb") as f:
                    found.append(hashlib.sha256(f.read()).digest())
            except OSError:
                found.append(b"")
        return tuple(found)

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.options |= ssl.OP_NO_TICKET
        context.num_tickets = 0                      # TLS 1.3: no resumption past a client CA change
        context.load_cert_chain(self.cert, self.key)    # raises when the key does not match the certificate
        if self.client_ca:
            context.load_verify_locations(cafile=self.client_ca)
            if not context.get_ca_certs():
                raise ssl.SSLError(f"{self.client_ca} holds no CA certificate")
        context.verify_mode = ssl.VerifyMode(self.cert_reqs)
        return context

    def _choose(self, ssl_object, server_name, listening) -> None:
        current = self.context
        if ssl_object.context is not current:
            ssl_object.context = current

    def _expiry(self) -> dict[str, float]:
        found = {}
        try:
            found["serving"] = ssl.cert_time_to_seconds(_decode(self.cert)["notAfter"])
        except (AttributeError, KeyError, ValueError, OSError, ssl.SSLError) as e:
            log.warning("cannot read the expiry of %s (port %d): %s", self.cert, self.port, e)
        if self.client_ca:
            times = [ssl.cert_time_to_seconds(ca["notAfter"]) for ca in self.context.get_ca_certs() if "notAfter" in ca]
            if times:
                found["client-ca"] = min(times)
        return found

    def poll(self) -> bool:
        """Rebuild the context when a file changed; True when the new one is in use."""
        seen = self._stat()
        if seen == self.signature or seen == self._failed:
            return False
        digests = self._digests()
        if digests == self.digests:
            self.signature, self._failed = seen, None
            return False
        try:
            context = self._build()
        except (ssl.SSLError, OSError, ValueError) as e:
            self._failed = seen
            self.reload_errors += 1
            log.error("port %d: the changed TLS files (%s) do not load, the previous certificate stays in use "
                      "until they do: %s", self.port, ", ".join(self.files), e)
            return False
        ca_changed = self.client_ca is not None and digests[2] != self.digests[2]
        self.context, self.signature, self.digests, self._failed = context, seen, digests, None
        self.reloads += 1
        before, self.expiry = self.expiry, self._expiry()
        for which, at in self.expiry.items():
            if before.get(which) != at:
                self.warnings.forget(which)
        try:
            cert = _decode(self.cert)
            what = f"serial {cert.get('serialNumber')}, expires {cert.get('notAfter')}"
        except (AttributeError, ValueError, OSError, ssl.SSLError):
            what = "undecodable"
        log.info("port %d: TLS reloaded from %s (certificate %s)", self.port, ", ".join(self.files), what)
        if ca_changed and self.retire is not None:
            closed = self.retire()
            log.info("port %d: the client CA changed: %d connections verified by the previous one close once their "
                     "answer is sent (their callers reconnect and are verified anew)", self.port, closed)
        self.warn_expiry()
        return True

    def warn_expiry(self) -> None:
        """A warning per certificate that expires within EXPIRY_WARNING, at most once a WARN_EVERY."""
        for which, at in self.expiry.items():
            when = self.warnings.due(which, at)
            if when is None:
                continue
            path = self.cert if which == "serving" else self.client_ca
            log.warning("port %d: the %s certificate %s %s: renew it in place; Quotient reloads it within %gs "
                        "of the file changing", self.port, "serving" if which == "serving" else "client CA", path,
                        when, POLL_INTERVAL)

    async def watch(self) -> None:
        """Poll until cancelled; a bug here is logged, never the end of serving."""
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            try:
                self.poll()
                self.warn_expiry()
            except Exception:
                log.exception("port %d: TLS reload check failed", self.port)


class ReloadingConfig(uvicorn.Config):
    """uvicorn's Config, except that the listening SSLContext is the ServingTLS's (`tls`), not one uvicorn builds."""

    tls: ServingTLS | None = None

    def load(self) -> None:
        super().load()
        if self.tls is not None:
            self.ssl = self.tls.listening


class TLSCollector:
    """The expiry and reload-error series of every HTTPS port of the process, read at scrape time."""

    def __init__(self, ports: list[ServingTLS]):
        self.ports = ports

    def describe(self):
        return []

    def collect(self):
        expiry = GaugeMetricFamily("quotient_tls_certificate_expiry_timestamp_seconds",
                                   "When a certificate a port serves or verifies clients with expires (Unix time), "
                                   "by port and certificate (serving, or client-ca: the first of its CAs to "
                                   "expire); reloaded with the files.", labels=["port", "certificate"])
        errors = CounterMetricFamily("quotient_tls_reload_errors_total",
                                     "Changed TLS files of a port that did not load (a certificate without its key, "
                                     "a truncated file): the previous certificate stays in use.", labels=["port"])
        for tls in self.ports:
            for which, at in tls.expiry.items():
                expiry.add_metric([str(tls.port), which], at)
            errors.add_metric([str(tls.port)], tls.reload_errors)
        yield expiry
        yield errors
