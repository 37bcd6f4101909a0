"""POST /mutate-pods, the mutating admission webhook that holds plain pods behind Kueue's scheduling gate
(app/api/pod_gate.py, routed by app/api/convert.py on the webhook port and the main port), and its switch, the
Configuration's integrations.frameworks (app/config.py).

The review is driven as kube-apiserver sends it (admission.k8s.io/v1 AdmissionReview of a Pod CREATE) and its
JSONPatch is applied to the pod as the API server applies it (RFC 6902 add, by a small applier here), so what is
checked is the pod kube-scheduler would see. The switch is checked through a real `quotient serve`, snapshot and
live, with a Configuration that lists "pod".
"""
from __future__ import annotations

import base64
import copy
import logging

import httpx
import orjson
import pytest

from app.api import convert as webhook
from app.api.convert import ConvertApp
from app.api.pod_gate import review
from app.api.wire import WireError
from app.config import ConfigError, decode_configuration, log_unused
from app.objects.pod import ADMISSION_GATE, QUEUE_LABEL
from fakeapi import FakeApiServer
from serving import free_port, served, served_live

GATE = {"name": ADMISSION_GATE}


def pod(queue: str | None = "lq", gates: list | None = None, node: str = "", owner: dict | None = None,
        phase: str | None = None) -> dict:
    labels = {"app": "a"} | ({QUEUE_LABEL: queue} if queue is not None else {})
    meta = {"name": "p", "namespace": "team-a", "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    spec = {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    if node:
        spec["nodeName"] = node
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase:
        out["status"] = {"phase": phase}
    return out


def admission(obj: object, uid: object = "uid-1", operation: str = "CREATE", kind: dict | None = None,
              **request) -> dict:
    """An AdmissionReview as kube-apiserver sends it for a pod CREATE (admission.k8s.io/v1)."""
    req = {"uid": uid, "kind": kind or {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": "pods"},
           "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
           "requestResource": {"group": "", "version": "v1", "resource": "pods"},
           "namespace": "team-a", "operation": operation, "userInfo": {"username": "alice"},
           "object": obj, "oldObject": None, "dryRun": False,
           "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}, **request}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def apply_patch(doc: dict, patch: list[dict]) -> dict:
    """RFC 6902 `add` (the only op this webhook sends), as kube-apiserver applies a JSONPatch: a missing parent is
    an error, "-" appends, an existing member is replaced."""
    out = copy.deepcopy(doc)
    for op in patch:
        assert op["op"] == "add", op
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = out
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target[p]     # KeyError: a missing parent
        if isinstance(target, list):
            target.insert(len(target) if last == "-" else int(last), op["value"])
        else:
            target[last] = op["value"]
    return out


def answered(obj: dict, gate_pods: bool = True, **request) -> tuple[dict, dict]:
    """(the response, the pod as the API server stores it after the patch)."""
    out = orjson.loads(review(orjson.dumps(admission(obj, **request)), gate_pods))
    assert (out["apiVersion"], out["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = out["response"]
    assert response["uid"] == "uid-1" and response["allowed"] is True
    assert ("patch" in response) == ("patchType" in response)      # the API server refuses one without the other
    if "patch" not in response:
        return response, obj
    assert response["patchType"] == "JSONPatch"
    return response, apply_patch(obj, orjson.loads(base64.b64decode(response["patch"])))


def gates(obj: dict) -> list | None:
    return obj["spec"].get("schedulingGates")


JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j-uid", "controller": True,
       "blockOwnerDeletion": True}


# ---- the review -------------------------------------------------------------------------------------------------

def test_a_queued_pod_gets_the_admission_gate_in_a_list_created_for_it():
    response, after = answered(pod())
    assert gates(after) == [GATE]
    assert after["metadata"] == pod()["metadata"] and after["spec"]["containers"] == pod()["spec"]["containers"]


def test_the_gate_is_appended_to_the_pods_own_gates_and_a_null_list_is_replaced():
    _, after = answered(pod(gates=[{"name": "example.com/quota-check"}]))
    assert gates(after) == [{"name": "example.com/quota-check"}, GATE]
    _, after = answered(pod(gates=[]))
    assert gates(after) == [GATE]
    null = pod()
    null["spec"]["schedulingGates"] = None
    _, after = answered(null)
    assert gates(after) == [GATE]


@pytest.mark.parametrize("obj, why", [
    (pod(queue=None), "no queue label"),
    (pod(queue=""), "empty queue label"),
    (pod(owner=JOB), "a batch/v1 Job's pod: the extender path"),
    (pod(owner={**JOB, "apiVersion": "batch/v2"}), "a Job of another batch version"),
    (pod(gates=[GATE]), "already gated"),
    (pod(gates=[{"name": "x.io/other"}, GATE]), "already gated, behind another gate"),
    (pod(node="node-1"), "created bound: the API server refuses gates with nodeName"),
    (pod(phase="Succeeded"), "terminal"),
    (pod(phase="Failed"), "terminal"),
])
def test_a_pod_that_must_not_be_gated_is_allowed_unchanged(obj, why):
    response, after = answered(obj)
    assert "patch" not in response and after == obj, why


@pytest.mark.parametrize("owner", [
    {**JOB, "controller": False},                                          # owned, but not its controller
    {**JOB, "controller": None},
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True},
    {"apiVersion": "example.com/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True},  # not batch's Job
])
def test_a_pod_owned_by_anything_but_a_controlling_batch_job_is_gated(owner):
    assert gates(answered(pod(owner=owner))[1]) == [GATE]


def test_with_gating_off_a_queued_pod_is_allowed_without_a_patch():
    response, after = answered(pod(), gate_pods=False)
    assert response == {"uid": "uid-1", "allowed": True} and after == pod()


@pytest.mark.parametrize("request_change", [
    {"operation": "UPDATE"},
    {"operation": "DELETE"},
    {"kind": {"group": "", "version": "v1", "kind": "Binding"}, "subResource": "binding"},
    {"kind": {"group": "policy", "version": "v1", "kind": "Eviction"}, "subResource": "eviction"},
    {"subResource": "status"},
])
def test_only_a_pod_create_is_gated(request_change):
    response, _ = answered(pod(), **request_change)
    assert "patch" not in response


@pytest.mark.parametrize("obj", [None, "a pod", {"metadata": {"labels": {QUEUE_LABEL: "lq"}}},
                                 {"metadata": None, "spec": {}}, {**pod(), "spec": []}])
def test_an_object_that_is_no_pod_is_allowed_and_left_to_the_api_servers_validation(obj):
    response, _ = answered(obj)
    assert "patch" not in response


@pytest.mark.parametrize("body, message", [
    (b"{not json", "body is not valid JSON"),
    (b"[]", "body must be a JSON object"),
    (orjson.dumps(admission(pod(), uid=None)), "no request.uid"),
    (orjson.dumps(admission(pod(), uid="")), "no request.uid"),
    (orjson.dumps(admission(pod(), uid=3)), "no request.uid"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}), "no request.uid"),
    (orjson.dumps({**admission(pod()), "apiVersion": "admission.k8s.io/v1beta1"}), "admissionReviewVersions: [v1]"),
    (orjson.dumps({**admission(pod()), "kind": "ConversionReview"}), "expected a admission.k8s.io/v1 AdmissionReview"),
])
def test_a_body_that_is_not_an_admission_review_is_a_wire_error(body, message):
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
        review(body, True)


# ---- the route ----------------------------------------------------------------------------------------------

async def post(body, path: str = "/mutate-pods", method: str = "POST", app=None) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app or ConvertApp(gate_pods=True)),
                                 base_url="http://t") as c:
        return await c.request(method, path, content=content)


