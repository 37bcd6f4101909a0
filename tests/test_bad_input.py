"""Bad input: requests (HTTP 400 naming the problem, state untouched, server still answering),
snapshot files (SnapshotError naming file, document and reason) and the command line (exit 2)."""
from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import orjson
import pytest

from app.cli import build_from_snapshot
from app.sync.snapshot import SnapshotError, read_snapshot
from builders import (ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor, binding_args,
                      extender_args, snapshot_yaml)

QUOTIENT = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "quotient"

SNAPSHOT = snapshot_yaml(
    Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
    ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", 4)
                                      .resource("memory", "16Gi")).obj(),
    LocalQueue("q", "team-a").cluster_queue("cq").obj(),
    Node("n1").cpu("8").memory("32Gi").obj(), Node("n2").cpu("8").memory("32Gi").obj())

NODES = ["n1", "n2"]


def fingerprint(state) -> tuple:
    """Everything a request could change."""
    return (sorted(state.pods), sorted(state.store.uid_by_key.items()), sorted(state.reservations),
            sorted(state.admitted), {n: dict(q.usage) for n, q in state.tree.queues.items()},
            {n: dict(v) for n, v in state.node_requested.items()}, state.generation)


def with_requests(pod: dict, requests: dict) -> dict:
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][0]["resources"]["requests"] = requests
    return pod


def bad_requests() -> list[tuple[str, str, bytes, str]]:
    """(id, verb, body, what the error must mention)."""
    queued = Pod("bad").queue("q").cpu("1").wire()
    plain = Pod("bad-plain").cpu("1").wire()
    node_obj = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}}
    dumps = orjson.dumps
    cases = [
        ("malformed-json", "filter", b'{"Pod": {"metadata": ', "not valid JSON"),
        ("empty-body", "filter", b"", "not valid JSON"),
        ("json-array", "filter", b'[{"Pod": {}}]', "must be a JSON object"),
        ("json-string", "prioritize", b'"filter"', "must be a JSON object"),
        ("no-pod", "filter", dumps({"Nodes": None, "NodeNames": NODES}), '"Pod"'),
        ("pod-not-object", "filter", dumps({"Pod": "bad", "NodeNames": NODES}), '"Pod"'),
        ("pod-without-name", "filter", dumps({"Pod": {"metadata": {"namespace": "team-a"}}, "NodeNames": NODES}),
         "metadata.name"),
        ("nodenames-string", "filter", dumps({"Pod": queued, "Nodes": None, "NodeNames": "n1"}), '"NodeNames"'),
        ("nodenames-not-strings", "filter", dumps({"Pod": queued, "Nodes": None, "NodeNames": ["n1", 7]}),
         '"NodeNames"'),
        ("nodenames-not-strings-prioritize", "prioritize",
         dumps({"Pod": queued, "Nodes": None, "NodeNames": [None]}), '"NodeNames"'),
        ("neither-nodes-nor-names", "filter", dumps({"Pod": queued, "Nodes": None, "NodeNames": None}),
         '"NodeNames" or "Nodes"'),
        ("nodes-without-items", "filter", dumps({"Pod": queued, "Nodes": {"metadata": {}}, "NodeNames": None}),
         '"Nodes"'),
        ("nodes-items-not-list", "prioritize", dumps({"Pod": queued, "Nodes": {"items": node_obj}, "NodeNames": None}),
         '"Nodes"'),
        ("nodes-item-without-name", "filter",
         dumps({"Pod": queued, "Nodes": {"items": [{"metadata": {}}]}, "NodeNames": None}), "metadata.name"),
        ("nodes-item-metadata-null", "filter",
         dumps({"Pod": queued, "Nodes": {"items": [{"metadata": None}]}, "NodeNames": None}), "metadata.name"),
        ("nodes-item-metadata-list", "prioritize",
         dumps({"Pod": queued, "Nodes": {"items": [{"metadata": ["n1"]}]}, "NodeNames": None}), "metadata.name"),
        ("cpu-lots", "filter", dumps(extender_args(with_requests(queued, {"cpu": "lots"}), NODES)), "lots"),
        ("cpu-minus-one", "filter", dumps(extender_args(with_requests(queued, {"cpu": "-1"}), NODES)), "negative"),
        ("cpu-minus-one-unmanaged", "filter", dumps(extender_args(with_requests(plain, {"cpu": "-1"}), NODES)),
         "negative"),
        ("cpu-lots-prioritize", "prioritize", dumps(extender_args(with_requests(queued, {"cpu": "lots"}), NODES)),
         "lots"),
        ("memory-list", "filter", dumps(extender_args(with_requests(queued, {"memory": ["1Gi"]}), NODES)), "memory"),
        ("cpu-1e30", "filter", dumps(extender_args(with_requests(queued, {"cpu": "1e30"}), NODES)), "absurdly large"),
        ("cpu-1e30-unmanaged", "filter", dumps(extender_args(with_requests(plain, {"cpu": "1e30"}), NODES)),
         "absurdly large"),
        ("cpu-1e30-prioritize", "prioritize", dumps(extender_args(with_requests(queued, {"cpu": "1e30"}), NODES)),
         "absurdly large"),
        ("containers-not-list", "filter",
         dumps(extender_args({**queued, "spec": {"containers": {"name": "c"}}}, NODES)), "containers"),
        ("preempt-victims-list", "preempt",
         dumps({"Pod": plain, "NodeNameToVictims": None, "NodeNameToMetaVictims": [{"n1": {"Pods": []}}]}),
         "NodeNameToMetaVictims"),
        ("preempt-victim-entry-list", "preempt",
         dumps({"Pod": plain, "NodeNameToVictims": None, "NodeNameToMetaVictims": {"n1": [{"UID": "u"}]}}),
         "n1"),
        ("preempt-victim-without-uid", "preempt",
         dumps({"Pod": plain, "NodeNameToVictims": None, "NodeNameToMetaVictims": {"n1": {"Pods": [{"uid": "u"}]}}}),
         "UID"),
        ("preempt-victim-metadata-null", "preempt",
         dumps({"Pod": plain, "NodeNameToMetaVictims": None, "NodeNameToVictims": {"n1": {"Pods": [{"metadata": None}]}}}),
         "UID"),
        ("preempt-no-pod", "preempt", dumps({"NodeNameToMetaVictims": {}}), '"Pod"'),
        ("preempt-bad-pod", "preempt",
         dumps({"Pod": with_requests(plain, {"cpu": "lots"}), "NodeNameToMetaVictims": {}}), "lots"),
        ("bind-missing-podname", "bind", dumps({"PodNamespace": "team-a", "PodUID": "u", "Node": "n1"}), '"PodName"'),
        ("bind-node-not-string", "bind", dumps({"PodName": "a", "PodNamespace": "team-a", "PodUID": "u", "Node": 1}),
         '"Node"'),
        ("bind-array", "bind", b"[]", "must be a JSON object"),
        ("bind-malformed", "bind", b'{"PodName": "a"', "not valid JSON"),
    ]
    return cases


BAD_REQUESTS = bad_requests()


CLUSTER = SNAPSHOT         # the conftest's ext fixture builds it


async def good_request(client, verb: str, n: int) -> None:
    """A request kube-scheduler could send; it must succeed."""
    pod = Pod(f"good-{verb}-{n}").cpu("100m").wire()
    if verb in ("filter", "prioritize"):
        r = await client.post(f"/{verb}", json=extender_args(pod, NODES))
        assert r.status_code == 200, r.text
        if verb == "filter":
            assert r.json()["NodeNames"] == NODES
        else:
            assert [e["Host"] for e in r.json()] == NODES
    elif verb == "preempt":
        victims = {"n1": {"Pods": [{"UID": "victim-1"}], "NumPDBViolations": 0}}
        r = await client.post("/preempt", json={"Pod": pod, "NodeNameToVictims": None,
                                               "NodeNameToMetaVictims": victims})
        assert r.status_code == 200, r.text
        assert r.json() == {"NodeNameToMetaVictims": victims}
    else:
        assert (await client.post("/filter", json=extender_args(pod, NODES))).status_code == 200
        r = await client.post("/bind", json=binding_args(pod, "n2"))
        assert r.status_code == 200 and r.json() == {"Error": ""}, r.text


@pytest.mark.parametrize("case,verb,body,mention", BAD_REQUESTS, ids=[c[0] for c in BAD_REQUESTS])
async def test_bad_request_is_400_and_changes_nothing(ext, api, case, verb, body, mention):
    async with api(ext) as client:
        before = fingerprint(ext.state)
        r = await client.post(f"/{verb}", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, r.text
        assert r.headers["content-type"].startswith("application/json")
        answer = r.json()
        assert set(answer) == {"error"}
        assert isinstance(answer["error"], str)
        assert answer["error"].startswith(f"{verb}: ")
        assert mention in answer["error"], answer["error"]
        assert fingerprint(ext.state) == before           # no reservation, no pod learned
        await good_request(client, verb, 0)          # still answering


async def test_every_bad_request_in_a_row_then_normal_work(ext, api):
    async with api(ext) as client:
        for i, (case, verb, body, _) in enumerate(BAD_REQUESTS):
            before = fingerprint(ext.state)
            r = await client.post(f"/{verb}", content=body)
            assert r.status_code == 400, case
            assert fingerprint(ext.state) == before, case
            await good_request(client, verb, i)
        # A queued pod is still admitted and charged normally afterwards.
        pod = Pod("after").queue("q").cpu("2").wire()
        assert (await client.post("/filter", json=extender_args(pod, NODES))).json()["NodeNames"] == NODES
        assert (await client.post("/bind", json=binding_args(pod, "n1"))).json() == {"Error": ""}
    assert ext.state.tree.queues["cq"].usage[("default-flavor", "cpu")] == 2000
    assert "uid-team-a-bad" not in ext.state.pods


async def test_absurd_quantity_is_never_admitted(ext, api):
    pod = with_requests(Pod("absurd").queue("q").cpu("1").wire(), {"cpu": "1e30"})
    async with api(ext) as client:
        for verb in ("filter", "prioritize"):
            assert (await client.post(f"/{verb}", json=extender_args(pod, NODES))).status_code == 400
        r = await client.post("/bind", json=binding_args(pod, "n1"))
    assert r.status_code == 200 and "team-a/absurd" in r.json()["Error"]       # never learned
    assert not ext.state.admitted and not ext.state.reservations
    assert pod["metadata"]["uid"] not in ext.state.pods
    assert ext.state.tree.queues["cq"].usage.get(("default-flavor", "cpu"), 0) == 0


@pytest.mark.parametrize("field,value", [
    (("spec", "priorityClassName"), ["high"]),
    (("spec", "nodeName"), {"name": "n1"}),
    (("status", "phase"), ["Pending"]),
    (("status", "conditions"), 1),
])
async def test_wrongly_typed_pod_fields_are_400(ext, api, field, value):
    """A wrong type must be refused before the pod reaches the state (a stored one would break every rebuild)."""
    pod = Pod("typed").queue("q").cpu("1").wire()
    pod[field[0]][field[1]] = value
    async with api(ext) as client:
        before = fingerprint(ext.state)
        for verb in ("filter", "prioritize"):
            r = await client.post(f"/{verb}", json=extender_args(pod, NODES))
            assert r.status_code == 400, r.text
            assert field[1] in r.json()["error"], r.text
        assert fingerprint(ext.state) == before
        await good_request(client, "filter", 0)
    ext.state.upsert_kueue("ResourceFlavor", "default-flavor", ext.state.flavors["default-flavor"])     # a rebuild still works


# ---- unknown keys are ignored ----------------------------------------------------------------------------

async def test_unknown_keys_are_ignored(ext, api):
    pod = Pod("extra").queue("q").cpu("1").wire()
    pod["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:x": {}}}]
    pod["metadata"]["someFutureField"] = {"a": [1, 2]}
    pod["spec"]["someFutureField"] = True
    pod["spec"]["containers"][0]["futureField"] = "x"
    pod["status"]["somethingNew"] = 1
    async with api(ext) as client:
        body = {**extender_args(pod, NODES), "FutureArgs": {"x": 1}, "nodenames": ["ignored"]}
        r = await client.post("/filter", json=body)
        assert r.status_code == 200 and r.json()["NodeNames"] == NODES
        r = await client.post("/prioritize", json=body)
        assert r.status_code == 200 and [e["Host"] for e in r.json()] == NODES
        victims = {"n1": {"Pods": [{"UID": "v1", "Extra": 1}], "NumPDBViolations": 0, "Future": None}}
        r = await client.post("/preempt", json={"Pod": Pod("free").cpu("1").wire(), "NodeNameToVictims": None,
                                               "NodeNameToMetaVictims": victims, "Unknown": []})
        assert r.status_code == 200
        assert r.json() == {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 0}}}
        r = await client.post("/bind", json={**binding_args(pod, "n1"), "Extra": "x"})
        assert r.status_code == 200 and r.json() == {"Error": ""}
    assert pod["metadata"]["uid"] in ext.state.admitted


# ---- snapshot files --------------------------------------------------------------------------------------

NS = snapshot_yaml(Namespace("team-a").obj())
FLAVOR = snapshot_yaml(ResourceFlavor("default-flavor").obj())


def cq_doc(nominal=4, borrowing=None, lending=None, flavor: str = "default-flavor", cohort: str | None = None,
           name: str = "cq") -> str:
    quotas = FlavorQuotas(flavor).resource("cpu", nominal, borrowing, lending)
    return snapshot_yaml(ClusterQueue(name).cohort(cohort).resource_group(quotas).obj())


LQ = snapshot_yaml(LocalQueue("q", "team-a").cluster_queue("cq").obj())
NODE = snapshot_yaml(Node("n1").cpu("8").memory("32Gi").obj())


def pod_doc(queue: str = "q") -> str:
    return snapshot_yaml(Pod("p").queue(queue).cpu("1").obj())


def docs(*parts: str) -> str:
    return "---\n".join(parts)


# (id, file text, document number, reason fragment, found by read_snapshot alone)
BAD_SNAPSHOTS = [
    ("invalid-yaml", docs(NS, FLAVOR, "kind: Node\nmetadata: {name: [n1\n"), 3, "not valid YAML", True),
    ("not-a-mapping", docs(NS, "- just\n- a list\n"), 2, "not a mapping", True),
    ("missing-flavor", docs(NS, FLAVOR, cq_doc(flavor="gold"), LQ), 3, "flavor gold is not defined", True),
    ("lq-missing-cq", docs(NS, FLAVOR, LQ), 3, "spec.clusterQueue cq is not defined", True),
    ("pod-missing-queue", docs(NS, FLAVOR, cq_doc(), LQ, NODE, pod_doc("nope")), 6,
     "kueue.x-k8s.io/queue-name=nope names no LocalQueue", True),
    ("duplicate", docs(NS, FLAVOR, cq_doc(), NODE, NODE), 5, "duplicate of document 4", True),
    ("unknown-kind", docs(NS, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team-a}\n"), 2,
     "kind is not one Quotient reads", True),
    ("unknown-quotient-kind", docs(NS, "apiVersion: quotient.dev/v1alpha1\nkind: Policy\nmetadata: {name: x}\n"),
     2, "unknown quotient.dev kind", True),
    ("kueue-wrong-group", docs(NS, "apiVersion: v1\nkind: ResourceFlavor\nmetadata: {name: f}\n"), 2,
     "apiVersion must be kueue.x-k8s.io", True),
    ("negative-nominal", docs(NS, FLAVOR, cq_doc(-1)), 3, "negative", False),
    ("lending-above-nominal", docs(NS, FLAVOR, cq_doc(4, lending=5, cohort="co")),
     3, "lendingLimit must be <= nominalQuota", False),
    ("borrowing-without-cohort", docs(NS, FLAVOR, cq_doc(4, borrowing=2)),
     3, "borrowingLimit needs a cohort", False),
    ("bad-node-quantity", docs(NS, snapshot_yaml(Node("n1").cpu("lots").obj())), 2, "lots", False),
]


@pytest.mark.parametrize("case", [c[0] for c in BAD_SNAPSHOTS])
def test_bad_snapshot_names_file_document_and_reason(write_yaml, case):
    _, text, index, reason, early = next(c for c in BAD_SNAPSHOTS if c[0] == case)
    path = write_yaml(text, f"{case}.yaml")
    with pytest.raises(SnapshotError) as info:
        build_from_snapshot(path)
    message = str(info.value)
    assert message.startswith(path + ":"), message
    assert f"document {index}" in message, message
    assert reason in message, message
    if early:      # found while reading, before anything is applied
        with pytest.raises(SnapshotError) as info:
            read_snapshot(path)
        assert f"document {index}" in str(info.value) and reason in str(info.value)


def test_missing_snapshot_file(tmp_path):
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(SnapshotError) as info:
        build_from_snapshot(path)
    assert path in str(info.value)


def test_good_snapshot_builds(write_yaml):
    ext = build_from_snapshot(write_yaml(docs(NS, FLAVOR, cq_doc(), LQ, NODE, pod_doc())))
    assert set(ext.state.nodes) == {"n1"} and len(ext.state.pods) == 1


# ---- the command line ---------------------------------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(QUOTIENT), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("case", ["invalid-yaml", "missing-flavor", "negative-nominal", "unknown-kind"])
def test_serve_with_a_bad_snapshot_exits_2_before_serving(write_yaml, case):
    _, text, index, reason, _ = next(c for c in BAD_SNAPSHOTS if c[0] == case)
    path = write_yaml(text, "bad.yaml")
    # A free port nobody listens on: if serve started the server, the timeout would fire.
    proc = run_cli("serve", "--snapshot", path, "--port", "18977")
    assert proc.returncode == 2, proc.stderr
    assert path in proc.stderr and f"document {index}" in proc.stderr and reason in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Uvicorn running" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("case", ["invalid-yaml", "missing-flavor", "lq-missing-cq", "unknown-kind"])
def test_simulate_with_a_bad_file_exits_2(write_yaml, case):
    _, text, index, reason, _ = next(c for c in BAD_SNAPSHOTS if c[0] == case)
    path = write_yaml(text, "bad.yaml")
    proc = run_cli("simulate", path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert path in proc.stderr and f"document {index}" in proc.stderr and reason in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("case", ["negative-nominal", "borrowing-without-cohort", "lending-above-nominal",
                                  "bad-node-quantity"])
def test_simulate_with_an_invalid_object_exits_2(write_yaml, case):
    _, text, index, reason, _ = next(c for c in BAD_SNAPSHOTS if c[0] == case)
    path = write_yaml(text, "bad.yaml")
    proc = run_cli("simulate", path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert path in proc.stderr and f"document {index}" in proc.stderr and reason in proc.stderr
    assert "Traceback" not in proc.stderr
