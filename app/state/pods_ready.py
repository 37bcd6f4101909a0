"""waitForPodsReady: when each admitted workload was admitted and became (or stopped being) all Ready, and the
PodsReadyTimeout evictions that decide its backoff and its place when requeued (core.readiness decides)."""
from __future__ import annotations

from typing import Callable

from ..config import Configuration
from ..core.gangs import expected_size
from ..core.readiness import all_ready, requeue_key, unit_of
from ..core.workload import JOB, POD, Readiness, RequeueRecord, WorkloadKey, group_of
from ..objects.pod import PodInfo
from .store import Store


class PodsReady:
    def __init__(self, config: Configuration, store: Store, clock: Callable[[], float], cluster):
        self.config, self.store, self.clock = config, store, clock
        self.cluster = cluster                            # ClusterState: what expected_size reads (Jobs, groups)
        self.readiness: dict[WorkloadKey, Readiness] = {}  # waitForPodsReady: admitted workloads
        self.requeues: dict[str, RequeueRecord] = {}      # waitForPodsReady: PodsReadyTimeout evictions

    def track_readiness(self, pod: PodInfo) -> None:
        """waitForPodsReady: note when the pod's workload was admitted, and when it became (or stopped
        being) all Ready. A member that finished does not count as lost readiness."""
        cfg = self.config.wait_for_pods_ready
        if cfg is None or not pod.queue_name:
            return
        unit, group = unit_of(pod), group_of(pod)
        members = self.unit_members(unit)
        bound = [m for m in members if m.node_name and not m.terminal]
        record = self.readiness.get(unit)
        if record is not None and pod.phase == "Succeeded" and unit.kind != POD:
            record.finished += 1
        if not bound:
            self.readiness.pop(unit, None)
            return
        now = self.clock()
        if record is None:
            record = self.readiness[unit] = Readiness(now)
        if all_ready(bound, members, record.finished, (expected_size(self.cluster, pod) or 1) if group else None):
            record.ready_at = record.ready_at or now
            record.unready_at = None
        elif record.ready_at is not None and record.unready_at is None:
            record.unready_at = now      # a member unready, or gone and not yet back

    def unit_members(self, unit: WorkloadKey) -> list[PodInfo]:
        """The live pods of a readiness unit (unit_of): a group, a Job's pods, or one pod."""
        if unit.kind == POD:
            pod = self.store.pod_by_key(f"{unit.namespace}/{unit.name}")
            return [pod] if pod is not None else []
        if unit.kind == JOB:
            return [self.store.pods[u] for u in self.store.owned.get(unit.uid, ()) if u in self.store.pods]
        return self.store.members(unit)

    def forget_stale_requeue(self, pod: PodInfo) -> None:
        """A new controller that reuses a requeued workload's name starts afresh: its predecessor's
        PodsReadyTimeout record (backoff, deactivation, place in the queue) is forgotten."""
        if not self.requeues:
            return
        key = requeue_key(pod)
        record = self.requeues.get(key)
        if record is not None and record.owner_uid and pod.owner is not None and pod.owner.uid != record.owner_uid:
            del self.requeues[key]
