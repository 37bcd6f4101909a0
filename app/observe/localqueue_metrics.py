"""Kueue's local_queue_* metrics, named quotient_local_queue_*, so a Kueue dashboard's per-namespace panels work.

Names, label names and types follow Kueue's pkg/metrics/metrics.go (LocalQueuePendingWorkloads,
LocalQueueReservingActiveWorkloads, LocalQueueAdmittedActiveWorkloads, LocalQueueQuotaReservedWorkloadsTotal,
LocalQueueAdmittedWorkloadsTotal, LocalQueueEvictedWorkloadsTotal, LocalQueueResourceReservations,
LocalQueueResourceUsage, LocalQueueByStatus), without replica_role (only the leader answers the verbs). A
workload is counted as Kueue counts it: a Job's pods or a pod group's members are one (observe.localqueues).

The gauges are read from the state when Prometheus scrapes. The three counters are fed by a journal listener
(on_decision, attached in observe.attach): a workload is counted once when a filter or bind decision about one of
its pods finds it holding quota (quota reserved) or bound (admitted), and once when Quotient's eviction of one of
its pods is written (EvictionRecord: drain, ready, reclaim); a workload evicted and admitted again counts again. A
workload that stops holding quota without an eviction (its pods finished) is forgotten at the next scrape.
"""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..act.writer import PREEMPTION_REASONS
from ..core.quantity import MILLI_RESOURCES
from .localqueue_status import active_condition
from .localqueues import local_queue_stats, workload_key

EVICTION_VERBS = frozenset({"drain", "ready", "reclaim"})      # EvictionRecord's verbs: Quotient wrote it
LQ = ["name", "namespace"]


def _amount(value: int, resource: str) -> float:
    """CPU in cores, everything else in base units (as metrics.amount)."""
    return value / 1000 if resource in MILLI_RESOURCES else float(value)


def _priority_class(pod) -> str:
    """Kueue's Workload spec.priorityClassName: the WorkloadPriorityClass, else the pod's PriorityClass."""
    return pod.workload_priority_class or pod.priority_class or ""


def eviction_labels(reason: str, deactivated: bool) -> tuple[str, str]:
    """Kueue's (reason, underlying_cause) of an eviction: every preemption is Preempted; a workload past
    waitForPodsReady's backoffLimitCount is Deactivated for RequeuingLimitExceeded."""
    if reason in PREEMPTION_REASONS:
        return "Preempted", ""
    if deactivated:
        return "Deactivated", "RequeuingLimitExceeded"
    return reason, ""


