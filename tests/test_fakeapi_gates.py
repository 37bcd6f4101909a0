"""The fake API server keeps scheduling gates and calls a mutating webhook on pod CREATE as a real kube-apiserver
v1.36 does, so that the gated design (issue 32) is tested against the API's rules, not the fake's leniency:
gates only removed, the ungate strategic merge patch, the uid in a patch, binding a gated pod, and the
AdmissionReview round trip with its failure policy. Plain HTTP to the fake; the webhooks are tiny aiohttp apps
on 127.0.0.1 (one over HTTPS with a self-signed certificate)."""
from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess

import aiohttp
import orjson
import pytest
from aiohttp import web

from fakeapi import FakeApiServer, JsonPatchError, PodWebhook, apply_json_patch

GATE = "kueue.x-k8s.io/admission"
QUEUE = "kueue.x-k8s.io/queue-name"
PODS = "/api/v1/namespaces/team-a/pods"
SMP = "application/strategic-merge-patch+json"


def pod(name: str = "p1", gates=(), labels=None, node: str = "", conditions=()) -> dict:
    spec = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}},
                           {"name": "d", "image": "pause"}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": dict(labels or {})},
            "spec": spec, "status": {"phase": "Pending", "conditions": list(conditions)}}


async def call(api: FakeApiServer, method: str, path: str, body=None, content_type="application/json"):
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {api.token}"}) as s:
        async with s.request(method, api.url + path, data=None if body is None else orjson.dumps(body),
                             headers={"Content-Type": content_type}) as r:
            return r.status, orjson.loads(await r.read())


