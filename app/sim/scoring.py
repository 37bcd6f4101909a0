"""How the simulated kube-scheduler picks among the nodes filter passed (../shared/scenarios/FORMAT.md):
NodeResourcesFit's MostAllocated score × its plugin weight, plus the extender's prioritize score × weight
× 10 where the scheduler configuration registers prioritize. The shipped configurations pack with MostAllocated and
leave prioritize out (issue 19): what the simulator does by default."""
from __future__ import annotations

# NodeResourcesFit in scheduler-config/*.yaml (tests/test_manifests.py checks): its scoringStrategy.resources,
# and its weight among the score plugins.
SHIPPED_WEIGHTS = {"cpu": 1, "memory": 1}
SHIPPED_PLUGIN_WEIGHT = 2
# What kube-scheduler's scoring counts for a cpu or memory request left unset (schedutil's non-zero defaults).
NONZERO = {"cpu": 100, "memory": 200 * 1024 * 1024}
ALWAYS_SCORED = ("cpu", "memory", "ephemeral-storage")     # scored even when the pod requests none
MAX_NODE_SCORE = 100
EXTENDER_SCALE = 10           # MaxNodeScore / MaxExtenderPriority: an extender's 0..10 becomes 0..100


def nonzero(requests: dict[str, int]) -> dict[str, int]:
    """A pod's requests as scoring counts them: a default for a request not set (0 set stays 0). Per pod here;
    kube-scheduler applies the default per container."""
    return {**requests, **{r: v for r, v in NONZERO.items() if r not in requests}}


def most_allocated(pod: dict[str, int], placed: dict[str, int], allocatable: dict[str, int],
                   weights: dict[str, int]) -> int:
    """0..100: how full the node would be with the pod on it (pod and placed: requests as nonzero() counts
    them). A resource the node lacks is skipped, and so is an extended one the pod does not request: a
    weighted GPU packs GPU pods without turning CPU pods away from GPU nodes."""
    total = weight_sum = 0
    for resource, weight in weights.items():
        capacity, wanted = allocatable.get(resource, 0), pod.get(resource, 0)
        if capacity <= 0 or (not wanted and resource not in ALWAYS_SCORED):
            continue
        total += min(placed.get(resource, 0) + wanted, capacity) * MAX_NODE_SCORE // capacity * weight
        weight_sum += weight
    return total // weight_sum if weight_sum else 0


def best(names: list[str], scores: dict[str, int]) -> str:
    """The highest total score; ties go to the first node name (kube-scheduler picks one of them at random)."""
    return min(names, key=lambda n: (-scores.get(n, 0), n))
