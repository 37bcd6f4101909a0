"""Builds the quota tree (core.resource_node nodes) from ClusterQueue and Cohort objects.

A ClusterQueue naming a cohort that has no Cohort object gets an implicit one,
as in Kueue. A ClusterQueue is inactive (admits nothing, says why) when a
flavor it names does not exist, or its cohort chain has a cycle or is deeper than
MAX_COHORT_DEPTH (a chain built to exhaust the recursion of every tree walk), or
it uses what Quotient refuses (objects.coverage): a field it cannot serve as
written, a flavor with a topologyName.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.resource_node import Limits, QuotaNode, compute_subtree
from ..core.rules import COHORT_INVALID, FLAVOR_NOT_FOUND, NOT_SUPPORTED_BY_QUOTIENT, TOPOLOGY_NOT_FOUND
from ..objects.kueue import ClusterQueue, Cohort, ResourceFlavor, ResourceGroup


@dataclass
class QuotaTree:
    queues: dict[str, QuotaNode] = field(default_factory=dict)
    cohorts: dict[str, QuotaNode] = field(default_factory=dict)
    inactive: dict[str, str] = field(default_factory=dict)   # ClusterQueue -> reason
    codes: dict[str, str] = field(default_factory=dict)      # ClusterQueue -> its Active condition's reason


def mirror(tree: QuotaTree) -> QuotaTree:
    """The decisions' tree: the same shape, quotas and bound usage (shared, read-only to decisions) with a
    planning usage of its own, which a decision's simulated charges and removals (core.overlay) change
    without touching the live tree."""
    twin = QuotaTree(inactive=tree.inactive, codes=tree.codes)

    def copy(node: QuotaNode, parent: QuotaNode | None) -> QuotaNode:
        new = QuotaNode(node.name, node.is_cohort, parent, [], node.quotas, node.subtree, dict(node.usage),
                        node.bound)
        (twin.cohorts if node.is_cohort else twin.queues)[node.name] = new
        new.children = [copy(child, new) for child in node.children]
        return new

    for node in list(tree.cohorts.values()) + list(tree.queues.values()):
        if node.parent is None:
            copy(node, None)
    twin.queues = {name: twin.queues[name] for name in tree.queues}      # the live tree's order
    twin.cohorts = {name: twin.cohorts[name] for name in tree.cohorts}
    return twin


def _limits(groups: list[ResourceGroup]) -> dict:
    return {(fq.name, r): Limits(q.nominal, q.borrowing_limit, q.lending_limit)
            for g in groups for fq in g.flavors for r, q in fq.resources.items()}

# Kueue sets no depth; real hierarchies are a handful of levels, and every walk of the tree
# (subtree quota, fair-sharing shares) recurses once per level.
MAX_COHORT_DEPTH = 100


def _chain_problem(start: str, cohorts: dict[str, Cohort]) -> str | None:
    """Why the parentName chain from `start` up cannot be used, or None."""
    seen, name = set(), start
    while name:
        if name in seen:
            return "is in a parentName cycle"
        if len(seen) >= MAX_COHORT_DEPTH:
            return f"is more than {MAX_COHORT_DEPTH} parentName levels below its root"
        seen.add(name)
        c = cohorts.get(name)
        name = c.parent if c else ""
    return None


def build_tree(queues: dict[str, ClusterQueue], cohorts: dict[str, Cohort],
               flavors: dict[str, ResourceFlavor], topologies: dict) -> QuotaTree:
    tree = QuotaTree()
    broken = {name: why for name in cohorts if (why := _chain_problem(name, cohorts))}

    def cohort_node(name: str) -> QuotaNode:
        node = tree.cohorts.get(name)
        if node is None:
            spec = cohorts.get(name)
            node = QuotaNode(name, True, quotas=_limits(spec.resource_groups) if spec else {})
            tree.cohorts[name] = node
            if spec and spec.parent and name not in broken:
                parent = cohort_node(spec.parent)
                node.parent = parent
                parent.children.append(node)
        return node

    for name in cohorts:
        cohort_node(name)
    for name, cq in queues.items():
        node = QuotaNode(name, False, quotas=_limits(cq.resource_groups))
        tree.queues[name] = node
        names = {fq.name for g in cq.resource_groups for fq in g.flavors}
        missing = sorted(names - set(flavors))
        refused = list(cq.unsupported)
        if refused:
            tree.inactive[name] = f"ClusterQueue {name} is inactive: {'; '.join(refused)}"
            tree.codes[name] = NOT_SUPPORTED_BY_QUOTIENT
        no_topology = [f"there is no Topology {flavors[f].topology_name!r} for TAS flavor {f!r}"
                       for f in sorted(names) if f in flavors and flavors[f].topology_name
                       and flavors[f].topology_name not in topologies]
        if no_topology:             # Kueue's reason (pkg/cache/scheduler/clusterqueue.go), after any other
            tree.inactive[name] = f"ClusterQueue {name} is inactive: {'; '.join(refused + no_topology)}"
            tree.codes.setdefault(name, TOPOLOGY_NOT_FOUND)
        if missing:
            tree.inactive[name] = (f"ClusterQueue {name} is inactive: ResourceFlavor "
                                   f"{', '.join(missing)} does not exist")
            tree.codes[name] = FLAVOR_NOT_FOUND
        if cq.cohort:
            if cq.cohort in broken:
                tree.inactive[name] = f"ClusterQueue {name} is inactive: cohort {cq.cohort} {broken[cq.cohort]}"
                tree.codes[name] = COHORT_INVALID
                continue
            parent = cohort_node(cq.cohort)
            node.parent = parent
            parent.children.append(node)
    for node in list(tree.cohorts.values()) + list(tree.queues.values()):
        if node.parent is None:
            compute_subtree(node)
    return tree