def ungate(uid: str, gate: str = GATE) -> dict:
    return {"metadata": {"uid": uid}, "spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}


async def watch_events(api: FakeApiServer, since: str, count: int) -> list[dict]:
    events = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {api.token}"}) as s:
        async with s.get(api.url + "/api/v1/pods", params={"watch": "1", "resourceVersion": since,
                                                            "timeoutSeconds": "1"}) as r:
            async for line in r.content:
                if line.strip():
                    events.append(orjson.loads(line))
                if len(events) == count:
                    break
    return events


# ---------------------------------------------------------------- gates kept, only removed
async def test_the_ungate_patch_removes_the_gate_and_is_a_modified_event_with_a_new_version():
    async with FakeApiServer() as api:
        stored = api.apply(pod(gates=[GATE, "other.io/wait"], conditions=[{"type": "PodScheduled", "status": "False"}]))
        status, out = await call(api, "PATCH", f"{PODS}/p1", ungate(stored["metadata"]["uid"]), SMP)
        assert status == 200, out
        assert out["spec"]["schedulingGates"] == [{"name": "other.io/wait"}]
        assert int(out["metadata"]["resourceVersion"]) > int(stored["metadata"]["resourceVersion"])
        assert [c["name"] for c in out["spec"]["containers"]] == ["c", "d"]      # the rest untouched
        assert out["status"]["conditions"] == [{"type": "PodScheduled", "status": "False"}]
        events = await watch_events(api, stored["metadata"]["resourceVersion"], 1)
        assert events[0]["type"] == "MODIFIED"
        assert events[0]["object"]["metadata"]["resourceVersion"] == out["metadata"]["resourceVersion"]
        assert events[0]["object"]["spec"]["schedulingGates"] == [{"name": "other.io/wait"}]

        status, out = await call(api, "PATCH", f"{PODS}/p1", ungate(stored["metadata"]["uid"], "other.io/wait"), SMP)
        assert status == 200 and out["spec"]["schedulingGates"] == [], out
        last = out["metadata"]["resourceVersion"]
        # the gate already gone: the same patch changes nothing, so nothing is written
        status, again = await call(api, "PATCH", f"{PODS}/p1", ungate(stored["metadata"]["uid"]), SMP)
        assert status == 200 and again["metadata"]["resourceVersion"] == last and api.rv == int(last), again


async def test_adding_or_renaming_a_gate_is_forbidden_with_the_real_message():
    async with FakeApiServer() as api:
        stored = api.apply(pod(gates=[GATE]))
        status, out = await call(api, "PATCH", f"{PODS}/p1", {"spec": {"schedulingGates": [
            {"name": GATE}, {"name": "x.io/late"}]}}, "application/merge-patch+json")
        assert status == 422 and out["reason"] == "Invalid", out
        assert out["message"] == ('Pod "p1" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is '
                                  "allowed, but found new scheduling gate 'x.io/late'"), out
        status, out = await call(api, "PATCH", f"{PODS}/p1", {"spec": {"schedulingGates": [{"name": "x.io/late"}]}},
                                 SMP)      # strategic: appended to the kept list
        assert status == 422 and "found new scheduling gate 'x.io/late'" in out["message"], out
        renamed = api.get("Pod", "team-a", "p1")
        renamed["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/renamed"}]
        status, out = await call(api, "PUT", f"{PODS}/p1", renamed)
        assert status == 422 and "spec.schedulingGates[0].name: Forbidden" in out["message"], out
        # a pod created without gates cannot get one either
        api.apply(pod("free"))
        status, out = await call(api, "PATCH", f"{PODS}/free", {"spec": {"schedulingGates": [{"name": GATE}]}}, SMP)
        assert status == 422 and f"found new scheduling gate '{GATE}'" in out["message"], out
        assert api.get("Pod", "team-a", "p1")["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        # removal by a merge patch (null) is allowed
        status, out = await call(api, "PATCH", f"{PODS}/p1", {"spec": {"schedulingGates": None}},
                                 "application/merge-patch+json")
        assert status == 200 and "schedulingGates" not in out["spec"], out


async def test_a_patch_naming_another_uid_is_invalid_and_a_put_or_a_stale_version_is_a_conflict():
    async with FakeApiServer() as api:
        stored = api.apply(pod(gates=[GATE]))
        status, out = await call(api, "PATCH", f"{PODS}/p1", ungate("0000-other"), SMP)
        assert status == 422, out
        assert out["message"] == 'Pod "p1" is invalid: metadata.uid: Invalid value: "0000-other": field is immutable'
        assert api.get("Pod", "team-a", "p1")["spec"]["schedulingGates"] == [{"name": GATE}]
        body = api.get("Pod", "team-a", "p1")
        body["metadata"]["uid"] = "0000-other"
        status, out = await call(api, "PUT", f"{PODS}/p1", body)
        assert status == 409 and "Precondition failed: UID in precondition: 0000-other, UID in object meta: " \
            f"{stored['metadata']['uid']}" in out["message"], out
        stale = ungate(stored["metadata"]["uid"])
        stale["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) - 1)
        status, out = await call(api, "PATCH", f"{PODS}/p1", stale, SMP)       # an optimistic lock that lost
        assert status == 409 and "the object has been modified" in out["message"], out
        api.delete("Pod", "team-a", "p1")
        status, out = await call(api, "PATCH", f"{PODS}/p1", ungate(stored["metadata"]["uid"]), SMP)
        assert status == 404 and out["reason"] == "NotFound", out


async def test_strategic_merge_keeps_containers_and_conditions_by_key():
    async with FakeApiServer() as api:
        api.apply(pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]))
        status, out = await call(api, "PATCH", f"{PODS}/p1", {
            "metadata": {"labels": {"x": "1"}},
            "spec": {"containers": [{"name": "d", "image": "busybox"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}}, SMP)
        assert status == 200, out
        assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [("c", "pause"), ("d", "busybox")]
        assert out["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
        assert {c["type"] for c in out["status"]["conditions"]} == {"PodScheduled", "Ready"}
        status, out = await call(api, "PATCH", f"{PODS}/p1", {"spec": {"containers": [
            {"$patch": "delete", "name": "d"}]}}, SMP)
        assert [c["name"] for c in out["spec"]["containers"]] == ["c"], out


async def test_a_pod_created_bound_with_gates_is_invalid_and_a_gated_pod_cannot_be_bound():
    async with FakeApiServer() as api:
        status, out = await call(api, "POST", PODS, pod(gates=[GATE], node="n1"))
        assert status == 422, out
        assert out["message"] == ('Pod "p1" is invalid: spec.nodeName: Forbidden: cannot be set until all '
                                  "schedulingGates have been cleared")
        assert api.get("Pod", "team-a", "p1") is None
        status, created = await call(api, "POST", PODS, pod(gates=[GATE]))
        assert status == 201, created
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1", "uid": created["metadata"]["uid"]},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
        status, out = await call(api, "POST", f"{PODS}/p1/binding", binding)
        assert status == 409 and out["reason"] == "Conflict", out
        assert out["message"] == 'Operation cannot be fulfilled on pods/binding "p1": pod p1 has non-empty ' \
            ".spec.schedulingGates"
        assert not api.get("Pod", "team-a", "p1")["spec"].get("nodeName")
        await call(api, "PATCH", f"{PODS}/p1", ungate(created["metadata"]["uid"]), SMP)
        status, out = await call(api, "POST", f"{PODS}/p1/binding", binding)
        assert status == 201, out
        assert api.get("Pod", "team-a", "p1")["spec"]["nodeName"] == "n1"


# ---------------------------------------------------------------- JSONPatch
def test_json_patch_add_remove_replace_test():
    doc = {"metadata": {"labels": {"a/b": "1"}}, "spec": {"list": [1, 2]}}
    out = apply_json_patch(doc, [
        {"op": "test", "path": "/metadata/labels/a~1b", "value": "1"},
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]},
        {"op": "add", "path": "/spec/list/-", "value": 3},
        {"op": "add", "path": "/spec/list/0", "value": 0},
        {"op": "remove", "path": "/spec/list/1"},
        {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"}])
    assert out == {"metadata": {"labels": {"a/b": "2"}}, "spec": {"list": [0, 2, 3], "schedulingGates": [{"name": GATE}]}}
    assert doc["spec"]["list"] == [1, 2]            # the input is not changed
    for bad in ([{"op": "test", "path": "/spec/list/0", "value": 9}], [{"op": "remove", "path": "/nope"}],
                [{"op": "replace", "path": "/spec/list/5", "value": 1}], [{"op": "frobnicate", "path": "/spec"}]):
        with pytest.raises(JsonPatchError):
            apply_json_patch(doc, bad)


# ---------------------------------------------------------------- the mutating webhook
class Hook:
    """A webhook on 127.0.0.1: answers with what `answer(review)` returns (a dict, bytes, or None to hang)."""

    def __init__(self, answer, tls: tuple[str, str] | None = None):
        self.answer, self.tls, self.reviews = answer, tls, []

    async def __aenter__(self):
        async def handle(request: web.Request) -> web.StreamResponse:
            review = orjson.loads(await request.read())
            self.reviews.append(review)
            out = self.answer(review)
            if out is None:
                await asyncio.sleep(30)
            if isinstance(out, web.StreamResponse):
                return out
            return web.Response(body=out if isinstance(out, bytes) else orjson.dumps(out),
                                content_type="application/json")
        app = web.Application()
        app.router.add_post("/mutate-pods", handle)
        self.runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self.runner.setup()
        context = None
        if self.tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.tls)
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/mutate-pods"
        return self

    async def __aexit__(self, *exc):
        await self.runner.cleanup()


def gating(review: dict) -> dict:
    """What Quotient's /mutate-pods answers for a plain pod: add the admission gate."""
    ops = [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
        "uid": review["request"]["uid"], "allowed": True, "patchType": "JSONPatch",
        "patch": base64.b64encode(orjson.dumps(ops)).decode()}}


async def test_the_webhook_gets_an_admission_review_and_its_patch_gates_the_pod():
    async with Hook(gating) as hook, FakeApiServer(pod_webhooks=[PodWebhook(hook.url)]) as api:
        status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
        assert status == 201, out
        assert out["spec"]["schedulingGates"] == [{"name": GATE}]
        assert api.get("Pod", "team-a", "p1")["spec"]["schedulingGates"] == [{"name": GATE}]
        request = hook.reviews[0]["request"]
        assert hook.reviews[0]["apiVersion"] == "admission.k8s.io/v1" and hook.reviews[0]["kind"] == "AdmissionReview"
        assert request["operation"] == "CREATE" and request["namespace"] == "team-a" and request["name"] == "p1"
        assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
        assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
        assert request["object"]["metadata"]["labels"] == {QUEUE: "lq"} and request["uid"]
        assert "uid" not in request["object"]["metadata"]          # admission runs before the uid is set
        # a pod without the selector label is not sent and stays ungated
        status, out = await call(api, "POST", PODS, pod("p2"))
        assert status == 201 and "schedulingGates" not in out["spec"] and len(hook.reviews) == 1, out
        assert api.webhook_calls == 1 and api.webhook_failures == []


async def test_a_denial_refuses_the_create_with_the_webhooks_status():
    def deny(review):
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": review["request"]["uid"], "allowed": False,
            "status": {"code": 403, "message": "queue lq is stopped", "reason": "Forbidden"}}}
    async with Hook(deny) as hook, FakeApiServer(pod_webhooks=[PodWebhook(hook.url)]) as api:
        status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
        assert status == 403, out
        assert out["message"] == 'admission webhook "mpod.kb.io" denied the request: queue lq is stopped'
        assert api.get("Pod", "team-a", "p1") is None


