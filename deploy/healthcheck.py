"""Exit 0 when Quotient answers 200 on a health path, else 1: the image's HEALTHCHECK, and the
exec probe to use when Quotient requires client certificates (kubelet's httpGet probes
cannot present one).

    quotient-healthcheck [PATH]        # default /livez; e.g. /readyz

Environment: QUOTIENT_HEALTH_URL (default http://127.0.0.1:8888); for HTTPS also
QUOTIENT_HEALTH_CA (CA file to verify the server), QUOTIENT_HEALTH_CERT and
QUOTIENT_HEALTH_KEY (client certificate, needed with --tls-client-ca). The server name is
not checked: the probe always calls its own pod.
"""
import os
import ssl
import sys
import urllib.request


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else "/livez"
    url = os.environ.get("QUOTIENT_HEALTH_URL", "http://127.0.0.1:8888").rstrip("/") + path
    context = None
    if url.startswith("https://"):
        context = ssl.create_default_context(cafile=os.environ.get("QUOTIENT_HEALTH_CA"))
        context.check_hostname = False
        if os.environ.get("QUOTIENT_HEALTH_CERT"):
            context.load_cert_chain(os.environ["QUOTIENT_HEALTH_CERT"], os.environ.get("QUOTIENT_HEALTH_KEY"))
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:
            return 0 if r.status == 200 else 1
    except Exception as e:  # any failure is "unhealthy"
        print(f"{url}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
