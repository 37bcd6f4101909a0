"""Every example scenario through the simulator (app.sim.run), and invalid scenario files (exit 2)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.sim.run import differences, run_file, simulate
from app.sim.scenario import ScenarioError, load_scenario

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO.parent / "shared" / "scenarios" / "examples"
OWN = REPO / "tests" / "scenarios"          # Quotient's own scenarios: every one must pass
QUOTIENT = REPO / ".venv" / "bin" / "quotient"

PASSING = ["borrowing", "borrowing-limit", "lending-limit", "flavors", "strictfifo", "besteffortfifo",
           "reclaim", "within-queue-priority", "gang-all-or-nothing", "victim-terminating"]


def test_every_example_is_classified():
    names = {p.stem for p in EXAMPLES.glob("*.yaml")}
    assert names == set(PASSING), names ^ set(PASSING)


@pytest.mark.parametrize("name", PASSING)
def test_example_passes(name, capsys):
    code = run_file(str(EXAMPLES / f"{name}.yaml"), verbose=False)
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert f"PASS {EXAMPLES / f'{name}.yaml'}" in out.out


@pytest.mark.parametrize("name", PASSING)
async def test_example_outcome_has_no_differences(name):
    scenario = load_scenario(str(EXAMPLES / f"{name}.yaml"))
    assert scenario.expectation is not None
    outcome = await simulate(scenario)
    assert differences(scenario, outcome) == []
    assert outcome.admitted, name


@pytest.mark.parametrize("path", sorted(OWN.glob("*.yaml")), ids=lambda p: p.stem)
def test_own_scenario_passes(path, capsys):
    code = run_file(str(path), verbose=False)
    out = capsys.readouterr()
    assert code == 0, out.out + out.err




def test_cli_exit_codes_on_examples(tmp_path):
    ok = subprocess.run([str(QUOTIENT), "simulate", "-q", str(EXAMPLES / "flavors.yaml")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS" in ok.stdout
    wrong = tmp_path / "borrowing-wrong.yaml"         # an Expectation that does not hold: a8 is pending
    wrong.write_text((EXAMPLES / "borrowing.yaml").read_text().replace("pending: [team-a/a8]",
                                                                       "admitted: [team-a/a8]"))
    bad = subprocess.run([str(QUOTIENT), "simulate", "-q", str(wrong)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "  - expected team-a/a8 admitted, but it is pending" in bad.stdout and "Traceback" not in bad.stderr


# ---- invalid scenario files: exit 2 with a clear message ------------------------------------------------------

BASE = """apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: team-a}
spec: {clusterQueue: cq}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: p1
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: QUEUE}
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "1"}}
---
apiVersion: quotient.dev/v1alpha1
kind: Expectation
spec:
  EXPECTATION
"""


def scenario(queue: str = "q", expectation: str = "admitted: [team-a/p1]") -> str:
    return BASE.replace("QUEUE", queue).replace("EXPECTATION", expectation)


INVALID = [
    ("pod-names-missing-local-queue", scenario(queue="nope"),
     ["document 6", "kueue.x-k8s.io/queue-name=nope", "no LocalQueue"]),
    ("expectation-names-missing-pod", scenario(expectation="admitted: [team-a/p1, team-a/ghost]"),
     ["document 7", "team-a/ghost", "not in the file"]),
    ("expectation-placement-missing-pod", scenario(expectation="placements: {team-a/ghost: n1}"),
     ["team-a/ghost", "not in the file"]),
    ("unknown-expectation-field", scenario(expectation="admitted: [team-a/p1]\n  admited: [team-a/p1]"),
     ["document 7", "unknown field", "admited"]),
    ("invalid-yaml", scenario().replace("metadata: {name: n1}", "metadata: {name: [n1"),
     ["not valid YAML"]),
    ("unknown-kind", scenario() + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
     ["document 8", "Deployment", "kind is not one Quotient reads"]),
    ("bad-until", scenario(expectation="until: soon"), ["until"]),
]


@pytest.mark.parametrize("name,text,mentions", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_scenario_exits_2(tmp_path, name, text, mentions):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError):
        load_scenario(str(path))
    proc = subprocess.run([str(QUOTIENT), "simulate", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("quotient simulate: ")
    assert str(path) in proc.stderr
    for m in mentions:
        assert m in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_valid_variant_of_the_invalid_base_passes(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(scenario())
    proc = subprocess.run([str(QUOTIENT), "simulate", "-q", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
