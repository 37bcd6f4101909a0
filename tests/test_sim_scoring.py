"""How the simulated kube-scheduler picks a node (app/sim/scoring.py, FORMAT.md): NodeResourcesFit's
MostAllocated score as kube-scheduler computes it, and prioritize only where it is registered."""
from __future__ import annotations

import pytest
import yaml

from app.api.verbs import Verbs
from app.sim.run import simulate
from app.sim.scenario import load_scenario
from app.sim.kube_scheduler import SimScheduler
from app.sim.scoring import SHIPPED_WEIGHTS, most_allocated, nonzero
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor

MI = 2**20
GPU = "nvidia.com/gpu"
BOTH = {"cpu": 1, "memory": 1}

# Cases of kube-scheduler's most_allocated_test.go (TestMostAllocatedScoringStrategy): the pod's requests,
# what runs on each node already, each node's allocatable, the weights, and the scores it expects.
CASES = [
    ("differently sized nodes", {"cpu": 3000, "memory": 5000}, [{}, {}],
     [{"cpu": 4000, "memory": 10000}, {"cpu": 6000, "memory": 10000}], BOTH, [62, 50]),
    ("resources requested, pods scheduled with resources", {"cpu": 3000, "memory": 5000},
     [{"cpu": 3000, "memory": 0}, {"cpu": 3000, "memory": 5000}], [{"cpu": 10000, "memory": 20000}] * 2, BOTH,
     [42, 55]),
    ("resources requested equal node capacity", {"cpu": 5000, "memory": 9000}, [{}, {}],
     [{"cpu": 5000, "memory": 10000}, {"cpu": 10000, "memory": 9000}], BOTH, [95, 75]),
    ("memory weighted 2", {"cpu": 3000, "memory": 5000}, [{}, {}],
     [{"cpu": 4000, "memory": 10000}, {"cpu": 6000, "memory": 10000}], {"memory": 2, "cpu": 1}, [58, 50]),
    ("no resources requested, nonzero request for resource", {}, [{"cpu": 200, "memory": 400 * MI}, {}],
     [{"cpu": 250, "memory": 1000 * MI}] * 2, BOTH, [80, 30]),
    ("bypass extended resource if the pod does not request", {"cpu": 3000, "memory": 5000}, [{}, {}],
     [{"cpu": 6000, "memory": 10000}, {"cpu": 6000, "memory": 10000, GPU: 4}], {"cpu": 1, "memory": 1, GPU: 1},
     [50, 50]),
    ("honor extended resource if the pod requests", {"cpu": 3000, "memory": 5000, GPU: 2}, [{}, {}],
     [{"cpu": 6000, "memory": 10000, GPU: 4}, {"cpu": 6000, "memory": 10000, GPU: 10}],
     {"cpu": 1, "memory": 1, GPU: 1}, [50, 40]),
    ("if the node doesn't have a resource", {"cpu": 3000, "memory": 4000}, [{}, {}],
     [{"cpu": 6000, "memory": 10000}, {"cpu": 6000, "memory": 10000, GPU: 4}], {GPU: 2, "cpu": 1, "memory": 1},
     [45, 45]),
]


@pytest.mark.parametrize("name,pod,placed,allocatable,weights,expected", CASES, ids=[c[0] for c in CASES])
def test_most_allocated_scores_as_kube_scheduler_does(name, pod, placed, allocatable, weights, expected):
    got = [most_allocated(nonzero(pod), nonzero(p) if p else {}, a, weights) for p, a in zip(placed, allocatable)]
    assert got == expected


def test_scoring_counts_what_kube_scheduler_counts_for_an_unset_request():
    """100m cpu and 200Mi memory for a request left unset, as schedutil's non-zero defaults; set ones stay."""
    assert nonzero({}) == {"cpu": 100, "memory": 200 * MI}
    assert nonzero({"cpu": 2000, GPU: 1}) == {"cpu": 2000, "memory": 200 * MI, GPU: 1}


