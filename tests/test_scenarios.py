"""Every example scenario through the simulator (app.sim.run), and invalid scenario files (exit 2)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.sim.run import differences, run_file, simulate
from app.sim.scenario import ScenarioError, load_scenario
from builders import (ClusterQueue, Expectation, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor,
                      snapshot_yaml)

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

def scenario(queue: str = "q", **expectation) -> str:
    """cq (4 CPUs) behind team-a/q, node n1, pod team-a/p1 (1 CPU) of `queue`, and the Expectation (by default
    p1 admitted)."""
    return snapshot_yaml(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
                         ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", 4)).obj(),
                         LocalQueue("q", "team-a").cluster_queue("cq").obj(), Node("n1").cpu("8").memory("32Gi").obj(),
                         Pod("p1").queue(queue).cpu("1").obj(),
                         Expectation(**(expectation or {"admitted": ["team-a/p1"]})))


INVALID = [
    ("pod-names-missing-local-queue", scenario(queue="nope"),
     ["document 6", "kueue.x-k8s.io/queue-name=nope", "no LocalQueue"]),
    ("expectation-names-missing-pod", scenario(admitted=["team-a/p1", "team-a/ghost"]),
     ["document 7", "team-a/ghost", "not in the file"]),
    ("expectation-placement-missing-pod", scenario(placements={"team-a/ghost": "n1"}),
     ["team-a/ghost", "not in the file"]),
    ("unknown-expectation-field", scenario(admitted=["team-a/p1"], admited=["team-a/p1"]),
     ["document 7", "unknown field", "admited"]),
    ("invalid-yaml", scenario() + "---\nkind: Node\nmetadata: {name: [n1\n",
     ["not valid YAML"]),
    ("unknown-kind", scenario() + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
     ["document 8", "Deployment", "kind is not one Quotient reads"]),
    ("bad-until", scenario(until="soon"), ["until"]),
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
