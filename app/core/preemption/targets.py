"""What preemption deals in: the preemptor, its candidates, the targets chosen and a node's victim group.

The reasons are Kueue's preemption reasons (the Preempted condition's), plus one for a pod in no
queue, taken only for room on its node.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...objects.kueue import ClusterQueue
from ...objects.pod import PodInfo
from ..hierarchy import RECLAIM_WHILE_BORROWING
from ..resource_node import FR, QuotaNode, available
from ..rules import (IN_CLUSTER_QUEUE, IN_COHORT_FAIR_SHARING, IN_COHORT_RECLAIM_WHILE_BORROWING,
                     IN_COHORT_RECLAMATION, LOWER_PRIORITY_ON_NODE)
from ..workload import Workload
from .ordering import plan_key


CAUSES = {IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
          IN_COHORT_RECLAMATION: "reclamation within the cohort",
          IN_COHORT_FAIR_SHARING: "fair sharing within the cohort",
          IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
          LOWER_PRIORITY_ON_NODE: "room on the node for a higher-priority pod"}


def victim_message(reason: str, preemptor: Workload) -> str:
    """The message a victim's eviction carries, worded as Kueue's Preempted condition."""
    return f"Preempted to accommodate {preemptor.preemptor_name} due to {CAUSES[reason]}"


@dataclass(slots=True, eq=False)
class Candidate:
    pod: PodInfo
    cluster_queue: str              # "" for a pod in no queue
    usage: dict[FR, int]
    admitted_at: float
    last_resort: bool = False       # opted out of preemption, or its PodDisruptionBudget is spent
    rank: int = 0                   # place in candidate order
    members: tuple = ()             # a running pod group is one candidate: all of it or none of it
    variant: str = ""               # another queue's: how it may be reclaimed (core.hierarchy)
    lca: QuotaNode | None = None    # the Cohort it was reached at: its queue must borrow up to there
    admission: tuple = ()           # admission_key of its most recently admitted pod (a group's latest member)

    def pods(self) -> tuple:
        return self.members or (self.pod,)

    def requests_on(self, node: str) -> dict[str, int]:
        """What removing this candidate frees on one node."""
        out: dict[str, int] = {}
        for p in self.pods():
            if p.node_name == node:
                add_requests(out, p.requests)
        return out


@dataclass(slots=True)
class Target:
    candidate: Candidate
    reason: str


@dataclass
class Plan:
    """The victims that make room for the preemptor on one node."""
    node: str
    targets: list[Target]
    others: dict[str, str] = field(default_factory=dict)   # nodes not chosen -> why

    key = plan_key

    def victims(self) -> list[tuple[str, PodInfo]]:
        """(reason, pod) for every pod the plan evicts: a running group counts whole."""
        return [(t.reason, m) for t in self.targets for m in t.candidate.pods()]


@dataclass
class Preemptor:
    workload: Workload
    cq: ClusterQueue
    node: QuotaNode                 # the ClusterQueue's quota node
    usage: dict[FR, int]            # what the pod charges, from its flavor assignment
    flavors: set[str]
    needs: set[FR] = field(init=False)      # what does not fit the quota now: victims must free it
    relevant: set[FR] = field(init=False)   # needs, or everything the pod charges when it all fits

    def __post_init__(self):
        self.needs = {fr for fr, v in self.usage.items() if v > available(self.node, fr)}
        self.relevant = self.needs or set(self.usage)


def add_requests(into: dict[str, int], requests: dict[str, int], sign: int = 1) -> None:
    for r, v in requests.items():
        into[r] = into.get(r, 0) + sign * v


def reason_of(pre: Preemptor, c: Candidate) -> str:
    """Kueue's PreemptionReason of the candidate's variant."""
    if not c.cluster_queue:
        return LOWER_PRIORITY_ON_NODE
    if c.cluster_queue == pre.cq.name:
        return IN_CLUSTER_QUEUE
    return IN_COHORT_RECLAIM_WHILE_BORROWING if c.variant == RECLAIM_WHILE_BORROWING else IN_COHORT_RECLAMATION