class LocalQueueMetrics:
    """A Prometheus collector (registered by observe.metrics.Metrics) and the journal listener of its counters."""

    def __init__(self, state, refusals=None):
        self.state = state
        self.refusals = refusals
        self.reserved: dict[tuple, int] = {}     # (name, namespace, priority_class) -> workloads
        self.admitted: dict[tuple, int] = {}
        self.evicted: dict[tuple, int] = {}      # (name, namespace, reason, underlying_cause, priority_class)
        self._reserving: set[str] = set()        # workloads counted as holding quota, until evicted or gone
        self._admitted: set[str] = set()
        self._gone: set[str] = set()             # workloads whose eviction was counted, until admitted again
        self._pods: dict[str, tuple[str, str, str, str]] = {}   # pod key -> (queue, namespace, workload, class)
        self._limit = 1024                       # prune the books when they grow past this

    # ---- event side: the journal listener -------------------------------------------------
    def on_decision(self, entry: dict) -> None:
        verb, outcome = entry.get("verb"), entry.get("outcome")
        if verb == "filter" or verb == "bind" and outcome == "Bound":
            pod = self.state.pod_by_key(entry.get("pod") or "")
            if pod is not None and pod.queue_name:
                self._holding(pod)
        elif verb in EVICTION_VERBS and outcome in ("Evicted", "Preempted"):
            self._evicted(entry)
        if len(self._pods) + len(self._reserving) > self._limit:
            self.prune()

    def _remember(self, pod) -> tuple[str, str, str, str]:
        known = self._pods[pod.key] = (pod.queue_name, pod.namespace, workload_key(pod), _priority_class(pod))
        return known

    def _holding(self, pod) -> None:
        """Count the pod's workload as quota reserved, and admitted, the first time it is seen so."""
        state = self.state
        if pod.uid not in state.reservations and pod.uid not in state.admitted:
            return              # a refusal: nothing to count, nothing to remember
        queue, namespace, key, pc = self._remember(pod)
        labels = (queue, namespace, pc)
        if key not in self._reserving:
            self._reserving.add(key)
            self._gone.discard(key)
            self.reserved[labels] = self.reserved.get(labels, 0) + 1
        if pod.uid in state.admitted and key not in self._admitted:
            self._admitted.add(key)
            self._gone.discard(key)
            self.admitted[labels] = self.admitted.get(labels, 0) + 1

    def _evicted(self, entry: dict) -> None:
        """An eviction Quotient wrote: counted once per workload (a Job's pods are evicted together)."""
        pod = self.state.pod_by_key(entry.get("pod") or "")
        known = self._remember(pod) if pod is not None and pod.queue_name else self._pods.get(entry.get("pod") or "")
        if known is None:
            return
        queue, namespace, key, pc = known
        self._reserving.discard(key)
        self._admitted.discard(key)
        if key in self._gone:
            return
        self._gone.add(key)
        reasons = entry.get("reasons") or [""]
        reason, cause = eviction_labels(str(reasons[0]), bool(entry.get("deactivated")))
        labels = (queue, namespace, reason, cause, pc)
        self.evicted[labels] = self.evicted.get(labels, 0) + 1

    def prune(self, holding: set[str] | None = None) -> None:
        """Forget the workloads that hold no quota any more (their pods finished), and pods that are gone."""
        state = self.state
        if holding is None:
            holding = {workload_key(p) for uid in (*state.admitted, *state.reservations)
                       if (p := state.pods.get(uid)) is not None}
        self._reserving &= holding
        self._admitted &= holding
        self._pods = {k: v for k, v in self._pods.items() if state.pod_by_key(k) is not None}
        alive = {v[2] for v in self._pods.values()} | {workload_key(p) for p in state.pods.values()}
        self._gone &= alive
        self._limit = max(1024, 2 * (len(self._pods) + len(self._reserving)))

    # ---- scrape side ---------------------------------------------------------------------------
    def describe(self):
        return []

    def collect(self):
        state = self.state
        stats = local_queue_stats(state)
        self.prune({k for s in stats.values() for k in s.reserving})
        for uid in state.admitted:       # so an eviction the watch reports before its write's answer is still known
            pod = state.pods.get(uid)
            if pod is not None and pod.queue_name and pod.key not in self._pods:
                self._remember(pod)
        pending = GaugeMetricFamily(
            "quotient_local_queue_pending_workloads",
            "Pending workloads per LocalQueue and status (as kueue_local_queue_pending_workloads): active, not "
            "refused since it was last tried; inadmissible, refused and waiting for the cluster to change. A Job or "
            "a pod group is one workload.", labels=[*LQ, "status"])
        reserving = GaugeMetricFamily(
            "quotient_local_queue_reserving_active_workloads",
            "Workloads holding quota per LocalQueue, admitted ones included (as "
            "kueue_local_queue_reserving_active_workloads).", labels=LQ)
        admitted = GaugeMetricFamily(
            "quotient_local_queue_admitted_active_workloads",
            "Admitted workloads per LocalQueue, running (as kueue_local_queue_admitted_active_workloads).", labels=LQ)
        status = GaugeMetricFamily(
            "quotient_local_queue_status",
            "1 for the LocalQueue's Active condition status, True or False (as kueue_local_queue_status; Unknown is "
            "never reported).", labels=[*LQ, "active"])
        fr = [*LQ, "flavor", "resource"]
        reservation = GaugeMetricFamily(
            "quotient_local_queue_resource_reservation",
            "Quota held per LocalQueue, flavor and resource: bound pods plus reservations (CPU in cores, memory in "
            "bytes; as kueue_local_queue_resource_reservation).", labels=fr)
        usage = GaugeMetricFamily(
            "quotient_local_queue_resource_usage",
            "Quota used by bound pods per LocalQueue, flavor and resource (as kueue_local_queue_resource_usage).",
            labels=fr)
        refused = self.refusals or {}
        for key in sorted(state.local_queues):
            lq, s = state.local_queues[key], stats[key]
            names = [lq.name, lq.namespace]
            waiting = sum(1 for uids in s.pending_pods.values()
                          if any(refused.get(u) is not None and refused[u].cleared_at is None for u in uids))
            live = len(s.pending) if lq.stop_policy == "None" else 0
            pending.add_metric([*names, "active"], live - min(waiting, live))
            pending.add_metric([*names, "inadmissible"], min(waiting, live))
            reserving.add_metric(names, len(s.reserving))
            admitted.add_metric(names, len(s.admitted))
            condition = active_condition(state, lq)[0]
            for value in ("True", "False", "Unknown"):
                status.add_metric([*names, value], 1 if value == condition else 0)
            cq = state.cluster_queues.get(lq.cluster_queue)
            for group in cq.resource_groups if cq is not None else ():
                for f in group.flavors:
                    for r in sorted(group.covered):
                        reservation.add_metric([*names, f.name, r], _amount(s.reserved.get((f.name, r), 0), r))
                        usage.add_metric([*names, f.name, r], _amount(s.used.get((f.name, r), 0), r))
        yield from (pending, reserving, admitted, status, reservation, usage)
        yield _counter("quotient_local_queue_quota_reserved_workloads",
                       "Workloads that got a quota reservation, per LocalQueue (as "
                       "kueue_local_queue_quota_reserved_workloads_total).", [*LQ, "priority_class"], self.reserved)
        yield _counter("quotient_local_queue_admitted_workloads",
                       "Workloads admitted, per LocalQueue (as kueue_local_queue_admitted_workloads_total).",
                       [*LQ, "priority_class"], self.admitted)
        yield _counter("quotient_local_queue_evicted_workloads",
                       "Workloads Quotient evicted, per LocalQueue (as kueue_local_queue_evicted_workloads_total): "
                       "reason "
                       "Preempted, PodsReadyTimeout, ClusterQueueStopped, LocalQueueStopped or Deactivated "
                       "(underlying_cause RequeuingLimitExceeded).",
                       [*LQ, "reason", "underlying_cause", "priority_class"], self.evicted)


def _counter(name: str, text: str, labels: list[str], counts: dict) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text, labels=labels)
    for key, n in sorted(counts.items()):
        family.add_metric(list(key), n)
    return family
