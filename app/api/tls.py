"""HTTPS for `quotient serve`: the uvicorn settings for a server certificate and, optionally,
client certificates verified against a CA (each caller then gets the routes of its role:
app/api/identity.py; app/api/certs.py reloads the files when they change).

Checked before uvicorn starts, so a missing file or a key that does not match its
certificate stops the command with a clear message instead of a traceback.
"""
from __future__ import annotations

import os
import ssl


class TLSError(ValueError):
    pass


def uvicorn_tls_options(cert: str | None, key: str | None, client_ca: str | None) -> dict:
    """Keyword arguments for uvicorn.run: {} for plain HTTP, else the certificate settings."""
    if cert is None and key is None:
        if client_ca is not None:
            raise TLSError("--tls-client-ca needs --tls-cert and --tls-key (client certificates need HTTPS)")
        return {}
    if cert is None or key is None:
        raise TLSError("--tls-cert and --tls-key go together")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-client-ca", client_ca)):
        if path is not None and not os.access(path, os.R_OK):
            raise TLSError(f"{flag} {path}: not a readable file")
    # Load them once here, as uvicorn will, so a bad pair is reported by name.
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise TLSError(f"--tls-cert {cert} / --tls-key {key}: {e}") from None
    options = {"ssl_certfile": cert, "ssl_keyfile": key}
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (ssl.SSLError, OSError) as e:
            raise TLSError(f"--tls-client-ca {client_ca}: {e}") from None
        # Asked for, not required: health routes answer without one (app/api/identity.py holds every other
        # route to the role of the certificate); one that is presented must verify against the client CA.
        options.update(ssl_ca_certs=client_ca, ssl_cert_reqs=ssl.CERT_OPTIONAL)
    return options
