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


def topology_placement(state, key, whole: str, cluster_queue: str, flavors: set[str], members: list[PodInfo],
                       candidates: list[str], rooms, allowed) -> dict[str, str] | Refuse | None:
    """member uid -> node, every member inside the domains its topology request gives; or why not, in Kueue's
    words where Kueue has them; None when they ask for nothing (a member's unconstrained: "false" alone).

    The request is judged for the whole group (its size, as Kueue's webhook counts the pod set), and the members
    to place now go where the group's others run or are held: for a required level, inside that domain (a
    replacement goes back beside its peers, as Kueue keeps a workload's assignment). Only nodes the members may
    use count (not unschedulable, taints tolerated, selector and affinity met)."""
    placing = {m.uid for m in members}
    others = [m for m in state.store.members(key) if m.uid not in placing and not m.terminal
              and (m.node_name or m.uid in state.holds)]
    size = len(members) + len(others)
    request, problem = pod_set_request(members[0].annotations, size)
    if problem or any(pod_set_request(m.annotations, size) != (request, problem) for m in members[1:]):
        return Refuse(TOPOLOGY_RULE, f"{whole}: {problem or 'members ask for different topologies'}; Kueue's job "
                      "webhook refuses these annotations: fix them", cluster_queue)
    if request is None:
        return None
    topologies = {state.flavors[f].topology_name for f in flavors if f in state.flavors}
    if "" in topologies or len(topologies) != 1:
        return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: Flavor {', '.join(sorted(flavors))} does not support "
                      "TopologyAwareScheduling (no spec.topologyName): the group asks for a topology level",
                      cluster_queue)
    name = topologies.pop()
    topology = state.store.topologies[name]
    not_yet = _not_placed_yet(members, others, request, size)
    if not_yet:
        return Refuse(TOPOLOGY_RULE, f"{whole}: {not_yet} are not placed by Quotient yet (issue 36)", cluster_queue)
    usable = [n for n, ok in zip(candidates, allowed(members[0])) if ok]
    if others and request.required and request.level in topology.levels:
        depth = topology.levels.index(request.level) + 1
        peers = {_path(state, _node_of(state, m), topology.levels, depth) for m in others}
        usable = [n for n in usable if _path(state, n, topology.levels, depth) in peers] if len(peers) == 1 else []
    nodes = [(n, state.nodes[n].labels, rooms(n)) for n in usable]
    found = place_in_domains(name, topology.levels, nodes, dict(members[0].requests), len(members), request)
    if isinstance(found, str):
        beside = " beside the group's members already placed" if others and request.required else ""
        return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: couldn't assign flavors to pod set{beside}: {found}",
                      cluster_queue)
    placed: dict[str, str] = {}
    left = list(members)
    for values, count in found.domains:
        share, left = left[:count], left[count:]
        domain_nodes = list(found.nodes[values])
        inside = place(share, domain_nodes, rooms, node_masks(share, [state.nodes[n] for n in domain_nodes],
                                                              static_misfit))
        if inside is None:          # a domain's room summed over nodes that each hold fewer (a rack topology)
            return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: topology {name!r} domain {'/'.join(values)} holds "
                          f"{count} pod(s) by its nodes' room summed, but not node by node", cluster_queue)
        placed.update(inside)
    if len(placed) != len(members):
        return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: topology {name!r} placed {len(placed)} of "
                      f"{len(members)} pod(s)", cluster_queue)
    return placed


def _not_placed_yet(members: list[PodInfo], others: list[PodInfo], request, size: int) -> str:
    """What of the request Quotient does not place yet, as a refusal names it ("" when it places it all)."""
    if len({tuple(sorted(m.requests.items())) for m in members + others}) > 1:
        return "members of different sizes asking for a topology (Kueue's pod sets of one group placed together)"
    if size % request.slice_size:
        return f"{size} pods in slices of {request.slice_size} (a last, partial slice)"
    if others and request.slice_size > 1:
        return "replacement members of a group placed in slices"
    return ""


def _node_of(state, member: PodInfo) -> str:
    return member.node_name or state.holds[member.uid].node


def _path(state, node: str, levels: tuple[str, ...], depth: int) -> tuple | None:
    """The node's domain at the depth-th level: its values of the levels down to it (None off the topology)."""
    info = state.nodes.get(node)
    if info is None or any(level not in info.labels for level in levels):
        return None
    return tuple(info.labels[level] for level in levels[:depth])
