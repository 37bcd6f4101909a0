"""Replays the captured kube-scheduler v1.36 requests (../shared/wire/) against the real routes.

Every captured pod has no kueue.x-k8s.io/queue-name label, so Quotient does not
manage it: filter lets every offered node through, preempt keeps kube-scheduler's
candidates, and the answers must have exactly the shape kube-scheduler decodes.
"""
from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from app.api import wire

WIRE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "wire"

FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}

# The recording cluster: 3 Nodes node-a/b/c (cpu 2, memory 4Gi, pods 10), pods in namespace e2e.
WIRE_SNAPSHOT = """
apiVersion: v1
kind: Namespace
metadata: {name: e2e}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {kubernetes.io/hostname: node-a, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "2", memory: 4Gi, pods: "10"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b
  labels: {kubernetes.io/hostname: node-b, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "2", memory: 4Gi, pods: "10"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-c
  labels: {kubernetes.io/hostname: node-c, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "2", memory: 4Gi, pods: "10"}
"""


def request_bytes(name: str) -> bytes:
    return (WIRE_DIR / f"{name}.request.json").read_bytes()


def request_json(name: str) -> dict:
    return json.loads(request_bytes(name))


def response_json(name: str):
    return json.loads((WIRE_DIR / f"{name}.response.json").read_text())


@pytest.fixture
def wire_ext(load_extender):
    return load_extender(WIRE_SNAPSHOT)


def test_wire_samples_are_present():
    for name in ("filter-nodecache-true", "filter-nodecache-false", "prioritize", "prioritize-nodecache-false",
                 "preempt-nodecache-true", "preempt-nodecache-false", "preempt-empty-answer", "bind"):
        assert (WIRE_DIR / f"{name}.request.json").is_file(), name


# ---- filter ------------------------------------------------------------------------------------

