"""Kueue's topology-aware placement (TAS) of one pod set: how many of its pods go to which domain of a Topology.

Why here, and why this way: a Kueue admin writes `podset-required-topology: <rack label>` and expects the racks
Kueue would choose. This follows Kueue's own algorithm (pkg/cache/scheduler/tas_flavor_snapshot.go,
findTopologyAssignment, main ff69552, default feature gates: TASProfileMixed on, balanced placement and
preferred-affinity scoring off), so a scenario written for Kueue gives the same domains:

1. Domains: a node carrying every level's label is a leaf (itself when the lowest level is
   `kubernetes.io/hostname`, else the lowest level's domain, its nodes' free room summed); each leaf holds as many
   pods as its free room allows (the `pods` count included), a parent the sum of its children. With slices, a
   domain of the slice level holds its pods // sliceSize slices, a domain above the sum of its children's.
2. The level: required and preferred (BestFit) sort the requested level's domains by slices descending, then
   pods ascending, then level values; if the first holds them all, the tightest domain that does is chosen (the
   first of the sort order among equals). Required fails there; preferred goes up a level at a time, and at the top
   spreads over domains in that order, the last one again the tightest that holds the rest. Unconstrained (Least
   FreeCapacity) sorts ascending and takes the first domain that holds them all at the lowest level, else fills
   domains in that order.
3. Down to the leaves: the chosen domains' children, pooled while above the slice level and per parent below it,
   are filled in the same order, each taken whole until one holds the rest (BestFit: the tightest that does).

Not here (refused where the annotations are read): leader and worker pod sets placed together, multi-layer slice
constraints, node selectors and taints inside a hostname topology (the caller passes only the nodes the pod set
may use).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..objects.topology import HOSTNAME, TopologyRequest

__all__ = ["HOSTNAME", "Assignment", "TopologyRequest", "place"]


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where the pod set goes: (level values, count) per domain of `levels`, sorted by values (on a hostname
    topology only the hostname, as Kueue writes it); nodes: each such domain's nodes, in name order."""
    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]
    nodes: dict[tuple[str, ...], tuple[str, ...]]


@dataclass(eq=False, slots=True)
class _Domain:
    values: tuple[str, ...]
    children: list[_Domain] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    free: dict[str, int] = field(default_factory=dict)      # a leaf's free room
    pods: int = 0
    slices: int = 0


class _Tree:
    """The domains of every level, built from the nodes that carry every level's label."""

    def __init__(self, levels: tuple[str, ...], nodes: Iterable[tuple[str, dict[str, str], dict[str, int]]]):
        self.levels = levels
        self.by_level: list[dict[tuple[str, ...], _Domain]] = [{} for _ in levels]
        hostname = levels[-1] == HOSTNAME
        for name, labels, free in nodes:
            if any(level not in labels for level in levels):
                continue
            values = tuple(labels[level] for level in levels)
            parent = None
            for i in range(len(levels)):
                key = values[:i + 1]
                domain = self.by_level[i].get(key)
                if domain is None:
                    domain = self.by_level[i][key] = _Domain(key)
                    if parent is not None:
                        parent.children.append(domain)
                domain.nodes.append(name)
                parent = domain
            if hostname and parent.free:          # two nodes with one hostname value: the first stands
                continue
            for r, v in free.items():
                parent.free[r] = parent.free.get(r, 0) + v

    @property
    def leaves(self) -> Iterable[_Domain]:
        return self.by_level[-1].values()


def one_pod(requests: dict[str, int]) -> dict[str, int]:
    """A pod's requests with its one place on a node (`pods`), as kube-scheduler counts it: what count_in divides by."""
    pod = dict(requests)
    pod["pods"] = max(pod.get("pods", 0), 1)
    return pod


def count_in(requests: dict[str, int], free: dict[str, int]) -> tuple[int, str]:
    """How many pods of these requests the free room holds, and the resource that limits it."""
    best, limiting = None, ""
    for r, v in sorted(requests.items()):
        if v > 0:
            n = max(free.get(r, 0), 0) // v
            if best is None or n < best:
                best, limiting = n, r
    return (best if best is not None else 1 << 30), limiting


