"""What a workload lacks of its ClusterQueue's quota, and whether a ClusterQueue has any nominal quota left: the
arithmetic that lets a refusal stand while too little frees (state.blocked) and a cohort-order walk stop early
(core.admission.served_first), without deciding again (issue 32)."""
from __future__ import annotations

from ..objects.kueue import ClusterQueue
from .resource_node import FR, QuotaNode, available
from .view import AdmissionView
from .workload import Workload


def lacks(state: AdmissionView, workload: Workload, cq: ClusterQueue) -> bool:
    """The workload no longer fits (shortfall), with what is charged now; never said of one that could take another
    flavor."""
    return shortfall(state, workload, cq) is not None


def shortfall(state: AdmissionView, workload: Workload, cq: ClusterQueue) -> dict[FR, int] | None:
    """How much more of each (flavor, resource) the workload needs than its ClusterQueue has available (with the
    pods ahead charged), when each resource it asks for has one flavor to take; None when a resource could take
    another flavor, or nothing falls short. The pods ahead counted for it are of its own ClusterQueue, so they and
    it draw on the same quota: freeing some of what the pod lacks, less than it lacks, raises what is available of
    it by less than that, and a pod ahead that fits now takes more of it than was left to it. So a quota refusal
    stands while only what the pod lacked has freed, and less of each than it lacked (state.blocked; issue 32: a
    busy cohort frees a little every moment, and each head's refusal was decided again for each). A cohort-order
    refusal has no such bound: the pods counted first are of other ClusterQueues, each drawing on its own."""
    node = state.ledger.quota_node(cq.name)
    requests = state.ledger.quota_requests(workload)
    short: dict[FR, int] = {}
    for group in cq.resource_groups:
        asked = [r for r in group.covered if r in requests]
        if not asked:
            continue
        if len(group.flavors) != 1:
            return None
        flavor = group.flavors[0].name
        for r in asked:
            gap = requests[r] - available(node, (flavor, r))
            if gap > 0:
                short[(flavor, r)] = gap
    return short or None


def at_nominal(node: QuotaNode) -> bool:
    """The ClusterQueue uses all of its nominal quota of every flavor and resource, or more (charges included)."""
    usage = node.usage
    return all(usage.get(fr, 0) >= nominal for fr, nominal in node.subtree.items())
