"""The queues: each ClusterQueue's pending pods in queue order, kept as pods come and go, and whether
kube-scheduler brings them now (state.presence) or a refusal of their shape still stands (state.blocked).

A pod's place is core.readiness.queue_order (priority, then creation, a requeued workload's place by
requeuingStrategy); walks stop at maxQueueScan, so a long queue cannot slow a decision down.
"""
from __future__ import annotations

import bisect
import itertools
from collections import Counter
from typing import Callable, Iterator

from ..config import Configuration
from ..core.gangs import walk_shape
from ..core.workload import group_of
from ..core.readiness import RequeueRecord, queue_order, requeue_key
from ..objects.pod import PodInfo
from .blocked import BlockedQueues
from .presence import Presence, remove_entry
from .store import Store


class Queues:
    def __init__(self, config: Configuration, store: Store, timer: Callable[[], float],
                 reservations: dict, requeues: dict[str, RequeueRecord]):
        self.config, self.store = config, store
        self._reservations, self._requeues = reservations, requeues    # the workloads' own dicts, read here
        self.pending: dict[str, list[tuple]] = {}       # ClusterQueue -> sorted [(order key, uid)]
        self.pending_of: dict[str, tuple[str, tuple, object]] = {}    # uid -> (ClusterQueue, entry, shape)
        self.pending_left: Counter = Counter()    # ClusterQueue -> pending pods that left its queue unadmitted
        self.blocked = BlockedQueues()            # refusals remembered per pod shape (state.blocked)
        # Pods that carry Kueue's admission gate (PodInfo.gated), waiting for scheduler.ungate: per ClusterQueue,
        # per shape (a group's members under its WorkloadKey), their entries in queue order; and the gated pods
        # not Quotient's to hold (no queue label, a batch/v1 Job's pods: admitted at filter), to ungate at once.
        self.gated: dict[str, dict[object, list[tuple]]] = {}
        self.gated_of: dict[str, tuple[str, object, tuple]] = {}    # uid -> (ClusterQueue, shape, entry)
        self.not_held: set[str] = set()
        self.gate_waiting: dict[tuple, tuple[str, str, str]] = {}    # (ClusterQueue, shape) -> (head, rule, reason)
        self.presence = Presence(timer, self.pending_of.get)   # which pending pods kube-scheduler brings now

    def queue_key(self, pod: PodInfo) -> tuple:
        """The pod's place in its ClusterQueue (core.readiness.queue_order, requeuingStrategy included)."""
        cfg = self.config.wait_for_pods_ready
        return queue_order(pod, self._requeues.get(requeue_key(pod)) if cfg is not None else None, cfg)

    # ---- the pending index ------------------------------------------------------
    def index(self, pod: PodInfo) -> None:
        """Queue a pending pod of a known ClusterQueue; one whose WorkloadPriorityClass is missing is not
        a workload yet (Kueue creates none), so it holds no place that could block the queue; nor does one of a
        stopped LocalQueue (Kueue's LocalQueue controller takes a stopped queue out of the queueing system)."""
        if pod.node_name or pod.terminal or pod.deleting:
            return
        if pod.gated and (not pod.queue_name or pod.job or pod.owner is not None and pod.owner.is_batch_job):
            self.not_held.add(pod.uid)
        if not pod.queue_name or pod.missing_priority_class:
            return
        lq, cq = self.store.queue_of(pod)
        if cq is None or lq.stop_policy != "None":
            return
        entry = (self.queue_key(pod), pod.uid)
        bisect.insort(self.pending.setdefault(cq.name, []), entry)
        shape = walk_shape(pod)
        self.pending_of[pod.uid] = (cq.name, entry, shape)
        if pod.gated:
            self.presence.forget(pod.uid)     # brought by every ungate pass, not by kube-scheduler: always present
        self.presence.indexed(pod.uid)
        if pod.gated and pod.uid not in self.not_held:
            gated_shape = group_of(pod) or pod.shape
            bisect.insort(self.gated.setdefault(cq.name, {}).setdefault(gated_shape, []), entry)
            self.gated_of[pod.uid] = (cq.name, gated_shape, entry)

    def unindex(self, uid: str) -> None:
        self.not_held.discard(uid)
        gated = self.gated_of.pop(uid, None)
        if gated is not None:
            cq_name, shape, entry = gated
            shapes = self.gated[cq_name]
            items = shapes[shape]
            remove_entry(items, entry)
            if not items:
                del shapes[shape]
                self.gate_waiting.pop((cq_name, shape), None)
                if not shapes:
                    del self.gated[cq_name]
        found = self.pending_of.pop(uid, None)
        if found is None:
            return
        self.presence.unindexed(uid)
        remove_entry(self.pending.get(found[0], []), found[1])

    def reset(self) -> None:
        """Empty every queue (a rebuild indexes every pod again)."""
        self.pending.clear()
        self.pending_of.clear()                # (the same dict: Presence reads it)
        self.gated.clear()
        self.gated_of.clear()
        self.not_held.clear()
        self.gate_waiting.clear()
        self.presence.reset_index()

    def gate_wait(self, uid: str) -> tuple[str, str, str] | None:
        """What the gated pod's shape waits for at its ClusterQueue's last ungate pass: (head, rule, reason)."""
        found = self.gated_of.get(uid)
        return self.gate_waiting.get(found[:2]) if found is not None else None

    # ---- the queue in order -------------------------------------------------------
    def pending_pods(self, cq_name: str, before: tuple | None = None) -> Iterator[PodInfo]:
        """Pending pods of a ClusterQueue in queue order (only those ahead of `before`), reserved ones
        excluded, walking at most maxQueueScan entries so a long queue cannot slow a decision down."""
        items = self.pending.get(cq_name, ())
        end = bisect.bisect_left(items, (before,)) if before is not None else len(items)
        for _, uid in itertools.islice(items, min(end, self.config.max_queue_scan)):
            if uid not in self._reservations:
                yield self.store.pods[uid]

    def present_pending(self, cq_name: str, before: tuple | None = None,
                        skip: set | frozenset = frozenset()) -> Iterator[PodInfo]:
        """pending_pods(cq_name, before) less those away, from the present pods alone (state.presence), less those
        of a shape (core.gangs.walk_shape) in `skip`, which the caller may add to as it walks (Presence.walk)."""
        items = self.pending.get(cq_name, ())
        end = bisect.bisect_left(items, (before,)) if before is not None else len(items)
        end = min(end, self.config.max_queue_scan)
        if not end:
            return
        reservations, pods = self._reservations, self.store.pods
        for entry in self.presence.walk(cq_name, items[end - 1], skip):
            if entry[1] not in reservations:
                yield pods[entry[1]]

    # ---- what kube-scheduler does (state.presence) ------------------------------------
    def tried(self, uid: str, refused: bool) -> None:
        """kube-scheduler tried the pod (filter was asked); refused, it backs off (state.presence)."""
        self.presence.tried(uid, refused)

    def away(self, uid: str) -> bool:
        """kube-scheduler will not try the pod for a while: it backs off from a refusal, or was due more than
        OVERDUE ago and did not come (state.presence). A pending pod that is away keeps no quota from the pods
        behind it that are tried meanwhile: admitted in queue order among the pods kube-scheduler brings, as
        Kueue admits in order among the workloads it has, quota never waits idle for a pod that is not coming;
        a pod of higher priority that finds it taken preempts, as in Kueue."""
        return self.presence.away(uid)

    def expected(self, uid: str) -> bool:
        """kube-scheduler brings the pod now or once its backoff ends (state.presence): a workload that waits its
        turn under blockAdmission keeps its place meanwhile (core.next_in_line)."""
        return self.presence.expected(uid)