def _fill(domain: _Domain, level: int, slice_level: int, slice_size: int) -> None:
    if domain.children:
        for child in domain.children:
            _fill(child, level + 1, slice_level, slice_size)
        domain.pods = sum(c.pods for c in domain.children)
        domain.slices = sum(c.slices for c in domain.children)
    else:
        domain.slices = 0
    if level == slice_level:
        domain.slices = domain.pods // slice_size


def _sorted(domains: Iterable[_Domain], least_free: bool) -> list[_Domain]:
    return sorted(domains, key=lambda d: (d.slices if least_free else -d.slices, d.pods, d.values))


def _best_fit(domains: list[_Domain], needed: int, count: Callable[[_Domain], int]) -> _Domain:
    """The first domain, in the given order, of the smallest count that is at least needed (else the first)."""
    best, best_count = domains[0], None
    for d in domains:
        c = count(d)
        if c >= needed and (best_count is None or c < best_count):
            best, best_count = d, c
    return best


def _slices(d: _Domain) -> int:
    return d.slices


def _pods(d: _Domain) -> int:
    return d.pods


def _to_minimum(domains: list[_Domain], count: int, slice_size: int, least_free: bool,
                by_slices: bool) -> list[_Domain]:
    """Take the domains in order, each whole, until one holds the rest (BestFit: the tightest that does); each
    taken domain's pods become what it is given."""
    remaining = count // slice_size if by_slices else count
    taken = []
    measure = _slices if by_slices else _pods
    for i, d in enumerate(domains):
        if not least_free and measure(d) >= remaining:
            d = _best_fit(domains[i:], remaining, measure)
        if measure(d) >= remaining:
            d.pods, d.slices = (remaining * slice_size, remaining) if by_slices else (remaining, d.slices)
            taken.append(d)
            return taken
        if by_slices:
            d.pods = d.slices * slice_size
        remaining -= measure(d)
        taken.append(d)
    return taken


class _Placement:
    def __init__(self, tree: _Tree, name: str, count: int, request: TopologyRequest):
        self.tree, self.name, self.count, self.request = tree, name, count, request
        self.least_free = request.unconstrained     # Kueue's LeastFreeCapacity (TASProfileMixed), else BestFit
        self.excluded: dict[str, int] = {}

    def not_fit(self, fit: int, needed: int) -> str:
        unit = "pod" if self.request.slice_size == 1 else "slice"
        said = (f'topology "{self.name}" allows to fit only {fit} out of {needed} {unit}(s)' if fit else
                f'topology "{self.name}" doesn\'t allow to fit any of {needed} {unit}(s)')
        if self.excluded:
            total = sum(1 for _ in self.tree.leaves)
            said += f". Total nodes: {total}; excluded: " + ", ".join(
                f'resource "{r}": {n}' for r, n in sorted(self.excluded.items()))
        return said

    def fit_level(self, idx: int) -> tuple[int, list[_Domain]] | str:
        """The level and the domains that hold the pod set (Kueue's findLevelWithFitDomains)."""
        domains = self.tree.by_level[idx]
        if not domains:
            return f"no topology domains at level: {self.tree.levels[idx]}"
        ordered = _sorted(domains.values(), self.least_free)
        needed = self.count // self.request.slice_size
        top = ordered[0]
        if not self.least_free and top.slices >= needed:
            top = _best_fit(ordered, needed, _slices)
        if self.least_free:
            for d in ordered:
                if d.slices >= needed:
                    return idx, [d]
            if self.request.required:
                return self.not_fit(ordered[-1].pods, needed)
        if top.slices >= needed:
            return idx, [top]
        if self.request.required:
            return self.not_fit(top.slices, needed)
        if idx > 0 and not self.request.unconstrained:
            return self.fit_level(idx - 1)
        chosen, remaining = [], needed
        for i, d in enumerate(ordered):
            if remaining <= 0:
                break
            if not self.least_free and d.slices >= remaining:
                d = _best_fit(ordered[i:], remaining, _slices)
            chosen.append(d)
            remaining -= d.slices
        if remaining > 0:
            return self.not_fit(needed - remaining, needed)
        return idx, chosen