def patched(r: httpx.Response, obj: dict) -> dict:
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    response = r.json()["response"]
    assert response["allowed"] is True
    return apply_patch(obj, orjson.loads(base64.b64decode(response["patch"]))) if "patch" in response else obj


async def test_the_webhook_port_gates_as_its_configuration_says():
    assert gates(patched(await post(admission(pod())), pod())) == [GATE]
    assert gates(patched(await post(admission(pod()), app=ConvertApp()), pod())) is None     # the default: off


async def test_a_malformed_review_is_a_400_naming_the_route():
    for body in (b"{", orjson.dumps(admission(pod(), uid=None)), orjson.dumps({"kind": "AdmissionReview"})):
        r = await post(body)
        assert r.status_code == 400 and r.json()["error"].startswith("mutate-pods: "), r.text


async def test_other_paths_and_methods_keep_their_404_and_405_and_a_huge_body_is_refused(monkeypatch):
    r = await post(admission(pod()), method="GET")
    assert r.status_code == 405 and r.json()["error"] == "mutate-pods: use POST"
    assert (await post(b"", path="/convert", method="PUT")).json()["error"] == "convert: use POST"
    for path in ("/mutate-pods/", "/mutate", "/validate-pods", "/filter", "/livez", "/"):
        r = await post(admission(pod()), path=path)
        assert r.status_code == 404 and "only POST /convert and POST /mutate-pods" in r.json()["error"], path
    monkeypatch.setattr(webhook, "MUTATE_BODY", 2000)
    big = pod()
    big["metadata"]["annotations"] = {"a": "x" * 3000}
    r = await post(admission(big))
    assert r.status_code == 413 and "mutate-pods: body larger than 2000 bytes" in r.json()["error"]
    assert gates(patched(await post(admission(pod())), pod())) == [GATE]        # a small one still answered


