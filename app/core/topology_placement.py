"""A pod group's placement when it asks for a topology level (Kueue's podset-*-topology annotations on its members):
the domains core.topology chooses as Kueue's TAS would, then a node for each member inside its domain, held as
gangs.place holds one for a group that asks none. Filter then passes each member onto its own node only, so the
group runs inside the domain Kueue would have given it."""
from __future__ import annotations

from ..objects.coverage import TOPOLOGY_RULE
from ..objects.pod import PodInfo
from ..objects.topology import pod_set_request
from .decisions import Refuse
from .gangs import node_masks, place
from .placement import static_misfit
from .rules import TOPOLOGY_PLACEMENT_FAILED
from .topology import place as place_in_domains


def asks_topology(members: list[PodInfo]) -> bool:
    return any(m.topology_asked for m in members)


def topology_placement(state, whole: str, cluster_queue: str, flavors: set[str], members: list[PodInfo],
                       candidates: list[str], rooms) -> dict[str, str] | Refuse | None:
    """member uid -> node, every member inside the domains its topology request gives; or why not, in Kueue's
    words where Kueue has them; None when they ask for nothing (a member's unconstrained: "false" alone)."""
    request, problem = pod_set_request(members[0].annotations, len(members))
    if problem or any(pod_set_request(m.annotations, len(members)) != (request, problem) for m in members[1:]):
        return Refuse(TOPOLOGY_RULE, f"{whole}: {problem or 'members ask for different topologies'}; Kueue's job "
                      "webhook refuses these annotations: fix them", cluster_queue)
    if request is None:
        return None
    topologies = {state.flavors[f].topology_name for f in flavors if f in state.flavors}
    if "" in topologies or len(topologies) != 1:
        names = ", ".join(sorted(flavors))
        return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: Flavor {names!s} does not support "
                      "TopologyAwareScheduling (no spec.topologyName): the group asks for a topology level",
                      cluster_queue)
    name = topologies.pop()
    topology = state.store.topologies[name]
    shapes = {tuple(sorted(m.requests.items())) for m in members}
    if len(shapes) > 1:
        return Refuse(TOPOLOGY_RULE, f"{whole}: members of different sizes asking for a topology (Kueue's pod sets "
                      "of one group placed together) are not placed by Quotient yet (issue 36)", cluster_queue)
    nodes = [(n, state.nodes[n].labels, rooms(n)) for n in candidates]
    found = place_in_domains(name, topology.levels, nodes, dict(members[0].requests), len(members), request)
    if isinstance(found, str):
        return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: couldn't assign flavors to pod set: {found}",
                      cluster_queue)
    placed: dict[str, str] = {}
    left = list(members)
    for values, count in found.domains:
        share, left = left[:count], left[count:]
        domain_nodes = list(found.nodes[values])
        allowed = node_masks(share, [state.nodes[n] for n in domain_nodes], static_misfit)
        inside = place(share, domain_nodes, rooms, allowed)
        if inside is None:          # a domain's room summed over nodes that each hold fewer (a rack topology)
            return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: topology {name!r} domain {'/'.join(values)} holds "
                          f"{count} pod(s) by its nodes' room summed, but not node by node", cluster_queue)
        placed.update(inside)
    return placed
