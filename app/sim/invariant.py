"""The quota invariant, checked by the simulator on the cluster's truth after every step.

Independent of what Quotient's state believes: a fresh quota tree is charged with every
pod the simulated API has on a node (terminating ones included, as they still run), in
the flavors Quotient gave it or, for a pod it has no charge for, the flavors its node's
labels say. Any ClusterQueue or Cohort above what Kueue's rules let it use is a violation.
"""
from __future__ import annotations

from ..core.flavors import quota_usage
from ..objects.quantity import format_quantity
from ..core.resource_node import charge as charge_usage
from ..core.resource_node import over_quota
from ..state.cluster import ClusterState
from ..state.tree import build_tree


def violations(state: ClusterState, running) -> list[str]:
    """Each place the pods in running (PodInfo, on a node) put the quota tree above its limits."""
    tree = build_tree(state.cluster_queues, state.cohorts, state.flavors, state.store.topologies)
    for pod in running:
        if not pod.node_name or pod.terminal:
            continue
        _, cq = state.store.queue_of(pod)
        if cq is None or cq.name not in tree.queues:
            continue
        charge = state.admitted.get(pod.uid)
        if charge is not None and charge.cluster_queue == cq.name:
            usage = charge.usage
        else:
            usage = quota_usage(state.ledger.quota_requests(pod), state.ledger.infer_flavors(pod, cq))
        charge_usage(tree.queues[cq.name], usage, bound=True)
    roots = [n for n in list(tree.queues.values()) + list(tree.cohorts.values()) if n.parent is None]
    return [f"{'Cohort' if node.is_cohort else 'ClusterQueue'} {node.name} flavor {fr[0]}: {fr[1]} "
            f"{format_quantity(used, fr[1])} used > {format_quantity(cap, fr[1])} allowed"
            for node, fr, used, cap in over_quota(roots)]