@pytest.mark.parametrize("answer, why", [
    (lambda review: b"{garbage", "received invalid webhook response"),
    (lambda review: {**gating(review), "response": {**gating(review)["response"], "uid": "another"}},
     "expected response.uid"),
    (lambda review: web.Response(status=500, text="boom"), "status code 500"),
    (lambda review: None, "TimeoutError"),
])
async def test_with_failure_policy_ignore_a_failed_call_creates_the_pod_unmutated(answer, why):
    async with Hook(answer) as hook, FakeApiServer(pod_webhooks=[PodWebhook(hook.url, timeout=0.5)]) as api:
        status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
        assert status == 201 and "schedulingGates" not in out["spec"], out
        assert len(api.webhook_failures) == 1 and api.webhook_failures[0][0] == "mpod.kb.io", api.webhook_failures
        assert why in api.webhook_failures[0][1], api.webhook_failures


async def test_an_unreachable_webhook_is_ignored_or_fails_by_policy():
    async with Hook(gating) as hook:
        url = hook.url
    async with FakeApiServer(pod_webhooks=[PodWebhook(url)]) as api:       # nothing listens there now
        status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
        assert status == 201 and "schedulingGates" not in out["spec"], out
        assert len(api.webhook_failures) == 1 and "failed to call webhook" in api.webhook_failures[0][1]
    async with FakeApiServer(pod_webhooks=[PodWebhook(url, failure_policy="Fail")]) as api:
        status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
        assert status == 500 and 'failed calling webhook "mpod.kb.io"' in out["message"], out
        assert api.get("Pod", "team-a", "p1") is None