async def test_filter_nodecache_true_passes_every_node_in_order(wire_ext, api):
    req = request_json("filter-nodecache-true")
    assert "kueue.x-k8s.io/queue-name" not in req["Pod"]["metadata"]["labels"]   # not managed
    async with api(wire_ext) as client:
        r = await client.post("/filter", content=request_bytes("filter-nodecache-true"),
                              headers={"Content-Type": "application/json"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    answer = orjson.loads(r.content)
    assert set(answer) == FILTER_KEYS
    assert set(answer) == set(response_json("filter-nodecache-true"))
    assert answer["NodeNames"] == req["NodeNames"] == ["node-a", "node-b", "node-c"]
    assert answer["Nodes"] is None
    assert answer["Error"] == ""
    assert not answer["FailedNodes"] and not answer["FailedAndUnresolvableNodes"]
    assert answer == response_json("filter-nodecache-true")


async def test_filter_keeps_the_rotated_node_order(wire_ext, api):
    """kube-scheduler rotates the evaluation order between cycles; the answer keeps it."""
    req = request_json("filter-nodecache-true")
    req["NodeNames"] = ["node-b", "node-c", "node-a"]
    async with api(wire_ext) as client:
        r = await client.post("/filter", content=orjson.dumps(req))
    assert r.status_code == 200
    assert r.json()["NodeNames"] == ["node-b", "node-c", "node-a"]


async def test_filter_nodecache_false_returns_the_node_objects(wire_ext, api):
    req = request_json("filter-nodecache-false")
    assert req["NodeNames"] is None and req["Nodes"]["items"]
    async with api(wire_ext) as client:
        r = await client.post("/filter", content=request_bytes("filter-nodecache-false"))
    assert r.status_code == 200
    answer = r.json()
    expected = response_json("filter-nodecache-false")
    assert set(answer) == FILTER_KEYS == set(expected)
    assert answer["NodeNames"] is None
    assert isinstance(answer["Nodes"], dict) and "items" in answer["Nodes"]
    assert answer["Nodes"]["items"] == req["Nodes"]["items"]          # the same objects, same order
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["node-a", "node-c", "node-b"]
    assert answer["Error"] == ""
    assert answer == expected


@pytest.mark.parametrize("name", [
    "filter-dropped-without-reason", "filter-error-field", "filter-failedAndUnresolvableNodes",
    "filter-failedNodes", "filter-lowercase-keys", "filter-nodecache-false-answered-with-NodeNames",
    "filter-nominated-node-after-preemption",
])
async def test_every_captured_filter_request_is_answered_in_its_own_shape(wire_ext, api, name):
    req = request_json(name)
    async with api(wire_ext) as client:
        r = await client.post("/filter", content=request_bytes(name))
    assert r.status_code == 200
    answer = r.json()
    assert set(answer) == FILTER_KEYS
    assert answer["Error"] == ""
    if req["NodeNames"] is not None:
        assert answer["Nodes"] is None
        assert answer["NodeNames"] == req["NodeNames"]
    else:
        assert answer["NodeNames"] is None
        assert answer["Nodes"]["items"] == req["Nodes"]["items"]


async def test_filter_nominated_node_only(wire_ext, api):
    """After a preemption only the nominated node is offered; it must come back."""
    async with api(wire_ext) as client:
        r = await client.post("/filter", content=request_bytes("filter-nominated-node-after-preemption"))
    assert r.status_code == 200
    assert r.json()["NodeNames"] == ["node-c"]


async def test_filter_with_kube_scheduler_headers_under_the_prefix(wire_ext, api):
    headers = json.loads((WIRE_DIR / "http-request-headers.json").read_text())["nodecache-true/filter"]
    sent = {k: v for k, v in headers["headers"].items() if k not in ("Host", "Content-Length")}
    async with api(wire_ext, "/scheduler") as client:
        r = await client.post(headers["path"], content=(WIRE_DIR / "filter-nodecache-true.request.raw").read_bytes(),
                              headers=sent)
    assert r.status_code == 200
    assert r.json()["NodeNames"] == ["node-a", "node-b", "node-c"]


# ---- prioritize --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["prioritize", "prioritize-nodecache-false"])
async def test_prioritize_answers_a_bare_host_priority_list(wire_ext, api, name):
    req = request_json(name)
    names = req["NodeNames"] if req["NodeNames"] is not None else [n["metadata"]["name"]
                                                                     for n in req["Nodes"]["items"]]
    async with api(wire_ext) as client:
        r = await client.post("/prioritize", content=request_bytes(name))
    assert r.status_code == 200
    answer = r.json()
    assert isinstance(answer, list)
    assert [e["Host"] for e in answer] == names
    expected = response_json(name)
    for entry in answer:
        assert set(entry) == {"Host", "Score"} == set(expected[0])
        assert isinstance(entry["Score"], int) and not isinstance(entry["Score"], bool)
        assert 0 <= entry["Score"] <= 10


# ---- preempt -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["preempt-nodecache-true", "preempt-nodecache-false"])
async def test_preempt_echoes_the_candidates_of_an_unmanaged_pod(wire_ext, api, name):
    req = request_json(name)
    source = req["NodeNameToMetaVictims"] or req["NodeNameToVictims"]
    candidates = {node: [p.get("UID") or p["metadata"]["uid"] for p in v["Pods"]] for node, v in source.items()}
    async with api(wire_ext) as client:
        r = await client.post("/preempt", content=request_bytes(name))
    assert r.status_code == 200
    answer = r.json()
    assert set(answer) == {"NodeNameToMetaVictims"}
    victims = answer["NodeNameToMetaVictims"]
    assert set(victims) == set(candidates) == {"node-a", "node-b", "node-c"}
    for node, entry in victims.items():
        assert set(entry) == {"Pods", "NumPDBViolations"}
        assert entry["NumPDBViolations"] == 0
        assert [p for p in entry["Pods"]] == [{"UID": uid} for uid in candidates[node]]
    # Always MetaVictims, whatever the request carried: the same as what the recorder answered.
    assert answer == response_json(name)


async def test_preempt_never_returns_a_node_without_victims(wire_ext, api):
    async with api(wire_ext) as client:
        r = await client.post("/preempt", content=request_bytes("preempt-empty-answer"))
        # A candidate with no victims is not a candidate (kube-scheduler: "expected at least one victim").
        req = request_json("preempt-empty-answer")
        req["NodeNameToMetaVictims"]["node-d"] = {"Pods": [], "NumPDBViolations": 0}
        r2 = await client.post("/preempt", content=orjson.dumps(req))
    for resp in (r, r2):
        assert resp.status_code == 200
        victims = resp.json()["NodeNameToMetaVictims"]
        assert isinstance(victims, dict)
        for node, entry in victims.items():
            assert len(entry["Pods"]) >= 1, node
            assert all(isinstance(p.get("UID"), str) and p["UID"] for p in entry["Pods"])
    assert "node-d" not in r2.json()["NodeNameToMetaVictims"]


# ---- bind --------------------------------------------------------------------------------------

def test_bind_request_decodes():
    args = wire.decode_binding_args(request_bytes("bind"))
    assert (args.pod_name, args.pod_namespace, args.pod_uid, args.node) == \
        ("plain-1", "e2e", "1c72a287-8708-4141-80d2-322670d8257c", "node-a")


async def test_bind_after_filter_answers_error_key(wire_ext, api):
    async with api(wire_ext) as client:
        r = await client.post("/filter", content=request_bytes("filter-nodecache-true"))
        assert r.status_code == 200
        r = await client.post("/bind", content=request_bytes("bind"))
    assert r.status_code == 200
    answer = r.json()
    assert set(answer) == {"Error"}
    assert answer["Error"] == ""
    pod = wire_ext.state.store.pod_by_key("e2e/plain-1")
    assert pod is not None and pod.node_name == "node-a"
    assert pod.uid not in wire_ext.state.admitted          # unmanaged: no quota charged
    assert wire_ext.state.node_requested["node-a"]["cpu"] == 100


async def test_bind_of_a_pod_filter_never_saw_names_it(wire_ext, api):
    async with api(wire_ext) as client:
        r = await client.post("/bind", content=request_bytes("bind"))
    assert r.status_code == 200
    answer = r.json()
    assert set(answer) == {"Error"}
    assert "e2e/plain-1" in answer["Error"]


# ---- raw bytes (Go's compact encoding) ------------------------------------------------------------

RAW_NAMES = sorted(p.name[: -len(".request.raw")] for p in WIRE_DIR.glob("*.request.raw"))


def test_raw_files_exist():
    assert {"filter-nodecache-true", "filter-nodecache-false", "prioritize", "preempt-nodecache-true",
            "preempt-nodecache-false", "bind"} <= set(RAW_NAMES)


@pytest.mark.parametrize("name", RAW_NAMES)
def test_raw_body_decodes_like_the_pretty_json(name):
    raw = (WIRE_DIR / f"{name}.request.raw").read_bytes()
    assert b"\n  " not in raw          # compact, as kube-scheduler sends it
    assert orjson.loads(raw) == json.loads(request_bytes(name))
    if name.startswith(("filter", "prioritize")):
        assert wire.decode_extender_args(raw) == wire.decode_extender_args(request_bytes(name))
    elif name.startswith("preempt"):
        assert wire.decode_preemption_args(raw) == wire.decode_preemption_args(request_bytes(name))
    else:
        assert wire.decode_binding_args(raw) == wire.decode_binding_args(request_bytes(name))


@pytest.mark.parametrize("name,verb", [("filter-nodecache-true", "filter"), ("filter-nodecache-false", "filter"),
                                       ("prioritize", "prioritize"),
                                       ("prioritize-nodecache-false", "prioritize"),
                                       ("preempt-nodecache-true", "preempt"),
                                       ("preempt-nodecache-false", "preempt")])
async def test_raw_and_pretty_get_the_same_answer(load_extender, api, name, verb):
    answers = []
    for body in ((WIRE_DIR / f"{name}.request.raw").read_bytes(), request_bytes(name)):
        ext = load_extender(WIRE_SNAPSHOT)          # a fresh state each time
        async with api(ext) as client:
            r = await client.post(f"/{verb}", content=body)
        assert r.status_code == 200
        answers.append(r.content)
    assert answers[0] == answers[1]


async def test_go_html_escapes_decode(wire_ext, api):
    """Go writes <, > and & as \\u003c, \\u003e, \\u0026 inside strings."""
    raw = (WIRE_DIR / "filter-nodecache-true.request.raw").read_bytes()
    escaped = raw.replace(b'"annotations":{', b'"annotations":{"note":"a \\u003cb\\u003e \\u0026 c",', 1)
    assert escaped != raw and b"\\u003c" in escaped
    args = wire.decode_extender_args(escaped)
    assert args.pod["metadata"]["annotations"]["note"] == "a <b> & c"
    async with api(wire_ext) as client:
        r = await client.post("/filter", content=escaped)
    assert r.status_code == 200
    assert r.json()["NodeNames"] == ["node-a", "node-b", "node-c"]
