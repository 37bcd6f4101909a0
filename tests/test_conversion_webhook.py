"""POST /convert, the CRD conversion webhook (app/api/convert.py), and `quotient serve --conversion-port`, the
listener that serves it alone, without client certificates, beside the main port (app/api/listeners.py).

The route is driven over ASGI with hostile bodies; the listener by a real `quotient serve`, with TLS and a
client CA in snapshot mode, and against the fake API server in live mode.
"""
from __future__ import annotations

import asyncio
import shutil
import subprocess

import httpx
import orjson
import pytest

from app.api import convert as webhook
from app.api.convert import ConvertApp
from builders import ClusterQueue, FlavorQuotas, LocalQueue, ResourceFlavor
from fakeapi import FakeApiServer
from serving import QUOTIENT_BIN, free_port, served_live
from test_tls import FILTER_BODY, _client_context, _refused, pki, serve_tls  # noqa: F401  (pki: a fixture)

V1, V2 = "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"
CQ = ClusterQueue("cq").cohort("co").resource_group(FlavorQuotas("f").resource("cpu", "4")).obj()


def review_body(objects=None, desired: object = V2, uid: object = "uid-1", **request) -> dict:
    req = {"uid": uid, "desiredAPIVersion": desired, "objects": [CQ] if objects is None else objects, **request}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": req}


async def post(body, path: str = "/convert", method: str = "POST", app=None) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app or ConvertApp()), base_url="http://t") as c:
        return await c.request(method, path, content=content)


def failure(r: httpx.Response) -> str:
    """The Failure message of a 200 ConversionReview answer."""
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["apiVersion"], out["kind"]) == ("apiextensions.k8s.io/v1", "ConversionReview")
    assert out["response"]["result"]["status"] == "Failure" and "convertedObjects" not in out["response"]
    return out["response"]["result"]["message"]


async def test_a_review_is_answered_with_the_objects_converted_in_order():
    lq = LocalQueue("lq", "team-a").cluster_queue("cq").obj()
    r = await post(review_body([CQ, ResourceFlavor("f").obj(), lq]))
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    out = r.json()
    assert out["apiVersion"] == "apiextensions.k8s.io/v1" and out["kind"] == "ConversionReview"
    assert out["response"]["uid"] == "uid-1" and out["response"]["result"] == {"status": "Success"}
    converted = out["response"]["convertedObjects"]
    assert [o["kind"] for o in converted] == ["ClusterQueue", "ResourceFlavor", "LocalQueue"]
    assert all(o["apiVersion"] == V2 for o in converted)
    assert converted[0]["spec"]["cohortName"] == "co" and "cohort" not in converted[0]["spec"]
    back = (await post(review_body(converted, V1))).json()["response"]["convertedObjects"]
    assert back == [CQ, ResourceFlavor("f").obj(), lq]


async def test_ten_thousand_objects_are_converted():
    objects = [{**CQ, "metadata": {"name": f"cq-{i}"}} for i in range(10_000)]
    r = await post(review_body(objects))
    converted = r.json()["response"]["convertedObjects"]
    assert len(converted) == 10_000 and converted[9_999]["metadata"]["name"] == "cq-9999"
    assert all(o["spec"]["cohortName"] == "co" for o in converted)


@pytest.mark.parametrize("body, message", [
    (review_body(desired="apps/v1"), "desiredAPIVersion 'apps/v1': this webhook converts only between "
                                     "kueue.x-k8s.io/v1beta1 and kueue.x-k8s.io/v1beta2"),
    (review_body(desired="kueue.x-k8s.io/v1alpha1"), "desiredAPIVersion 'kueue.x-k8s.io/v1alpha1'"),
    (review_body(desired=None), "desiredAPIVersion None"),
    (review_body([{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}]),
     "objects[0] (Deployment 'd'): apiVersion 'apps/v1' is not kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2"),
    (review_body([CQ, "not an object"]), "objects[1] (str None): apiVersion None"),
    (review_body({"a": CQ}), "request.objects must be a list, got dict"),
    (review_body("objects"), "request.objects must be a list, got str"),
    ({**review_body(), "kind": "AdmissionReview"}, "expected a apiextensions.k8s.io/v1 ConversionReview"),
    ({**review_body(), "apiVersion": "apiextensions.k8s.io/v1beta1"}, "conversionReviewVersions: [v1]"),
    (review_body([{**CQ, "spec": {"admissionChecks": "prov"}}]),
     "objects[0] (ClusterQueue 'cq'): ClusterQueue spec.admissionChecks must be a list"),
])
async def test_a_review_that_cannot_be_converted_is_a_failure_naming_why(body, message):
    assert message in failure(await post(body))


async def test_failure_messages_quote_at_most_a_little_of_what_the_caller_sent():
    huge = "x" * 100_000
    for body in (review_body(desired=huge), review_body([{"apiVersion": huge, "kind": huge}]),
                 {**review_body(), "kind": huge}):
        assert len(failure(await post(body))) < 400


