"""Run a scenario file and check its Expectation: exit 0 (holds), 1 (does not), 2 (bad file)."""
from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field

from .scenario import LIST_FIELDS, Scenario, ScenarioError, load_scenario
from .kube_scheduler import NotConverged, SimScheduler


@dataclass
class SimResult:
    admitted: dict[str, str] = field(default_factory=dict)     # pod -> node, bound at the end
    pending: set[str] = field(default_factory=set)             # present, not bound
    preempted: set[str] = field(default_factory=set)
    evictions: int = 0
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)    # node -> its labels (colocated)
    domain_levels: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a Topology's level -> it and wider
    reasons: dict[str, str] = field(default_factory=dict)      # last reason a pod waited
    timeline: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)        # instants above quota


async def simulate(scenario: Scenario, verbose: bool = False, prioritize_weight: int = 0) -> SimResult:
    """Run the scenario; prioritize_weight > 0 registers the prioritize verb with that weight (the shipped
    scheduler configurations do not)."""
    sim = SimScheduler(scenario, verbose, prioritize_weight)
    until = scenario.expectation.until if scenario.expectation else None
    await sim.run(until)
    out = SimResult(timeline=sim.timeline, reasons=dict(sim.last_reason), violations=list(sim.violations))
    for key, pod in sim.cluster.pods.items():
        if pod.info.node_name:
            out.admitted[key] = pod.info.node_name
        else:
            out.pending.add(key)
    out.preempted = set(sim.cluster.preempted)
    out.node_labels = {name: node.labels for name, node in sim.cluster.nodes.items()}
    for topology in sim.cluster.state.store.topologies.values():
        for i, level in enumerate(topology.levels):
            out.domain_levels.setdefault(level, topology.levels[:i + 1])
    out.evictions = len(sim.cluster.evictions)
    return out


def differences(scenario: Scenario, out: SimResult) -> list[str]:
    """Every way the outcome differs from the Expectation, in words."""
    diffs = [f"the quota invariant does not hold {v}" for v in out.violations]
    exp = scenario.expectation
    if exp is None:
        return diffs

    def state_of(key: str) -> str:
        if key in out.admitted:
            return f"admitted on {out.admitted[key]}"
        if key in out.pending:
            why = out.reasons.get(key)
            return f"pending ({why})" if why else "pending"
        return "gone (evicted)" if key in out.preempted else "gone"

    for key in exp.lists.get("admitted", []):
        if key not in out.admitted:
            diffs.append(f"expected {key} admitted, but it is {state_of(key)}")
    for key in exp.lists.get("pending", []):
        if key not in out.pending:
            diffs.append(f"expected {key} pending, but it is {state_of(key)}")
    for key in exp.lists.get("preempted", []):
        if key not in out.preempted:
            diffs.append(f"expected {key} preempted, but it never was (it is {state_of(key)})")
    for key in exp.lists.get("notPreempted", []):
        if key in out.preempted:
            diffs.append(f"expected {key} never preempted, but it was")
    for key, node in exp.placements.items():
        if out.admitted.get(key) != node:
            diffs.append(f"expected {key} on {node}, but it is {state_of(key)}")
    for label, keys in exp.colocated:
        # one domain of a Topology's level is one value of it and of every wider level (rack r1 of block b1)
        path = out.domain_levels.get(label, (label,))
        domains = {k: tuple(out.node_labels.get(out.admitted[k], {}).get(level) for level in path)
                   for k in keys if k in out.admitted}
        values = {k: d[-1] for k, d in domains.items()}
        if len(domains) < len(keys) or any(None in d for d in domains.values()) or len(set(domains.values())) > 1:
            where = ", ".join(f"{k} {f'on {out.admitted[k]} ({label}={values[k]})' if k in values else state_of(k)}"
                              for k in keys)
            diffs.append(f"expected {', '.join(keys)} in one {label} domain, but: {where}")
    if exp.max_evictions is not None and out.evictions > exp.max_evictions:
        diffs.append(f"expected at most {exp.max_evictions} evictions, but there were {out.evictions}")
    return diffs


def run_file(path: str, verbose: bool = True, prioritize_weight: int = 0) -> int:
    try:
        scenario = load_scenario(path)
    except ScenarioError as e:
        print(f"quotient simulate: {e}", file=sys.stderr)
        return 2
    try:
        out = asyncio.run(simulate(scenario, verbose, prioritize_weight))
    except NotConverged as e:
        print(f"quotient simulate: {path}: {e}", file=sys.stderr)
        return 1
    print(f"\n{len(out.admitted)} admitted, {len(out.pending)} pending, {len(out.preempted)} preempted, "
          f"{out.evictions} evictions")
    diffs = differences(scenario, out)
    if scenario.expectation is None and not diffs:
        print("no Expectation in the file: only the quota invariant checked")
        return 0
    if diffs:
        broken = "the quota invariant and the Expectation do not" if out.violations else "the Expectation does not"
        print(f"FAIL {path}: {broken} hold:")
        for d in diffs:
            print(f"  - {d}")
        return 1
    checked = sum(len(scenario.expectation.lists[n]) for n in LIST_FIELDS) + len(scenario.expectation.placements) \
        + len(scenario.expectation.colocated)
    print(f"PASS {path}: {checked} expectations hold")
    return 0
