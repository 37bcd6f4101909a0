"""Kueue's local_queue_* metrics, named quotient_local_queue_*, so a Kueue dashboard's per-namespace panels work.

Names, label names and types follow Kueue's pkg/metrics/metrics.go (LocalQueuePendingWorkloads,
LocalQueueReservingActiveWorkloads, LocalQueueAdmittedActiveWorkloads, LocalQueueQuotaReservedWorkloadsTotal,
LocalQueueAdmittedWorkloadsTotal, LocalQueueEvictedWorkloadsTotal, LocalQueueResourceReservations,
LocalQueueResourceUsage, LocalQueueByStatus), without replica_role (only the leader answers the verbs). A
workload is counted as Kueue counts it: a Job's pods or a pod group's members are one (observe.localqueues).

The gauges are read from the state when Prometheus scrapes. The counters and the two wait-time histograms are fed
by Metrics' workload events (on_workload, one of Metrics.workload_listeners): the same once-per-workload episodes
(observe.workload_counts.Episodes) as the ClusterQueue's counters, so the two never disagree; a workload evicted and
admitted again counts again.
"""
from __future__ import annotations

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from .localqueue_status import active_condition
from .localqueues import local_queue_stats
from .kueue_shapes import amount, kueue_buckets
from .workload_counts import priority_class

LQ = ["name", "namespace"]


class LocalQueueMetrics:
    """A Prometheus collector of the per-LocalQueue gauges (registered by observe.metrics.Metrics), and the
    per-LocalQueue counters and histograms that Metrics' workload events feed (on_workload)."""

    def __init__(self, state, refusals, registry):
        self.state = state
        self.refusals = refusals
        by_class = [*LQ, "priority_class"]
        self.reserved = Counter(
            "quotient_local_queue_quota_reserved_workloads",
            "Workloads that got a quota reservation, per LocalQueue (as "
            "kueue_local_queue_quota_reserved_workloads_total).", by_class, registry=registry)
        self.admitted = Counter(
            "quotient_local_queue_admitted_workloads",
            "Workloads admitted, per LocalQueue (as kueue_local_queue_admitted_workloads_total).",
            by_class, registry=registry)
        self.evicted = Counter(
            "quotient_local_queue_evicted_workloads",
            "Workloads Quotient evicted, per LocalQueue (as kueue_local_queue_evicted_workloads_total): reason "
            "Preempted, PodsReadyTimeout, ClusterQueueStopped, LocalQueueStopped or Deactivated (underlying_cause "
            "RequeuingLimitExceeded).", [*LQ, "reason", "underlying_cause", "priority_class"], registry=registry)
        self.reserved_wait = Histogram(
            "quotient_local_queue_quota_reserved_wait_time_seconds",
            "From a workload's creation to its quota reservation, per LocalQueue (as "
            "kueue_local_queue_quota_reserved_wait_time_seconds).", by_class, buckets=kueue_buckets(14),
            registry=registry)
        self.admission_wait = Histogram(
            "quotient_local_queue_admission_wait_time_seconds",
            "From a workload's creation to its admission, per LocalQueue (as "
            "kueue_local_queue_admission_wait_time_seconds).", by_class, buckets=kueue_buckets(16),
            registry=registry)

    # ---- event side: Metrics' workload events --------------------------------------------------
    def on_workload(self, event: str, pod, cluster_queue: str, detail) -> None:
        """One workload (its pod names the LocalQueue) reserved quota or was admitted (detail: its wait in seconds),
        or was evicted (detail: Kueue's (reason, underlying_cause))."""
        if not pod.queue_name:
            return
        labels = (pod.queue_name, pod.namespace, priority_class(pod))
        if event == "quota_reserved":
            self.reserved.labels(*labels).inc()
            self.reserved_wait.labels(*labels).observe(detail)
        elif event == "admitted":
            self.admitted.labels(*labels).inc()
            self.admission_wait.labels(*labels).observe(detail)
        elif event == "evicted":
            self.evicted.labels(*labels[:2], *detail, labels[2]).inc()

    # ---- scrape side ---------------------------------------------------------------------------
    def describe(self):
        return []

    def collect(self):
        state = self.state
        stats = local_queue_stats(state)
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
        for key in sorted(state.local_queues):
            lq, s = state.local_queues[key], stats[key]
            names = [lq.name, lq.namespace]
            waiting = sum(1 for uids in s.pending_pods.values()
                          if self.refusals is not None and any(map(self.refusals.holds, uids)))
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
                        reservation.add_metric([*names, f.name, r], amount(s.reserved.get((f.name, r), 0), r))
                        usage.add_metric([*names, f.name, r], amount(s.used.get((f.name, r), 0), r))
        yield from (pending, reserving, admitted, status, reservation, usage)
