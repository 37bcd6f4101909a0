"""What an admin debugging topology-aware placement looks at (issue 36): each Topology's domains with their free
room per level (/debug/topologies, /ui/topologies), and, for a pod asking a topology, its request, the domain its
workload runs or is held in, and why each other domain of its level does not hold it (the pod's /debug view)."""
from __future__ import annotations

from ..core.gangs import expected_size
from ..core.placement import static_misfit
from ..core.topology import domain_rooms
from ..core.workload import group_of
from ..objects.quantity import format_quantity
from ..objects.topology import pod_set_request

DOMAINS_SHOWN = 200     # per level; the rest are counted


def _free(free: dict[str, int]) -> dict[str, str]:
    return {r: format_quantity(v, r) for r, v in sorted(free.items())}


def _flavors_of(state, name: str) -> list[str]:
    """The ResourceFlavors naming Topology name, by name."""
    return sorted(f for f, rf in state.flavors.items() if rf.topology_name == name)


def _nodes_of(state, flavors: list[str]) -> list[str]:
    """The nodes of these flavors (every node when one of them selects none)."""
    nodes: set[str] = set()
    for f in flavors:
        members = state.flavor_nodes.get(f)
        nodes |= set(state.nodes) if members is None else set(members)
    return sorted(nodes)


def topologies_view(state, limit: int = DOMAINS_SHOWN) -> dict:
    rooms = state.workloads.rooms()
    out = []
    for name, topology in sorted(state.store.topologies.items()):
        flavors = _flavors_of(state, name)
        nodes = _nodes_of(state, flavors)
        levels = domain_rooms(topology.levels, [(n, state.nodes[n].labels, rooms(n)) for n in nodes])
        out.append({
            "name": name, "levels": list(topology.levels), "flavors": flavors,
            "nodes": sum(d.nodes for d in levels[0]) if levels else 0,
            "domains": {level: {"count": len(domains), "shown": [
                {"domain": "/".join(d.values), "nodes": d.nodes, "free": _free(d.free)} for d in domains[:limit]]}
                for level, domains in zip(topology.levels, levels)}})
    return {"topologies": out}


def pod_topology(state, pod) -> dict | None:
    """The pod's topology request and where it stands; None when it asks none."""
    if pod is None or not pod.topology_asked:
        return None
    key = group_of(pod)
    size = (expected_size(state, pod) or 1) if key is not None else 1
    request, problem = pod_set_request(pod.annotations, size)
    view: dict = {"asked": pod.topology_asked}
    if problem or request is None:
        return {**view, "problem": problem or "asks nothing"}
    view["request"] = {"level": request.level or None,
                       "mode": "required" if request.required else "unconstrained" if request.unconstrained
                       else "preferred", "sliceLevel": request.slice_level or None, "sliceSize": request.slice_size,
                       "pods": size}
    charge = state.admitted.get(pod.uid) or (state.reservations[pod.uid].charge if pod.uid in state.reservations
                                             else None)
    if charge is not None:
        flavors = list(charge.flavors.values())
    else:
        cq = state.store.queue_of(pod)[1]
        flavors = [fq.name for g in cq.resource_groups for fq in g.flavors] if cq is not None else []
    names = [state.flavors[f].topology_name for f in flavors if f in state.flavors and state.flavors[f].topology_name]
    name = names[0] if names else None          # the first TAS flavor in the ClusterQueue's order
    topology = state.store.topologies.get(name) if name else None
    if topology is None:
        return {**view, "problem": "no flavor of its ClusterQueue names a Topology that exists"}
    levels = topology.levels
    level = request.level if request.level in levels else levels[-1]
    depth = levels.index(level) + 1
    rooms = state.workloads.rooms(pod.uid)
    nodes = [n for n in _nodes_of(state, _flavors_of(state, name)) if not static_misfit(pod, state.nodes[n])]
    members = state.store.members(key) if key is not None else [pod]
    placed = {m.node_name or (state.holds[m.uid].node if m.uid in state.holds else "") for m in members} - {""}
    domain = sorted({"/".join(state.nodes[n].labels.get(lv, "?") for lv in levels[:depth])
                     for n in placed if n in state.nodes})
    rows = domain_rooms(levels, [(n, state.nodes[n].labels, rooms(n)) for n in nodes], pod.requests)[depth - 1]
    need = {r: v * size for r, v in pod.requests.items() if v}
    view.update({"topology": name, "level": level, "domain": domain or None, "domains": [
        _why(d, size, need, "/".join(d.values) in domain) for d in sorted(rows, key=lambda d: -d.pods)[:DOMAINS_SHOWN]],
        "domainCount": len(rows)})
    return view


def _why(d, size: int, need: dict[str, int], chosen: bool) -> dict:
    """A domain at the pod's level: how many of the workload's pods it holds now, and what it lacks."""
    short = {r: v - d.free.get(r, 0) for r, v in need.items() if v > d.free.get(r, 0)}
    if chosen:
        why = "its workload runs or is held here"
    elif d.pods >= size:
        why = f"holds all {size} pod(s) now"
    elif short:
        why = f"holds {d.pods} of {size} pod(s): lacks " + ", ".join(
            f"{format_quantity(v, r)} {r}" for r, v in sorted(short.items()))
    else:
        why = (f"holds {d.pods} of {size} pod(s): its free room summed suffices, but not node by node (or not "
               "on nodes the pod may use)")
    return {"domain": "/".join(d.values), "nodes": d.nodes, "holds": d.pods, "free": _free(d.free), "why": why}
