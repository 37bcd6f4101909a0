"""A pod group's placement when it asks for a topology level (Kueue's podset-*-topology annotations on its members):
the domains core.topology chooses as Kueue's TAS would, then a node for each member inside its domain, held as
gangs.place holds one for a group that asks none. Filter then passes each member onto its own node only, so the
group runs inside the domain Kueue would have given it. When no domain holds it, TopologyAsk.domains are where
core.preemption.gang looks for victims, one domain at a time."""
from __future__ import annotations

from dataclasses import dataclass

from ..objects.coverage import TOPOLOGY_RULE
from ..objects.pod import PodInfo
from ..objects.topology import TopologyRequest, pod_set_request
from .decisions import Refuse
from .gangs import expected_size, node_masks, place
from .placement import static_misfit
from .rules import TOPOLOGY_PLACEMENT_FAILED
from .topology import Assignment, place as place_in_domains


def asks_topology(members: list[PodInfo]) -> bool:
    return any(m.topology_asked for m in members)


@dataclass
class TopologyAsk:
    """A group's topology request, ready to place: its Topology, the request, and the nodes it may use (those its
    members may run on, inside the required domain of its members already placed)."""
    state: object
    name: str
    levels: tuple[str, ...]
    request: TopologyRequest
    usable: list[str]
    members: list[PodInfo]
    beside_others: bool = False     # usable is narrowed to the domain of the workload's pods already placed

    def assign(self, nodes: list[str], rooms) -> Assignment | str:
        """The domains Kueue's TAS gives the members among these nodes, rooms(node) their free room."""
        return place_in_domains(self.name, self.levels, [(n, self.state.nodes[n].labels, rooms(n)) for n in nodes],
                                dict(self.members[0].requests), len(self.members), self.request)

    def fits(self, nodes: list[str], rooms) -> dict[str, str] | str:
        """member uid -> node, every member inside the domains Kueue's TAS chooses among these nodes, with
        rooms(node) their free room; or why not, in Kueue's words."""
        state, members = self.state, self.members
        found = self.assign(nodes, rooms)
        if isinstance(found, str):
            return found
        placed: dict[str, str] = {}
        left = list(members)
        for values, count in found.domains:
            share, left = left[:count], left[count:]
            domain_nodes = list(found.nodes[values])
            inside = place(share, domain_nodes, rooms, node_masks(share, [state.nodes[n] for n in domain_nodes],
                                                                  static_misfit))
            if inside is None:      # a domain's room summed over nodes that each hold fewer (a rack topology)
                return (f"topology {self.name!r} domain {'/'.join(values)} holds {count} pod(s) by its nodes' "
                        "room summed, but not node by node")
            placed.update(inside)
        if len(placed) != len(members):
            return f"topology {self.name!r} placed {len(placed)} of {len(members)} pod(s)"
        return placed

    def domains(self) -> list[dict[str, list[str]]]:
        """Where preemption may make the group fit, a level at a time (each: domain name -> its usable nodes):
        a required level's domains; a preferred level's, then each level above, then all usable nodes (Kueue
        spreads a preferred request over the top level's domains); all usable nodes when unconstrained."""
        request, levels = self.request, self.levels
        if request.level and request.level not in levels:
            return []               # no domain at all: Kueue's "no requested topology level"
        if request.unconstrained or not request.level:
            return [{"": list(self.usable)}]
        depth = levels.index(request.level) + 1
        tiers = [self._at(d) for d in (range(depth, 0, -1) if not request.required else [depth])]
        return tiers + ([] if request.required else [{"": list(self.usable)}])

    def _at(self, depth: int) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for n in self.usable:
            path = _path(self.state, n, self.levels, depth)
            if path is not None:
                out.setdefault("/".join(path), []).append(n)
        return out


def topology_ask(state, key, whole: str, cluster_queue: str, flavors: set[str], members: list[PodInfo],
                 candidates: list[str], allowed) -> TopologyAsk | Refuse | None:
    """The group's topology request, or why it is refused, in Kueue's words where Kueue has them; None when they
    ask for nothing (a member's unconstrained: "false" alone).

    The request is judged for the whole group (its size, as Kueue's webhook counts the pod set), and the members
    to place now go where the group's others run or are held: for a required level, inside that domain (a
    replacement goes back beside its peers, as Kueue keeps a workload's assignment). Only nodes the members may
    use count (not unschedulable, taints tolerated, selector and affinity met)."""
    others = _placed_others(state, key, {m.uid for m in members})
    size = len(members) + len(others)
    found = _request(state, whole, cluster_queue, flavors, members, size)
    if found is None or isinstance(found, Refuse):
        return found
    request, topology = found
    name = topology.name
    not_yet = _not_placed_yet(members, others, request, size)
    if not_yet:
        return Refuse(TOPOLOGY_RULE, f"{whole}: {not_yet} are not placed by Quotient (README, Topology-aware "
                      "placement)", cluster_queue)
    usable = _beside(state, [n for n, ok in zip(candidates, allowed(members[0])) if ok], topology.levels, request,
                     others)
    return TopologyAsk(state, name, topology.levels, request, usable, members, bool(others))


