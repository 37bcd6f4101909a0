"""What a decision reads of the cluster: narrow views, each named for what it reads; state/ClusterState implements them.

A decision reads the state through these views and never changes it: the quota tree it gets from
ledger.quota_node / ledger.quota_tree is the decisions' mirror (simulated charges and removals go through
core.overlay and are taken back), and the components' methods named here are queries. What a decision
calls for (a reservation, a hold, an eviction, a requeue) it returns as a core.decisions value, which
the scheduler's commit applies to state/ and hands to act/.

ClusterState is split by job (state/: store, ledger, queues, workloads, pods_ready); a view names the plain
data it reads and the components whose queries it calls (StoreReads, LedgerReads, QueueReads, HoldReads,
ReadinessReads: only the queries core makes of each).

Each core function is annotated with the narrowest view it (and what it calls) reads. The small views are
the parts; the wider ones are what a whole decision reads, made of them:

  QuotaNodes, QuotaView        the quota ledger's mirror, charges checked against what really runs
  QueueView                    Kueue's objects and the pending queues in their order
  PresenceView                 which pending pods kube-scheduler brings now, and the state's generation
  GroupView, JobsView          pod groups and Jobs as workloads: members, sizes, holds
  NodeView                     nodes, their room and flavors
  PolicyView, BudgetsView      what preemption's laws read: priority classes, cohorts, disruption budgets
  CandidateView, PreemptionView   preemption's candidates and plans
  ReadinessView                waitForPodsReady's records
  AdmissionView                one admission decision (core.admission.decide), with its walks and oracle
  GateView, ReclaimView, BindingView, ClearedView   admission with the gate, node choice, bind, cleared refusals
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..config import Configuration
    from ..objects.disruption_budget import PodDisruptionBudget
    from ..objects.job import JobInfo
    from ..objects.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
    from ..objects.node import NodeInfo
    from ..objects.offered_nodes import OfferedNodes
    from ..objects.pod import PodInfo
    from ..objects.podgroup import PodGroup
    from .drift import Decided, Overrun
    from .flavors import Charge
    from .resource_node import QuotaNode
    from .workload import Readiness, RequeueRecord, Workload, WorkloadKey


class QuotaTreeView(Protocol):
    """A quota tree (state.tree.QuotaTree): its nodes by name, and the ClusterQueues that admit nothing."""
    queues: dict[str, QuotaNode]
    cohorts: dict[str, QuotaNode]
    inactive: dict[str, str]                # ClusterQueue -> why it is inactive


class BudgetFigures(Protocol):
    """PodDisruptionBudgets with their running figures (state.budgets.Budgets)."""
    def figures(self) -> Iterable[tuple[PodDisruptionBudget, object, int]]: ...


class RefusalMemory(Protocol):
    """Refusals remembered per pod shape (state.blocked.BlockedQueues)."""
    def lookup(self, state, pod: PodInfo, offered: OfferedNodes | None = None) -> object | None: ...
    def remember(self, state, pod: PodInfo, verdict, offered: OfferedNodes | None = None,
                 reclaim_tried: bool = False) -> None: ...


class StoreReads(Protocol):
    """The object store's queries (state.store.Store)."""
    namespaces: dict[str, dict[str, str]]          # a namespace's labels (objects.selectors.namespace_labels)
    def members(self, key: WorkloadKey) -> list[PodInfo]: ...
    def pod_by_key(self, key: str) -> PodInfo | None: ...
    def queue_of(self, pod: PodInfo) -> tuple[LocalQueue | None, ClusterQueue | None]: ...


class LedgerReads(Protocol):
    """The quota ledger's queries (state.ledger.Ledger): the decisions' mirror, what a pod counts, the invariant."""
    tree: QuotaTreeView                     # the live tree (a rebuild makes a new one)
    def quota_node(self, cq_name: str) -> QuotaNode | None: ...
    def quota_tree(self) -> QuotaTreeView: ...
    def quota_requests(self, pod: PodInfo | Workload) -> dict[str, int]: ...       # a pod's, or a workload's total
    def over_quota(self, charge: Charge) -> str: ...
    def overrun(self, cq_name: str) -> Overrun | None: ...
    def node_in_flavor(self, node: str, flavor: str) -> bool: ...


class QueueReads(Protocol):
    """The pending queues' queries (state.queues.Queues): order, and whether kube-scheduler brings a pod now."""
    def pending_pods(self, cq_name: str, before: tuple | None = None) -> Iterator[PodInfo]: ...
    def present_pending(self, cq_name: str, before: tuple | None = None,
                        skip: set | frozenset = frozenset()) -> Iterator[PodInfo]: ...
    def queue_key(self, pod: PodInfo) -> tuple: ...
    def away(self, uid: str) -> bool: ...
    def expected(self, uid: str) -> bool: ...


class HoldReads(Protocol):
    """Reservations' and holds' queries (state.workloads.Workloads): room left on nodes, victims, decisions kept."""
    def room(self, node: str, holder: str = "") -> dict[str, int]: ...
    def rooms(self, holder: str = "") -> Callable[[str], dict[str, int]]: ...
    def victims(self) -> frozenset[str]: ...
    def decided(self, uid: str, cluster_queue: str) -> Decided | None: ...


class ReadinessReads(Protocol):
    """waitForPodsReady's query (state.pods_ready.PodsReady)."""
    def unit_members(self, unit: WorkloadKey) -> list[PodInfo]: ...


