"""Which of the nodes kube-scheduler offered belong to the flavors a pod was assigned,
and how to score them."""
from __future__ import annotations

import numpy as np


def flavor_nodes_on_offer(flavor_nodes: dict, flavors: set[str], names: list[str]) -> list[str]:
    """The offered names that belong to every assigned flavor, in the order offered.

    Runs in C (filter over set.__contains__): with 5,000 names per request this is
    the hot loop of filter."""
    for flavor in sorted(flavors):
        members = flavor_nodes.get(flavor)
        if members is not None:
            names = list(filter(members.__contains__, names))
    return names


def pack_scores(fullness: np.ndarray) -> np.ndarray:
    """0..10 per node: how full it would be after placing the pod, on its fullest requested resource.

    Packing keeps whole nodes free for large pods and gangs, and leaves fewer,
    fuller nodes as preemption candidates later. Unknown nodes (-1) score 0."""
    return np.clip(np.rint(fullness * 10), 0, 10).astype(np.int64)