def _request(state, whole: str, cluster_queue: str, flavors, members: list[PodInfo], size: int):
    """(request, Topology) the members ask for, as Kueue's webhook reads their annotations for a pod set of size
    pods; None when they ask none; a Refuse when Kueue would refuse them or the flavor has no Topology."""
    request, problem = pod_set_request(members[0].annotations, size)
    if problem or any(pod_set_request(m.annotations, size) != (request, problem) for m in members[1:]):
        return Refuse(TOPOLOGY_RULE, f"{whole}: {problem or 'members ask for different topologies'}; Kueue's job "
                      "webhook refuses these annotations: fix them", cluster_queue)
    if request is None:
        return None
    topologies = {state.flavors[f].topology_name for f in flavors if f in state.flavors}
    if "" in topologies or len(topologies) != 1 or next(iter(topologies)) not in state.store.topologies:
        return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: Flavor {', '.join(sorted(flavors))} does not support "
                      "TopologyAwareScheduling (no spec.topologyName): it asks for a topology level", cluster_queue)
    return request, state.store.topologies[topologies.pop()]


def narrow(state, pod: PodInfo, key, flavors, nodes: list[str], rooms, cluster_queue: str) -> list[str] | Refuse:
    """The nodes among `nodes` a pod asking a topology may take, when it is placed alone: a lone pod (Kueue's pod
    set of one) the domain TAS assigns it; a Job's pod taking a slot of its admitted workload the domain of its
    peers that run (a required level's, or a preferred level's domains they run in), as Kueue keeps a workload's
    topology assignment for the pods that replace others."""
    others = _placed_others(state, key, {pod.uid}) if key is not None else []
    whole = key.described if key is not None else f"pod {pod.key}"
    size = max(expected_size(state, pod) or 1, len(others) + 1) if key is not None else 1
    found = _request(state, whole, cluster_queue, flavors, [pod], size)
    if found is None:
        return nodes
    if isinstance(found, Refuse):
        return found
    request, topology = found
    if key is not None and request.slice_size > 1:       # a Job's pod taking a slot of its admitted workload
        return Refuse(TOPOLOGY_RULE, f"{whole}: a pod replacing one of a workload placed in slices of "
                      f"{request.slice_size} is not placed by Quotient (README, Topology-aware placement)",
                      cluster_queue)
    levels = topology.levels        # nodes: the flavor's, every one carrying each level (state.ledger._selects)
    if others:
        on = _beside(state, nodes, levels, request, others)
        return on or Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: none of the {len(nodes)} node(s) offered is in "
                            f"the domain of {request.level or 'the topology'} its other pods run in", cluster_queue)
    assigned = TopologyAsk(state, topology.name, levels, request, nodes, [pod]).assign(nodes, rooms)
    if isinstance(assigned, str):
        return Refuse(TOPOLOGY_PLACEMENT_FAILED, f"{whole}: couldn't assign flavors to pod set: {assigned}",
                      cluster_queue)
    inside = {n for domain in assigned.nodes.values() for n in domain}
    return [n for n in nodes if n in inside]


def _beside(state, nodes: list[str], levels: tuple[str, ...], request, others: list[PodInfo]) -> list[str]:
    """The nodes in the domains, at the requested level, where the workload's other pods run or are held (a
    required level: its one domain; none if they are split), as Kueue keeps a workload's topology assignment."""
    if not others or request.level not in levels:
        return nodes
    depth = levels.index(request.level) + 1
    peers = {_path(state, _node_of(state, m), levels, depth) for m in others}
    if request.required and len(peers) != 1:
        return []
    return [n for n in nodes if _path(state, n, levels, depth) in peers]


def _not_placed_yet(members: list[PodInfo], others: list[PodInfo], request, size: int) -> str:
    """What of the request Quotient does not place yet, as a refusal names it ("" when it places it all)."""
    if len({tuple(sorted(m.requests.items())) for m in members + others}) > 1:
        return "members of different sizes asking for a topology (Kueue's pod sets of one group placed together)"
    if size % request.slice_size:
        return f"{size} pods in slices of {request.slice_size} (a last, partial slice)"
    if others and request.slice_size > 1:
        return "replacement members of a group placed in slices"
    return ""


def _placed_others(state, key, placing: set[str]) -> list[PodInfo]:
    """The workload's pods, other than those being placed, that run or hold a node (not finished)."""
    return [m for m in state.store.members(key) if m.uid not in placing and not m.terminal
            and (m.node_name or m.uid in state.holds)]


def _node_of(state, member: PodInfo) -> str:
    return member.node_name or state.holds[member.uid].node


def _path(state, node: str, levels: tuple[str, ...], depth: int) -> tuple | None:
    """The node's domain at the depth-th level: its values of the levels down to it (None off the topology)."""
    info = state.nodes.get(node)
    if info is None or any(level not in info.labels for level in levels):
        return None
    return tuple(info.labels[level] for level in levels[:depth])