@runtime_checkable
class Clocks(Protocol):
    def clock(self) -> float: ...           # wall clock: compared with, or written as, API timestamps
    def timer(self) -> float: ...           # monotonic: the durations Quotient measures itself


@runtime_checkable
class QuotaNodes(Protocol):
    """A ClusterQueue's node in the decisions' mirror of the quota tree (ledger.quota_node; core.overlay charges it)."""
    ledger: LedgerReads


@runtime_checkable
class QuotaView(QuotaNodes, Protocol):
    """The quota ledger as decisions see it: the mirror, what a pod counts, and the invariant against what runs
    (ledger.tree, the live tree: decisions read only its inactive queues)."""


@runtime_checkable
class QueueView(Protocol):
    """Kueue's objects as decoded at the edge, and each ClusterQueue's pending pods in queue order."""
    config: Configuration
    flavors: dict[str, ResourceFlavor]
    cluster_queues: dict[str, ClusterQueue]
    cohorts: dict[str, Cohort]
    local_queues: dict[str, LocalQueue]
    pending: dict                           # ClusterQueue -> its pending pods in queue order
    store: StoreReads                       # namespace labels, the pod's LocalQueue
    queues: QueueReads                      # the walks in queue order


@runtime_checkable
class PresenceView(Clocks, Protocol):
    """Which pending pods kube-scheduler brings now (state.presence), and the state's generation."""
    generation: int                         # changes whenever the state does
    queues: QueueReads                      # away, expected


@runtime_checkable
class GroupView(Protocol):
    """Pod groups and Jobs as workloads: their members, their sizes, the room held for them."""
    pods: dict[str, PodInfo]
    holds: dict                             # preemptor uid -> Hold (room and quota kept for it)
    pod_groups: dict[str, PodGroup]
    jobs: dict[str, JobInfo]                # batch/v1 Jobs by uid
    job_admissions: dict                    # Job uid -> JobAdmission (its size, one pod's charge, spare slots)
    store: StoreReads                       # a group's members


@runtime_checkable
class JobsView(Clocks, Protocol):
    """Whether a pod's Job is known, or may only be late."""
    config: Configuration
    jobs: dict[str, JobInfo]
    jobs_listed: bool                       # Jobs are a source (an owner not among them is not seen yet)
    job_waits: dict[str, float]             # uid of a Job not listed -> when its first pod was seen


@runtime_checkable
class NodeView(Protocol):
    """Nodes, the pods on them, the room left (holds counted) and the flavors they belong to."""
    nodes: dict[str, NodeInfo]
    node_pods: dict[str, set[str]]
    flavor_nodes: dict[str, set[str] | None]
    ledger: LedgerReads                     # node_in_flavor
    workloads: HoldReads                    # room, rooms


@runtime_checkable
class BudgetsView(Protocol):
    budgets: BudgetFigures


@runtime_checkable
class PolicyView(QuotaNodes, Protocol):
    """What preemption's laws read: the policies of ClusterQueues and Cohorts, and PriorityClasses."""
    config: Configuration
    cluster_queues: dict[str, ClusterQueue]
    cohorts: dict[str, Cohort]
    priority_classes: dict


@runtime_checkable
class CandidateView(PolicyView, BudgetsView, Protocol):
    """Preemption's candidates: admitted pods with their charges, the victims already chosen, groups whole."""
    pods: dict[str, PodInfo]
    admitted: dict[str, Charge]             # pods holding quota (by_queue: uids per ClusterQueue)
    going: set[str]                         # victims chosen, still running
    holds: dict
    job_admissions: dict
    node_pods: dict[str, set[str]]
    store: StoreReads                       # a group's members, whole
    workloads: HoldReads                    # the victims already chosen


@runtime_checkable
class PreemptionView(CandidateView, Protocol):
    """Preemption's plans: candidates, and the nodes they run on."""
    nodes: dict[str, NodeInfo]
    generation: int


@runtime_checkable
class ReadinessView(Clocks, Protocol):
    """waitForPodsReady's records: admitted workloads not all Ready yet, and the requeued ones."""
    config: Configuration
    pods: dict[str, PodInfo]
    reservations: dict                      # uid -> Reservation (filter passed, bind pending)
    readiness: dict[WorkloadKey, Readiness]
    requeues: dict[str, RequeueRecord]      # by the workload's printed name (core.readiness.requeue_key)
    pods_ready: ReadinessReads


@runtime_checkable
class AdmissionView(QuotaView, QueueView, PresenceView, GroupView, JobsView, PreemptionView, Protocol):
    """One admission decision (core.admission.decide): the queue, the quota, the pods ahead, the preemption oracle,
    and the requeued workloads passed over."""
    requeues: dict[str, RequeueRecord]


@runtime_checkable
class GateView(AdmissionView, ReadinessView, Protocol):
    """Admission behind waitForPodsReady's gate (core.next_in_line)."""


@runtime_checkable
class ReclaimView(AdmissionView, NodeView, Protocol):
    """Admission with a node for each pod: reclaim, gang admission, filter's nodes."""


@runtime_checkable
class BindingView(AdmissionView, NodeView, Protocol):
    """Bind's checks: the reservation against what filter decided on (workloads.decided), and the node's held room."""


@runtime_checkable
class ClearedView(ReclaimView, GateView, Protocol):
    """When a refusal no longer holds: every rule it may have come from, and the refusals remembered per shape."""
    blocked: RefusalMemory