def packing(running: list[dict], pending: dict) -> str:
    """A scenario: two 8-CPU, 32Gi nodes, one ClusterQueue with room for everything, pods already running
    (in no queue) and one pending pod in LocalQueue q."""
    docs = [Namespace("team-a").obj(), Node("n1").cpu("8").memory("32Gi").obj(),
            Node("n2").cpu("8").memory("32Gi").obj(),
            ResourceFlavor("default").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default").resource("cpu", "16").resource("memory", "64Gi"))
                .obj(),
            LocalQueue("q", "team-a").cluster_queue("cq").obj(), *running, pending]
    return yaml.safe_dump_all(docs, sort_keys=False)


PACKING = packing([Pod("running").cpu("4").memory("8Gi").node("n2").obj()],
                  Pod("p1").queue("q").cpu("1").memory("1Gi").obj())


@pytest.fixture
def counted_prioritize(monkeypatch):
    calls = []
    original = Verbs.prioritize

    def prioritize(self, raw):
        calls.append(raw)
        return original(self, raw)

    monkeypatch.setattr(Verbs, "prioritize", prioritize)
    return calls


async def test_the_simulator_packs_without_prioritize_as_the_shipped_configuration_does(tmp_path,
                                                                                          counted_prioritize):
    """Two free nodes, one half full: MostAllocated puts the pod on the fuller n2 (a tie by name would have
    chosen n1), and prioritize is never called: the shipped configurations do not register it."""
    path = tmp_path / "packing.yaml"
    path.write_text(PACKING)
    out = await simulate(load_scenario(str(path)))
    assert out.admitted["team-a/p1"] == "n2"
    assert counted_prioritize == []
    assert SHIPPED_WEIGHTS == {"cpu": 1, "memory": 1}


# n1 is full of memory, n2 half full of cpu; p1 asks for cpu only. MostAllocated averages cpu and memory
# (n1: (25 + 94) / 2 = 59, n2: (62 + 1) / 2 = 31, x plugin weight 2 = 118 and 62); Quotient's prioritize packs
# on the resources the pod requests (n1: 2, n2: 6, x 2 x 10 = 40 and 120 points), which outweighs it.
DISAGREE = packing([Pod("running").cpu("4").memory("0").node("n2").obj(),
                    Pod("memory-hog").cpu("1").memory("30Gi").node("n1").obj()],
                   Pod("p1").queue("q").cpu("1").obj())


@pytest.mark.parametrize("weight,node,calls", [(0, "n1", 0), (2, "n2", 1)])
async def test_with_prioritize_registered_its_score_joins_the_node_score(tmp_path, counted_prioritize, weight,
                                                                         node, calls):
    """Opted in, prioritize is called with the nodes filter passed and its 0..10 x weight x 10 is added to
    MostAllocated's 0..100: here enough to turn the choice."""
    path = tmp_path / "disagree.yaml"
    path.write_text(DISAGREE)
    sim = SimScheduler(load_scenario(str(path)), verbose=False, prioritize_weight=weight)
    await sim.run(None)
    assert len(counted_prioritize) == calls
    assert sim.cluster.pods["team-a/p1"].info.node_name == node


def test_simulate_takes_the_opt_in_from_the_command_line(tmp_path):
    import subprocess
    from pathlib import Path

    quotient = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "quotient"
    path = tmp_path / "packing.yaml"
    path.write_text(PACKING + "---\napiVersion: quotient.dev/v1alpha1\nkind: Expectation\nspec:\n"
                              "  placements: {team-a/p1: n2}\n")
    ok = subprocess.run([str(quotient), "simulate", "-q", "--prioritize-weight", "2", str(path)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "PASS" in ok.stdout, ok.stdout + ok.stderr
    bad = subprocess.run([str(quotient), "simulate", "--prioritize-weight", "-1", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "is not a weight" in bad.stderr
