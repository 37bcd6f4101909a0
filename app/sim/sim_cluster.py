"""The simulated cluster: the API server's truth, and kube-scheduler's in-tree checks over it.

Every change is also sent to the extender's ClusterState through sync.dispatch,
as a watch would deliver it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

from ..core.placement import shortfall, static_misfit
from ..objects.meta import format_time, stable_uid
from ..objects.node import NodeInfo, decode_node
from ..objects.pod import PodInfo, decode_pod
from ..state.cluster import ClusterState
from ..sync.dispatch import apply_object
from .scoring import most_allocated, nonzero

RECREATING_OWNERS = ("ReplicaSet", "Job", "StatefulSet")


def set_condition(status: dict, kind: str, true: bool, now: float | None) -> None:
    """Set one pod condition, keeping the others; lastTransitionTime (to the second) moves only when the
    status changes, as the API server and the kubelet write it."""
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == kind), None)
    value = "True" if true else "False"
    if old is not None and old.get("status") == value:
        return
    cond = {"type": kind, "status": value}
    if now is not None:
        cond["lastTransitionTime"] = format_time(now)
    status["conditions"] = [c for c in conditions if c is not old] + [cond]


@dataclass
class SimPod:
    obj: dict
    info: PodInfo
    ready_after: float | None = 0.0
    finish_after: float | None = None
    unready_after: float | None = None
    recreations: int = 0
    base_name: str = ""
    terminate_after: float = 0.0


@dataclass
class SimCluster:
    state: ClusterState
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    pods: dict[str, SimPod] = field(default_factory=dict)       # key -> pod (present in the API)
    evictions: list[tuple[float, str, str]] = field(default_factory=list)   # (time, pod, reason)
    preempted: set[str] = field(default_factory=set)
    resource_version: int = 0
    defer: Callable[[Callable[[], None]], None] | None = None   # Quotient's watch lags: deliver later

    def deliver(self, obj: dict, deleted: bool = False) -> None:
        """A pod change, as Quotient's watch delivers it: at once, or later through defer (a copy, as it was)."""
        if self.defer is None:
            apply_object(self.state, obj, deleted=deleted)
            return
        seen = copy.deepcopy(obj)
        self.defer(lambda: apply_object(self.state, seen, deleted=deleted))

    def _info(self, pod: SimPod) -> PodInfo:
        """The API's pod: Quotient's record of it when its watch is not behind (priority resolved)."""
        info = decode_pod(pod.obj)
        if self.defer is None:
            return self.state.pods.get(info.uid, info)
        self.state.store.resolve_priority(info, self.state.pods.get(info.uid))
        return info

    # ---- the API side -----------------------------------------------------
    def add_object(self, obj: dict) -> None:
        if obj.get("kind") == "Node":
            node = decode_node(obj)
            self.nodes[node.name] = node
        apply_object(self.state, obj)

    def add_pod(self, pod: SimPod) -> None:
        self.pods[pod.info.key] = pod
        self.write(pod.obj)
        self.deliver(pod.obj)
        pod.info = self._info(pod)

    def update_pod(self, pod: SimPod, *, node: str | None = None, ready: bool | None = None,
                   phase: str | None = None, nominated: str | None = None, deleting: float | None = None,
                   now: float | None = None) -> None:
        """Change a pod as the API server (and the kubelet) would, times to the second: a bind sets
        PodScheduled=True and, the pod starting at once, status.startTime; every write a new resourceVersion."""
        obj = pod.obj
        if deleting is not None:
            obj["metadata"]["deletionTimestamp"] = format_time(deleting)
        spec, status = obj.setdefault("spec", {}), obj.setdefault("status", {})
        if node is not None:
            spec["nodeName"] = node
            status["phase"] = "Running"
            if now is not None:
                set_condition(status, "PodScheduled", True, now)
                status.setdefault("startTime", format_time(now))
        if ready is not None:
            set_condition(status, "Ready", ready, now)
        if phase is not None:
            status["phase"] = phase
        if nominated is not None:
            status["nominatedNodeName"] = nominated
        self.write(obj)
        self.deliver(obj)
        pod.info = self._info(pod)

    def write(self, obj: dict) -> None:
        """A new resourceVersion (a string, as the API server's) for every write."""
        self.resource_version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)

    def delete_pod(self, key: str) -> SimPod | None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            self.deliver(pod.obj, deleted=True)
        return pod

    def evict(self, key: str, now: float, reason: str, preemption: bool) -> SimPod | None:
        """Remove a pod as an eviction would: at once, or, with terminate-after, Terminating on its
        node meanwhile (the caller removes it when that time is up). A controller-owned pod comes back
        as <name>-r<N> at once, as a ReplicaSet or Job replaces a terminating pod."""
        pod = self.pods.get(key)
        if pod is None or pod.info.deleting:
            return None
        if pod.info.node_name:      # a bound pod is deleted gracefully: deletionTimestamp first
            self.update_pod(pod, deleting=now)
        if not (pod.terminate_after > 0 and pod.info.node_name):
            self.delete_pod(key)
        self.evictions.append((now, key, reason))
        if preemption:
            self.preempted.add(key)
        if pod.info.owner and pod.info.owner.kind in RECREATING_OWNERS:
            return self._recreate(pod, now)
        return None

    def _recreate(self, pod: SimPod, now: float) -> SimPod:
        base = pod.base_name or pod.info.name
        n = pod.recreations + 1
        obj = copy.deepcopy(pod.obj)
        meta = obj["metadata"]
        meta["name"] = f"{base}-r{n}"
        meta["uid"] = stable_uid("Pod", pod.info.namespace, f"{base}-r{n}")
        meta["creationTimestamp"] = format_time(now)
        obj.setdefault("spec", {}).pop("nodeName", None)
        obj["status"] = {"phase": "Pending"}
        obj["metadata"].pop("deletionTimestamp", None)
        fresh = SimPod(obj, decode_pod(obj), pod.ready_after, pod.finish_after, pod.unready_after, n, base,
                       pod.terminate_after)
        self.add_pod(fresh)
        return fresh

    # ---- kube-scheduler's in-tree filters -------------------------------------
    def requested_on(self, node: str, exclude: set[str] = frozenset(), counted=None) -> dict[str, int]:
        """What the pods on node request, each pod's requests as counted(requests) when given."""
        used: dict[str, int] = {}
        for p in self.pods.values():
            if p.info.node_name == node and not p.info.terminal and p.info.key not in exclude:
                for r, v in (counted(p.info.requests) if counted else p.info.requests).items():
                    used[r] = used.get(r, 0) + v
        return used

    def packing_score(self, pod: PodInfo, name: str, weights: dict[str, int]) -> int:
        """NodeResourcesFit's MostAllocated score of the node with the pod on it (scoring.py)."""
        placed = self.requested_on(name, counted=nonzero)
        return most_allocated(nonzero(pod.requests), placed, self.nodes[name].allocatable, weights)

    @staticmethod
    def fits(pod: PodInfo, node: NodeInfo, used: dict[str, int]) -> str:
        """NodeResourcesFit: '' when the requests fit, else "Insufficient <resource>"."""
        return shortfall(pod.requests, {r: v - used.get(r, 0) for r, v in node.allocatable.items()})

    def nominated_on(self, node: str, pod: PodInfo, used: dict[str, int]) -> dict[str, int]:
        """used plus the pods nominated to node after a preemption with a priority at least pod's: kube-scheduler
        filters as if they ran there (RunFilterPluginsWithNominatedPods), so the room is theirs."""
        out = dict(used)
        for p in self.pods.values():
            i = p.info
            if i.nominated_node == node and not i.node_name and i.uid != pod.uid \
                    and (i.pod_priority or 0) >= (pod.pod_priority or 0):
                for r, v in i.requests.items():
                    out[r] = out.get(r, 0) + v
        return out

    def in_tree_filter(self, pod: PodInfo) -> tuple[list[str], dict[str, str]]:
        """(feasible node names sorted, node -> failure reason)."""
        feasible, failed = [], {}
        for name in sorted(self.nodes):
            node = self.nodes[name]
            why = static_misfit(pod, node) or self.fits(pod, node, self.nominated_on(name, pod, self.requested_on(name)))
            if why:
                failed[name] = why
            else:
                feasible.append(name)
        return feasible, failed

    def victims_on(self, pod: PodInfo, name: str) -> list[SimPod] | None:
        """kube-scheduler's dry run on one node: the fewest lower-priority pods whose removal lets pod fit."""
        node = self.nodes[name]
        if static_misfit(pod, node):
            return None
        lower = [p for p in self.pods.values() if p.info.node_name == name and not p.info.terminal
                 and not p.info.deleting and (p.info.pod_priority or 0) < (pod.pod_priority or 0)]
        if not lower:
            return None
        removed = {p.info.key for p in lower}
        if self.fits(pod, node, self.requested_on(name, removed)):
            return None
        # Reprieve the most important victims first, keeping only those that must go.
        victims = []
        for p in sorted(lower, key=lambda p: (-(p.info.pod_priority or 0), p.info.created or 0)):
            removed.discard(p.info.key)
            if self.fits(pod, node, self.requested_on(name, removed)):
                removed.add(p.info.key)
                victims.append(p)
        return victims or None