async def test_the_main_port_serves_mutate_pods_with_the_gate_it_was_given(build_extender):
    from app.api.app import create_app

    gating = create_app(build_extender(""), gate_pods=True)
    assert gates(patched(await post(admission(pod()), app=gating), pod())) == [GATE]
    off = create_app(build_extender(""))
    assert "patch" not in (await post(admission(pod()), app=off)).json()["response"]
    assert (await post(b"{", app=gating)).status_code == 400


def test_with_client_certificates_mutate_pods_needs_what_convert_needs():
    from app.api.identity import Authorizer, Peer

    authorize = Authorizer(prefix="/scheduler")
    assert authorize.route("/mutate-pods").needs == authorize.route("/convert").needs
    for cn, allowed in (("quotient-viewer", True), ("quotient-admin", True), ("quotient-scheduler", False),
                        ("quotient-metrics", False)):
        scope = {"path": "/mutate-pods", "method": "POST", "extensions": {"quotient.client": Peer(cn, ())}}
        assert (authorize(scope) is None) == allowed, cn
    assert authorize({"path": "/mutate-pods", "method": "POST"}) is not None     # anonymous


# ---- the switch: integrations.frameworks --------------------------------------------------------------------

KUEUE = "config.kueue.x-k8s.io"


@pytest.mark.parametrize("doc", [
    {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration", "integrations": {"frameworks": ["pod"]}},
    {"apiVersion": f"{KUEUE}/v1beta1", "kind": "Configuration", "integrations": {"frameworks": ["batch/job", "pod"]}},
    {"apiVersion": f"{KUEUE}/v1beta2", "kind": "Configuration", "integrations": {"frameworks": ["pod"]}},
])
def test_listing_pod_turns_gating_on_in_either_kind_of_configuration(doc):
    cfg = decode_configuration(doc)
    assert cfg.gate_pods is True and cfg.frameworks == tuple(doc["integrations"]["frameworks"])


@pytest.mark.parametrize("doc", [
    None,
    {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration"},
    {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration", "integrations": {"frameworks": []}},
    {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration", "integrations": {"frameworks": None}},
    {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration", "integrations": {"frameworks": ["batch/job"]}},
    {"apiVersion": f"{KUEUE}/v1beta1", "kind": "Configuration"},
    {"apiVersion": f"{KUEUE}/v1beta2", "kind": "Configuration", "integrations": {"frameworks": ["Pod"]}},
])
def test_without_pod_listed_nothing_is_gated(doc):
    assert decode_configuration(doc).gate_pods is False


def test_kueues_other_frameworks_and_integrations_fields_are_kept_and_logged_as_unused(caplog):
    doc = {"apiVersion": f"{KUEUE}/v1beta2", "kind": "Configuration", "controller": {"groupKindConcurrency": {}},
           "integrations": {"frameworks": ["batch/job", "pod", "jobset.x-k8s.io/jobset"],
                            "externalFrameworks": ["Foo.v1.example.com"], "labelKeysToCopy": ["team"]}}
    cfg = decode_configuration(doc)
    assert cfg.gate_pods and cfg.frameworks == ("batch/job", "pod", "jobset.x-k8s.io/jobset")
    assert cfg.unused == ("controller", "integrations.externalFrameworks", "integrations.frameworks[batch/job]",
                          "integrations.frameworks[jobset.x-k8s.io/jobset]", "integrations.labelKeysToCopy")
    own = decode_configuration({"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration",
                                "integrations": {"frameworks": ["pod", "batch/job"]}})
    assert own.gate_pods and own.unused == ("integrations.frameworks[batch/job]",)
    with caplog.at_level(logging.INFO, logger="quotient.config"):
        log_unused(own, "config.yaml")
    assert caplog.messages == ["config.yaml: Quotient does not use integrations.frameworks[batch/job]"]


@pytest.mark.parametrize("doc, message", [
    ({"integrations": {"frameworks": "pod"}}, "integrations.frameworks must be a list of strings"),
    ({"integrations": {"frameworks": ["pod", 3]}}, "integrations.frameworks must be a list of strings"),
    ({"integrations": {"frameworks": {"pod": True}}}, "integrations.frameworks must be a list of strings"),
    ({"integrations": ["pod"]}, "integrations may only hold frameworks"),
    ({"integrations": {"frameworks": ["pod"], "podOptions": {}}}, "integrations may only hold frameworks"),
])
def test_a_bad_integrations_section_of_quotients_own_configuration_names_the_field(doc, message):
    with pytest.raises(ConfigError, match=message):
        decode_configuration({"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration", **doc})


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
@pytest.mark.parametrize("integrations, message", [
    ({"frameworks": "pod"}, "integrations.frameworks must be a list of strings"),
    ({"frameworks": [None]}, "integrations.frameworks must be a list of strings"),
    ("pod", "integrations must be a mapping"),
])
def test_a_bad_integrations_section_of_a_kueue_configuration_names_the_field(version, integrations, message):
    with pytest.raises(ConfigError, match=message):
        decode_configuration({"apiVersion": f"{KUEUE}/{version}", "kind": "Configuration",
                              "integrations": integrations})


# ---- quotient serve: the Configuration reaches both ports ----------------------------------------------------

def _config(tmp_path, frameworks: list[str]) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(orjson.dumps({"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration",
                                  "integrations": {"frameworks": frameworks}}).decode())
    return str(path)


def test_quotient_serve_gates_on_both_ports_as_its_configuration_says(tmp_path):
    webhook_port = free_port()
    with served("--config", _config(tmp_path, ["pod"]), "--conversion-port", str(webhook_port)) as srv:
        with httpx.Client(trust_env=False, timeout=5) as http:
            for url in (f"http://127.0.0.1:{webhook_port}", srv.url):
                assert gates(patched(http.post(f"{url}/mutate-pods", json=admission(pod())), pod())) == [GATE], url
    webhook_port = free_port()
    with served("--config", _config(tmp_path, ["batch/job"]), "--conversion-port", str(webhook_port)) as srv:
        with httpx.Client(trust_env=False, timeout=5) as http:
            for url in (f"http://127.0.0.1:{webhook_port}", srv.url):
                assert "patch" not in http.post(f"{url}/mutate-pods", json=admission(pod())).json()["response"]


async def test_in_live_mode_the_webhook_port_gates_as_the_configuration_says(tmp_path):
    async with FakeApiServer() as api:
        webhook_port = free_port()
        async with served_live(api, tmp_path, "--config", _config(tmp_path, ["pod"]),
                               "--conversion-port", str(webhook_port)) as (_, port, _):
            async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                for p in (webhook_port, port):
                    r = await http.post(f"http://127.0.0.1:{p}/mutate-pods", json=admission(pod()))
                    assert gates(patched(r, pod())) == [GATE], p
