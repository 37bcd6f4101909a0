"""The object store: the objects Quotient reads, as the API shows them, and the indexes that find them.

Nodes, pods, namespaces, priority classes, Jobs, pod groups, PodDisruptionBudgets and Kueue's objects, each by
its key or uid; pods also by namespace/name, by pod group and by owner. Nothing here is charged or queued: the
ledger, the queues and the workloads keep that, and ClusterState applies each event to all of them.
"""
from __future__ import annotations

from typing import Callable

from ..core.workload import WorkloadKey, group_of
from ..core.priority import resolve
from ..objects.disruption_budget import PodDisruptionBudget
from ..objects.job import JobInfo
from ..objects.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from ..objects.node import NodeInfo
from ..objects.pod import PodInfo
from ..objects.podgroup import PodGroup
from ..objects.priority_class import PriorityClassInfo
from ..objects.topology import Topology
from .budget_status import Budgets


class Store:
    def __init__(self, policy_changed: Callable[[], None]):
        self.policy_changed = policy_changed              # an object admission reads, other than a pod, changed
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, PodInfo] = {}
        self.uid_by_key: dict[str, str] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.priority_classes: dict[str, PriorityClassInfo] = {}
        self.workload_priority_classes: dict[str, int] = {}   # Kueue's WorkloadPriorityClass name -> value
        self.jobs: dict[str, JobInfo] = {}                     # batch/v1 Jobs by uid
        self.flavors: dict[str, ResourceFlavor] = {}
        self.topologies: dict[str, Topology] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.budgets = Budgets()                        # PodDisruptionBudgets, with the pods they cover
        self.pod_groups: dict[str, PodGroup] = {}       # coscheduling PodGroups by namespace/name
        self.groups: dict[WorkloadKey, set[str]] = {}     # pod group or Job -> member uids
        self.owned: dict[str, set[str]] = {}              # owner uid -> uids of its live pods

    # ---- lookups -------------------------------------------------------
    def members(self, key: WorkloadKey) -> list[PodInfo]:
        """The live members of a pod group, oldest first."""
        return sorted((self.pods[u] for u in self.groups.get(key, ())), key=lambda p: (p.created or 0.0, p.name))

    def pod_by_key(self, key: str) -> PodInfo | None:
        uid = self.uid_by_key.get(key)
        return self.pods.get(uid) if uid else None

    def queue_of(self, pod: PodInfo) -> tuple[LocalQueue | None, ClusterQueue | None]:
        lq = self.local_queues.get(f"{pod.namespace}/{pod.queue_name}") if pod.queue_name else None
        return lq, (self.cluster_queues.get(lq.cluster_queue) if lq else None)

    def resolve_priority(self, pod: PodInfo, before: PodInfo | None = None) -> None:
        """The pod's own priority and the workload's (core.priority.resolve); `before`: the state's record."""
        resolve(pod, self.priority_classes, self.workload_priority_classes, before)

    def kueue_table(self, kind: str) -> dict:
        return {"Topology": self.topologies, "ResourceFlavor": self.flavors, "ClusterQueue": self.cluster_queues,
                "Cohort": self.cohorts, "LocalQueue": self.local_queues}[kind]

    # ---- objects that are policies: a change makes the remembered refusals void (state.blocked) ----
    def upsert_namespace(self, name: str, labels: dict[str, str]) -> None:
        self.namespaces[name] = {**labels, "kubernetes.io/metadata.name": name}
        self.policy_changed()

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)
        self.policy_changed()

    def upsert_priority_class(self, pc: PriorityClassInfo) -> None:
        self.priority_classes[pc.name] = pc
        self.policy_changed()

    def remove_priority_class(self, name: str) -> None:
        self.priority_classes.pop(name, None)
        self.policy_changed()

    def upsert_budget(self, pdb: PodDisruptionBudget) -> None:
        self.budgets.upsert(pdb, self.pods.values())
        self.policy_changed()

    def remove_budget(self, key: str) -> None:
        self.budgets.remove(key)
        self.policy_changed()

    def upsert_pod_group(self, pg: PodGroup) -> None:
        self.pod_groups[pg.key] = pg
        self.policy_changed()

    def remove_pod_group(self, key: str) -> None:
        self.pod_groups.pop(key, None)
        self.policy_changed()

    # ---- the pod indexes ----------------------------------------------------
    def link(self, pod: PodInfo) -> None:
        """Store the pod and index it by key, pod group and owner (a finished pod is in neither of the last)."""
        self.pods[pod.uid] = pod
        self.uid_by_key[pod.key] = pod.uid
        if self.budgets:
            self.budgets.pod_changed(pod)
        if not pod.terminal and group_of(pod):
            self.groups.setdefault(group_of(pod), set()).add(pod.uid)
        if not pod.terminal and pod.owner is not None and pod.owner.uid:
            self.owned.setdefault(pod.owner.uid, set()).add(pod.uid)

    def unlink(self, pod: PodInfo) -> None:
        """Take the pod's record out of the pod group and owner indexes (it stays stored: link replaces it)."""
        if pod.owner is not None and pod.owner.uid in self.owned:
            self.owned[pod.owner.uid].discard(pod.uid)
            if not self.owned[pod.owner.uid]:
                del self.owned[pod.owner.uid]
        key = group_of(pod)
        if key:
            members = self.groups.get(key)
            if members is not None:
                members.discard(pod.uid)
                if not members:
                    del self.groups[key]

    def forget(self, pod: PodInfo) -> None:
        """The pod is deleted: out of the budgets and the key index (its record is already unlinked)."""
        if self.budgets:
            self.budgets.pod_removed(pod)
        if self.uid_by_key.get(pod.key) == pod.uid:
            del self.uid_by_key[pod.key]