def place(name: str, levels: tuple[str, ...], nodes: Iterable[tuple[str, dict[str, str], dict[str, int]]],
          requests: dict[str, int], count: int, request: TopologyRequest) -> Assignment | str:
    """Where count pods of these requests (per pod; with one `pods` each) go in Topology name's levels, over
    nodes given as (name, labels, free room); or why they cannot go, in Kueue's words."""
    if request.slice_size < 1:
        return "slice topology requested, but slice size not provided"
    level = request.level or (levels[0] if request.slice_level else levels[-1])     # slices alone: the widest
    if level not in levels:
        return f"no requested topology level: {level}"
    slice_level = request.slice_level or levels[-1]
    if slice_level not in levels:
        return f"no requested topology level for slices: {slice_level}"
    requested, slice_idx = levels.index(level), levels.index(slice_level)
    if requested > slice_idx:
        return f"podset slice topology {slice_level} is above the podset topology {level}"
    tree = _Tree(levels, nodes)
    pod = one_pod(requests)
    run = _Placement(tree, name, count, request)
    least_free = run.least_free
    for leaf in tree.leaves:
        leaf.pods, limiting = count_in(pod, leaf.free)
        if leaf.pods == 0 and limiting:
            run.excluded[limiting] = run.excluded.get(limiting, 0) + 1
    for top in tree.by_level[0].values():
        _fill(top, 0, slice_idx, request.slice_size)
    found = run.fit_level(requested)
    if isinstance(found, str):
        return found
    idx, chosen = found
    chosen = _to_minimum(chosen, count, request.slice_size, least_free, True)
    while idx < min(len(levels) - 1, slice_idx):
        chosen = _to_minimum(_sorted((c for d in chosen for c in d.children), least_free), count,
                             request.slice_size, least_free, True)
        idx += 1
    while idx < len(levels) - 1:
        chosen = [c for d in chosen
                  for c in _to_minimum(_sorted(d.children, least_free), d.pods, 1, least_free, False)]
        idx += 1
    chosen = sorted((d for d in chosen if d.pods > 0), key=lambda d: d.values)
    first = len(levels) - 1 if levels[-1] == HOSTNAME else 0
    return Assignment(levels[first:], tuple((d.values[first:], d.pods) for d in chosen),
                      {d.values[first:]: tuple(sorted(d.nodes)) for d in chosen})


@dataclass(frozen=True, slots=True)
class DomainRoom:
    """One domain's room, for /debug and the view: its nodes, their free room summed, and how many pods of a given
    request it holds node by node (0 when no request was given)."""
    values: tuple[str, ...]
    nodes: int
    free: dict[str, int]
    pods: int


def domain_rooms(levels: tuple[str, ...], nodes: Iterable[tuple[str, dict[str, str], dict[str, int]]],
                 requests: dict[str, int] | None = None) -> list[list[DomainRoom]]:
    """Every domain of every level (the widest first), in values order: what each has free, and how many pods of
    requests (with one `pods` each) it holds, counted as place() counts them."""
    tree = _Tree(levels, nodes)
    pod = one_pod(requests) if requests is not None else None
    for leaf in tree.leaves:
        leaf.pods = count_in(pod, leaf.free)[0] if pod is not None else 0
    for top in tree.by_level[0].values():
        _fill(top, 0, -1, 1)            # a parent holds its children's pods (no slice level)
        _sum_free(top)
    return [[DomainRoom(d.values, len(d.nodes), d.free, d.pods) for _, d in sorted(level.items())]
            for level in tree.by_level]


def _sum_free(domain: _Domain) -> dict[str, int]:
    """A domain's free room: a leaf's own, a parent's its children's summed."""
    if domain.children:
        free: dict[str, int] = {}
        for child in domain.children:
            for r, v in _sum_free(child).items():
                free[r] = free.get(r, 0) + v
        domain.free = free
    return domain.free