async def test_a_patch_that_does_not_apply_is_an_internal_error():
    def bad(review):
        ops = [{"op": "replace", "path": "/spec/nothing/here", "value": 1}]
        return {**gating(review), "response": {**gating(review)["response"],
                                               "patch": base64.b64encode(orjson.dumps(ops)).decode()}}
    async with Hook(bad) as hook, FakeApiServer(pod_webhooks=[PodWebhook(hook.url)]) as api:
        status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
        assert status == 500 and out["reason"] == "InternalError", out
        assert api.get("Pod", "team-a", "p1") is None


async def test_a_gated_create_through_an_https_webhook_verified_with_its_ca(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                           "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                           "-out", str(cert)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a certificate: {made.stderr[-200:]!r}")
    async with Hook(gating, tls=(str(cert), str(key))) as hook:
        async with FakeApiServer(pod_webhooks=[PodWebhook(hook.url, ca_file=str(cert))]) as api:
            status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
            assert status == 201 and out["spec"]["schedulingGates"] == [{"name": GATE}], out
        async with FakeApiServer(pod_webhooks=[PodWebhook(hook.url)]) as api:     # not trusted without the CA
            status, out = await call(api, "POST", PODS, pod(labels={QUEUE: "lq"}))
            assert status == 201 and "schedulingGates" not in out["spec"], out
            assert api.webhook_failures and "failed to call webhook" in api.webhook_failures[0][1]
