"""What core/ may read of the cluster: the ClusterView protocol, which state/ClusterState implements.

A decision reads the state through this view and never changes it: the quota tree it gets from
quota_node / quota_tree is the decisions' mirror (simulated charges and removals go through
core.overlay and are taken back), and the state's own methods named here are queries. What a decision
calls for (a reservation, a hold, an eviction, a requeue) it returns as a core.decisions value, which
the extender commits to state/ and hands to act/.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..config import Configuration
    from ..objects.job import JobInfo
    from ..objects.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
    from ..objects.node import NodeInfo
    from ..objects.pod import PodInfo
    from ..objects.podgroup import PodGroup
    from ..state.budgets import Budgets
    from ..state.tree import QuotaTree
    from .drift import Decided, Overrun
    from .flavors import Charge
    from .quota import QuotaNode
    from .readiness import Readiness, RequeueRecord


@runtime_checkable
class ClusterView(Protocol):
    # objects, as decoded at the edge
    config: Configuration
    pods: dict[str, PodInfo]
    nodes: dict[str, NodeInfo]
    flavors: dict[str, ResourceFlavor]
    cluster_queues: dict[str, ClusterQueue]
    cohorts: dict[str, Cohort]
    local_queues: dict[str, LocalQueue]
    priority_classes: dict
    pod_groups: dict[str, PodGroup]
    jobs: dict[str, JobInfo]                # batch/v1 Jobs by uid
    jobs_listed: bool                       # Jobs are a source (an owner not among them is not seen yet)
    job_waits: dict[str, float]             # uid of a Job not listed -> when its first pod was seen
    job_admissions: dict                    # Job uid -> JobAdmission (its size, one pod's charge, spare slots)
    budgets: Budgets                        # PodDisruptionBudgets with their running figures
    # running totals and indexes
    admitted: dict[str, Charge]             # pods holding quota (by_queue: uids per ClusterQueue)
    reservations: dict                      # uid -> Reservation (filter passed, bind pending)
    holds: dict                             # preemptor uid -> Hold (room and quota kept for it)
    going: set[str]                         # victims chosen, still running
    pending: dict                           # ClusterQueue -> its pending pods in queue order
    pending_shapes: dict                    # ClusterQueue -> Counter of its pending pods' shapes
    node_pods: dict[str, set[str]]
    flavor_nodes: dict[str, set[str] | None]
    readiness: dict[str, Readiness]         # waitForPodsReady: admitted workloads
    requeues: dict[str, RequeueRecord]      # waitForPodsReady: PodsReadyTimeout evictions
    tree: QuotaTree                         # the live tree: decisions read only its inactive queues
    generation: int                         # changes whenever the state does
    blocked: object                         # state.blocked.BlockedQueues: refusals remembered per pod shape

    def clock(self) -> float: ...           # wall clock: compared with, or written as, API timestamps
    def timer(self) -> float: ...           # monotonic: the durations Quotient measures itself
    def quota_node(self, cq_name: str) -> QuotaNode | None: ...
    def quota_tree(self) -> QuotaTree: ...
    def quota_requests(self, pod: PodInfo) -> dict[str, int]: ...
    def over_quota(self, charge: Charge) -> str: ...
    def overrun(self, cq_name: str) -> Overrun | None: ...
    def decided(self, uid: str, cluster_queue: str) -> Decided | None: ...
    def room(self, node: str, holder: str = "") -> dict[str, int]: ...
    def rooms(self, holder: str = "") -> Callable[[str], dict[str, int]]: ...
    def node_in_flavor(self, node: str, flavor: str) -> bool: ...
    def members(self, key: str) -> list[PodInfo]: ...
    def unit_members(self, unit: str) -> list[PodInfo]: ...
    def pending_pods(self, cq_name: str, before: tuple | None = None) -> Iterator[PodInfo]: ...
    def queue_key(self, pod: PodInfo) -> tuple: ...
    def away(self, uid: str) -> bool: ...
    def expected(self, uid: str) -> bool: ...
    def present_pending(self, cq_name: str, before: tuple | None = None) -> Iterator[PodInfo]: ...
    def victims(self) -> frozenset[str]: ...
    def namespace_labels(self, namespace: str) -> dict[str, str]: ...
