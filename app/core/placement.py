"""Where a pod can go: the node checks no eviction can change, room on a node, and the
prioritize score."""
from __future__ import annotations

import numpy as np

from ..objects.node import NodeInfo
from ..objects.pod import PodInfo
from ..objects.selectors import node_affinity_matches, untolerated_taint


def static_misfit(pod: PodInfo, node: NodeInfo) -> str:
    """Why the pod can never run on the node whatever is evicted (kube-scheduler's wording), or ""."""
    if node.unschedulable:
        return "node(s) were unschedulable"
    taint = untolerated_taint(pod.tolerations, node.taints)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return "node(s) didn't match Pod's node affinity/selector"
    if not node_affinity_matches(pod.affinity_terms, node.labels):
        return "node(s) didn't match Pod's node affinity/selector"
    return ""


def shortfall(requests: dict[str, int], free: dict[str, int]) -> str:
    """NodeResourcesFit: "" when the requests fit in free, else "Insufficient <resource>"."""
    for r, v in requests.items():
        if v and v > free.get(r, 0):
            return f"Insufficient {r}"
    return ""


def pack_scores(fullness: np.ndarray) -> np.ndarray:
    """0..10 per node: how full it would be after placing the pod, on its fullest requested resource.

    Packing keeps whole nodes free for large pods and gangs, and leaves fewer,
    fuller nodes as preemption candidates later. Unknown nodes (-1) score 0."""
    return np.clip(np.rint(fullness * 10), 0, 10).astype(np.int64)