@pytest.mark.parametrize("body, message", [
    (b"{not json", "body is not valid JSON"),
    (b"", "body is not valid JSON"),
    (b"[1, 2]", "body must be a JSON object, got list"),
    (orjson.dumps(review_body(uid=None)), "no request.uid"),
    (orjson.dumps(review_body(uid=7)), "no request.uid"),
    (orjson.dumps({**review_body(), "request": None}), "no request.uid"),
    (orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}), "no request.uid"),
])
async def test_a_body_that_is_not_a_review_is_a_400(body, message):
    r = await post(body)
    assert r.status_code == 400 and message in r.json()["error"], r.text


async def test_the_route_refuses_other_methods_other_paths_and_huge_bodies(monkeypatch):
    assert (await post(review_body(), method="GET")).status_code == 405
    for path in ("/filter", "/bind", "/debug/queues", "/livez", "/metrics", "/convert/", "/"):
        r = await post(review_body(), path=path)
        assert r.status_code == 404 and "only POST /convert" in r.json()["error"], path
    monkeypatch.setattr(webhook, "CONVERT_BODY", 1000)
    r = await post(review_body([CQ] * 20))
    assert r.status_code == 413 and "body larger than 1000 bytes" in r.json()["error"]
    crowded = b'{"request": {"uid": "u", "objects": [' + b",".join([b"0"] * 1_000_001) + b"]}}"
    monkeypatch.setattr(webhook, "CONVERT_BODY", 2 * len(crowded))
    assert (await post(crowded)).status_code == 413


async def test_the_main_app_answers_convert_too(build_extender):
    from app.api.app import create_app

    app = create_app(build_extender(""))
    r = await post(review_body(), app=app)
    assert r.json()["response"]["convertedObjects"][0]["spec"]["cohortName"] == "co"


# ---- quotient serve --conversion-port -----------------------------------------------------------------

REVIEW = review_body()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_the_conversion_port_needs_no_client_certificate_and_serves_nothing_else(pki):  # noqa: F811
    conversion = free_port()
    with serve_tls(pki, "--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key"),
                   "--tls-client-ca", str(pki / "ca.crt"), "--conversion-port", str(conversion)) as port:
        with httpx.Client(verify=_client_context(pki, None), timeout=5.0, trust_env=False) as anonymous:
            r = anonymous.post(f"https://127.0.0.1:{conversion}/convert", json=REVIEW)
            assert r.status_code == 200 and r.json()["response"]["result"] == {"status": "Success"}
            for path in ("/filter", "/bind", "/debug/queues", "/debug/explain"):
                assert anonymous.post(f"https://127.0.0.1:{conversion}{path}", json=FILTER_BODY).status_code == 404
            assert anonymous.get(f"https://127.0.0.1:{conversion}/debug/queues").status_code == 404
            assert anonymous.get(f"https://127.0.0.1:{conversion}/livez").status_code == 404
            # the main port still wants a client certificate, for /convert too (role viewer or admin)
            assert anonymous.post(f"https://127.0.0.1:{port}/filter", json=FILTER_BODY).status_code == 403
            assert anonymous.post(f"https://127.0.0.1:{port}/convert", json=REVIEW).status_code == 403
        with httpx.Client(verify=_client_context(pki, "client"), timeout=5.0, trust_env=False) as scheduler:
            assert scheduler.post(f"https://127.0.0.1:{port}/filter", json=FILTER_BODY).status_code == 200
        with httpx.Client(verify=_client_context(pki, "viewer"), timeout=5.0, trust_env=False) as viewer:
            assert viewer.post(f"https://127.0.0.1:{port}/convert", json=REVIEW).status_code == 200
        with httpx.Client(timeout=5.0, trust_env=False) as plain:      # HTTPS only
            assert _refused(lambda: plain.post(f"http://127.0.0.1:{conversion}/convert", json=REVIEW)) \
                or plain.post(f"http://127.0.0.1:{conversion}/convert", json=REVIEW).status_code == 400


async def test_in_live_mode_the_conversion_port_serves_beside_the_main_one_and_stops_with_it(tmp_path):
    async with FakeApiServer() as api:
        conversion = free_port()
        async with served_live(api, tmp_path, "--conversion-port", str(conversion)) as (proc, _, _):
            async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                r = await http.post(f"http://127.0.0.1:{conversion}/convert", json=REVIEW)
                assert r.json()["response"]["convertedObjects"][0]["spec"]["cohortName"] == "co", r.text
                assert (await http.get(f"http://127.0.0.1:{conversion}/readyz")).status_code == 404
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 10)     # SIGTERM stops both listeners


@pytest.mark.parametrize("args, message", [
    (["--host", "0.0.0.0", "--insecure-no-client-auth", "--conversion-port", "PORT"],
     "--conversion-port on --host 0.0.0.0 needs --tls-cert and --tls-key"),
    (["--conversion-port", "MAIN"], "the conversion webhook needs a port of its own"),
])
def test_a_conversion_port_that_cannot_be_served_safely_stops_the_command(args, message):
    main = free_port()
    args = [{"PORT": str(free_port()), "MAIN": str(main)}.get(a, a) for a in args]
    r = subprocess.run([str(QUOTIENT_BIN), "serve", "--port", str(main), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr
