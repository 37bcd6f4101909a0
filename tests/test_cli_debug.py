"""`quotient queues`, `quotient explain` and `serve --log-format json` against a real server on the demo snapshot.

The demo (app/data/demo-snapshot.yaml): team-a-cq has on-demand cpu 16 (borrowingLimit 8)
with etl-1 and etl-2 running (4 CPUs each) and team-a/etl-3 pending (2 CPUs, priority high).
"""
from __future__ import annotations

import subprocess
import time

import httpx
import orjson
import pytest

from serving import QUOTIENT_BIN, free_port, served

POD = """apiVersion: v1
kind: Pod
metadata:
  name: cli-pod
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "40"}}
"""


@pytest.fixture(scope="module")
def server():
    with served("--log-format", "json") as s:
        yield s


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(QUOTIENT_BIN), *args], capture_output=True, text=True, timeout=20, input=stdin)


def test_queues_prints_the_tree_as_a_table(server):
    p = cli("queues", "--server", server.url)
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines()
               if line.startswith("team-a-cq") and " on-demand " in line and " cpu " in line)
    # nominal 16, borrowing limit 8, 8 CPUs used by etl-1 and etl-2
    assert row.split()[:7] == ["team-a-cq", "on-demand", "cpu", "16", "8", "-", "8"]
    assert any(line.split()[:4] == ["team-b-cq", "research", "active", "StrictFIFO"] for line in p.stdout.splitlines())


def test_queues_one_queue_as_json(server):
    p = cli("queues", "team-a-cq", "--server", server.url, "--format", "json")
    assert p.returncode == 0, p.stderr
    view = orjson.loads(p.stdout)
    assert view["name"] == "team-a-cq" and [x["pod"] for x in view["pendingPods"]] == ["team-a/etl-3"]
    assert view["pendingPods"][0]["rule"] == "Admitted"


def test_queues_unknown_name_exits_1_saying_what_was_looked_up(server):
    p = cli("queues", "no-such-cq", "--server", server.url)
    assert p.returncode == 1
    assert p.stderr.startswith("error: no ClusterQueue or Cohort named 'no-such-cq'")
    assert "known: ml-cq, team-a-cq, team-b-cq, research" in p.stderr


def test_explain_a_file_and_standard_input(server, tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    p = cli("explain", str(path), "--server", server.url)
    assert p.returncode == 0, p.stderr
    assert "Rule:          QuotaExceeded" in p.stdout
    assert "cpu request 40 > 24 at most (nominal 16 + borrowing limit 8)" in p.stdout
    q = cli("explain", "-", "--server", server.url, "--format", "json", stdin=POD.replace('"40"', '"1"'))
    assert q.returncode == 0, q.stderr
    view = orjson.loads(q.stdout)
    assert view["decision"]["rule"] == "Admitted" and view["decision"]["flavors"]["cpu"] == "on-demand"
    assert view["pendingAhead"] == 1      # team-a/etl-3, priority high, is ahead


def test_explain_bad_manifest_exits_1_naming_the_problem(server, tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text("kind: Deployment\nmetadata: {name: d}\n")
    p = cli("explain", str(path), "--server", server.url)
    assert p.returncode == 1 and p.stderr.startswith("error: explain: expected kind Pod, got kind 'Deployment'")


def test_explain_missing_file_or_server_exits_2(tmp_path):
    p = cli("explain", str(tmp_path / "absent.yaml"))
    assert p.returncode == 2 and "absent.yaml" in p.stderr
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    port = free_port()      # nobody listens there
    p = cli("explain", str(path), "--server", f"http://127.0.0.1:{port}", "--timeout", "3")
    assert p.returncode == 2 and f"cannot reach Quotient at http://127.0.0.1:{port}" in p.stderr


def test_serve_log_format_json_writes_a_json_line_per_decision(server):
    pod = {"metadata": {"name": "cli-bound", "namespace": "team-a", "uid": "cli-bound",
                        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    with httpx.Client(base_url=server.url, trust_env=False, timeout=5) as c:
        assert c.post("/filter", json={"Pod": pod, "Nodes": None, "NodeNames": ["od-1", "od-2"]}).json()["NodeNames"]
        assert c.post("/bind", json={"PodName": "cli-bound", "PodNamespace": "team-a", "PodUID": "cli-bound",
                                     "Node": "od-2"}).json() == {"Error": ""}
    for _ in range(50):          # the decision is logged right after its answer is sent (app/scheduler/outcome.py)
        lines = [orjson.loads(line) for line in server.log().splitlines() if line.strip()]   # every line is JSON
        if any(line.get("outcome") == "Bound" for line in lines):
            break
        time.sleep(0.05)
    assert any(line["logger"] == "uvicorn.error" and "Uvicorn running" in line["message"] for line in lines)
    [bound] = [line for line in lines if line.get("outcome") == "Bound"]
    assert (bound["logger"], bound["pod"], bound["node"], bound["queue"]) == (
        "quotient.decisions", "team-a/cli-bound", "od-2", "team-a-cq")
    assert bound["flavors"] == {"cpu": "on-demand", "pods": "on-demand"}
