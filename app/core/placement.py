"""Which of the nodes kube-scheduler offered belong to the flavors a pod was assigned,
and how to score them."""
from __future__ import annotations

from .flavors import Assignment


def flavor_node_filter(flavor_nodes: dict, flavor_labels: dict, assignment: Assignment,
                       names: list[str]) -> tuple[list[str], dict[str, str]]:
    """Split names into (passing, failed with reason) by the assigned flavors' node sets."""
    restricting = []
    for flavor in assignment.flavor_names():
        members = flavor_nodes.get(flavor)
        if members is not None:
            labels = ",".join(f"{k}={v}" for k, v in sorted(flavor_labels.get(flavor, {}).items()))
            restricting.append((members, f"node is not in flavor {flavor} (nodeLabels {labels})"))
    if not restricting:
        return names, {}
    if len(restricting) == 1:
        members, why = restricting[0]
        passing = [n for n in names if n in members]
        if len(passing) == len(names):
            return passing, {}
        return passing, {n: why for n in names if n not in members}
    passing, failed = [], {}
    for n in names:
        for members, why in restricting:
            if n not in members:
                failed[n] = why
                break
        else:
            passing.append(n)
    return passing, failed


def pack_score(requests: dict[str, int], allocatable: dict[str, int], used: dict[str, int]) -> int:
    """0..10: how full the node would be after placing the pod, on its fullest requested resource.

    Packing keeps whole nodes free for large pods and gangs, and leaves fewer,
    fuller nodes as preemption candidates later."""
    fullest = 0.0
    for resource, amount in requests.items():
        if resource == "pods" or not amount:
            continue
        capacity = allocatable.get(resource, 0)
        if capacity <= 0:
            continue
        fullest = max(fullest, (used.get(resource, 0) + amount) / capacity)
    return max(0, min(10, round(fullest * 10)))
