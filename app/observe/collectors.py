"""What /metrics reads at scrape time: the journal's decision counts, the refusal book, the ClusterState.

Nothing is updated on the verb path for these: the verbs count into plain dicts (observe.metrics.Metrics) and these
collectors turn them, and the state, into metric families when Prometheus scrapes. Names, labels and help texts are
Kueue's (pkg/metrics/metrics.go) with the quotient_ prefix.
"""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ..core.dominant_share import dominant_resource_share
from ..core.rules import ADMITTED, ALREADY_ADMITTED, BOUND, EVICTED, PREEMPTED, PREEMPTING, WRITE_FAILED
from ..refusals import WAITED_BUCKETS
from .kueue_shapes import amount
from .views import queue_status, reserved_usage
from .workload_counts import counts as workload_counts

# The journal's outcome (the deciding rule) -> the coarse outcome label; anything else refused.
OUTCOMES = {ADMITTED: "admitted", ALREADY_ADMITTED: "admitted", BOUND: "bound", WRITE_FAILED: "failed",
            EVICTED: "evicted", PREEMPTING: "preempting", PREEMPTED: "preempted"}


class DecisionCollector:
    """Exports the decision and preemption counts the journal listener keeps in plain dicts."""

    def __init__(self, metrics):
        self.metrics = metrics   # observe.metrics.Metrics: its decision_counts and preemption_counts

    def describe(self):
        return []

    def collect(self):
        decisions = CounterMetricFamily(
            "quotient_decisions",
            "Decisions recorded in the journal: outcome is admitted/refused/bound/failed/evicted/preempting/preempted, "
            "reason the rule that decided (Admitted, QuotaExceeded, StrictFIFO, NominalQuotaFirst, Bound, ...).",
            labels=["verb", "outcome", "reason", "cluster_queue"])
        for (verb, rule, queue), n in sorted(self.metrics.decision_counts.items()):
            decisions.add_metric([verb, OUTCOMES.get(rule, "refused"), rule, queue], n)
        preempted = CounterMetricFamily(
            "quotient_preempted_workloads",
            "Pods Quotient evicted to make room for a preemptor (as Kueue's kueue_preempted_workloads_total), by the "
            "preemptor's ClusterQueue and reason (InClusterQueue, InCohortReclamation, InCohortFairSharing, "
            "InCohortReclaimWhileBorrowing, LowerPriorityOnNode; Other for anything else).",
            labels=["preempting_cluster_queue", "reason"])
        for (queue, reason), n in sorted(self.metrics.preemption_counts.items()):
            preempted.add_metric([queue, reason], n)
        yield decisions
        yield preempted


class RefusalCollector:
    """The refusal book's counts (app/refusals.py), read at scrape time."""

    def __init__(self, refusals):
        self.refusals = refusals

    def describe(self):
        return []

    def collect(self):
        r = self.refusals
        yield _by_cause(
            "quotient_refusal_retries", r.retries,
            "Filter refusals answered as a retry (the extender Error field: kube-scheduler tries the pod again "
            "after its backoff of 1 to 10 s instead of parking it for up to 5 minutes), by cause "
            "(PodsReadyBackoff, BlockAdmission, PreemptionDelay, VictimsLeaving, RoomHeld, GroupIncomplete, "
            "QueueHead, JobNotSeen).")
        yield _by_cause(
            "quotient_refusals_cleared", r.cleared,
            "Refusals that stopped holding in Quotient's own state, by cause (PodsReadyGateCleared, "
            "PreemptionDelayOver, VictimsGone, HoldExpired, HoldReleased, GroupComplete, QuotaFreed, QueueChanged, "
            "WorkloadPriorityClassCreated, JobSeen, JobWaitOver).")
        buckets = [(repr(bound), n) for bound, n in zip(WAITED_BUCKETS, r.waited_in)] + [("+Inf", r.waited[0])]
        yield HistogramMetricFamily(
            "quotient_refusal_cleared_to_retry_seconds",
            "From a refusal clearing to kube-scheduler's next try of the pod: about its backoff for a pod answered "
            "as a retry; up to 5 minutes for a parked pod no event moved.",
            buckets=buckets, sum_value=r.waited[1])


def _by_cause(name: str, counts, text: str) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text, labels=["cause"])
    for cause, n in sorted(counts.items()):
        family.add_metric([cause], n)
    return family


class StateCollector:
    """Reads the ClusterState when Prometheus scrapes: nothing is updated on the verb path for these."""

    def __init__(self, state, refusals=None):
        self.state, self.refusals = state, refusals

    def describe(self):
        return []     # families depend on the state; nothing to check at registration

    def collect(self):
        state = self.state
        q = ["cluster_queue"]
        pending = GaugeMetricFamily("quotient_pending_workloads",
                                    "Pending workloads of the ClusterQueue that hold no quota, a Job or pod group "
                                    "once (as kueue_pending_workloads), by status: active (to be tried) or "
                                    "inadmissible (refused, waiting for a change in the cluster).",
                                    labels=["cluster_queue", "status"])
        reserving = GaugeMetricFamily("quotient_reserving_active_workloads",
                                      "Workloads that passed filter and hold a quota reservation, none of their pods "
                                      "bound yet (kueue_reserving_active_workloads also counts admitted ones: the "
                                      "recording rule adds them).", labels=q)
        admitted = GaugeMetricFamily("quotient_admitted_active_workloads",
                                     "Workloads with pods running charged to the ClusterQueue, a Job or pod group "
                                     "once (as kueue_admitted_active_workloads).", labels=q)
        share = GaugeMetricFamily("quotient_cluster_queue_weighted_share",
                                  "Fair sharing's weighted share of the ClusterQueue (as kueue_cluster_queue_weighted_share): "
                                  "the largest borrowed/lendable over its resources, per mille, divided by its weight.",
                                  labels=q)
        cohort_share = GaugeMetricFamily("quotient_cohort_weighted_share",
                                         "Fair sharing's weighted share of the Cohort (as kueue_cohort_weighted_share).",
                                         labels=["cohort"])
        status = GaugeMetricFamily("quotient_cluster_queue_status",
                                   "1 for the ClusterQueue's status: active, inactive (a flavor missing, a cohort cycle), "
                                   "stopped (stopPolicy Hold or HoldAndDrain) or overQuota (as kueue_cluster_queue_status, "
                                   "whose pending is inactive or stopped).", labels=["cluster_queue", "status"])
        fr_labels = ["cohort", "cluster_queue", "flavor", "resource"]
        nominal = GaugeMetricFamily("quotient_cluster_queue_nominal_quota",
                                    "nominalQuota per flavor and resource, CPU in cores, memory in bytes "
                                    "(as kueue_cluster_queue_nominal_quota).", labels=fr_labels)
        borrowing = GaugeMetricFamily("quotient_cluster_queue_borrowing_limit",
                                      "borrowingLimit per flavor and resource, where one is set "
                                      "(as kueue_cluster_queue_borrowing_limit).", labels=fr_labels)
        lending = GaugeMetricFamily("quotient_cluster_queue_lending_limit",
                                    "lendingLimit per flavor and resource, where one is set "
                                    "(as kueue_cluster_queue_lending_limit).", labels=fr_labels)
        reservation = GaugeMetricFamily("quotient_cluster_queue_resource_reservation",
                                        "Quota held per flavor and resource: running pods plus reservations "
                                        "(as kueue_cluster_queue_resource_reservation).", labels=fr_labels)
        usage = GaugeMetricFamily("quotient_cluster_queue_resource_usage",
                                  "Quota used by running pods per flavor and resource "
                                  "(as kueue_cluster_queue_resource_usage).", labels=fr_labels)
        counts = workload_counts(state, self.refusals)
        reserved = reserved_usage(state)
        for name in sorted(state.cluster_queues):
            cq = state.cluster_queues[name]
            w = counts[name]
            pending.add_metric([name, "active"], w.active)
            pending.add_metric([name, "inadmissible"], w.inadmissible)
            reserving.add_metric([name], w.reserving)
            admitted.add_metric([name], w.admitted)
            node = state.tree.queues.get(name)
            kind = queue_status(state, name)[0]
            for s in ("active", "inactive", "stopped", "overQuota"):
                status.add_metric([name, s], 1 if s == kind else 0)
            if node is None:
                continue
            share.add_metric([name], dominant_resource_share(node, cq.fair_weight)[0])
            held = reserved.get(name, {})
            for fr, limits in node.quotas.items():
                labels = [cq.cohort, name, fr[0], fr[1]]
                nominal.add_metric(labels, amount(limits.nominal, fr[1]))
                if limits.borrowing_limit is not None:
                    borrowing.add_metric(labels, amount(limits.borrowing_limit, fr[1]))
                if limits.lending_limit is not None:
                    lending.add_metric(labels, amount(limits.lending_limit, fr[1]))
                used = node.bound.get(fr, 0)        # pods on nodes, victims still terminating included
                reservation.add_metric(labels, amount(used + held.get(fr, 0), fr[1]))
                usage.add_metric(labels, amount(used, fr[1]))
        for name in sorted(state.tree.cohorts):
            spec = state.cohorts.get(name)
            cohort_share.add_metric([name], dominant_resource_share(state.tree.cohorts[name],
                                                                    spec.fair_weight if spec else 1.0)[0])
        expired = CounterMetricFamily("quotient_reservation_expiries",
                                      "Reservations dropped because no bind came within reservationTimeout.")
        expired.add_metric([], state.skips.get("reservation expired", 0))
        forgotten = CounterMetricFamily("quotient_learned_pods_forgotten",
                                        "Pods known only from kube-scheduler's requests, forgotten after "
                                        "learnedPodTimeout without one.")
        forgotten.add_metric([], state.skips.get("learned pod forgotten", 0))
        waited = CounterMetricFamily("quotient_job_waits",
                                     "batch/v1 Jobs waited for: a pod whose Job the API's Job list did not have was "
                                     "seen (the Job and Pod watches are not ordered), and the Job's pods waited up to "
                                     "jobWaitTimeout for it (JobNotSeen); once per Job.")
        waited.add_metric([], state.job_workloads.job_wait_counts.get("waited", 0))
        never = CounterMetricFamily("quotient_job_waits_expired",
                                    "Jobs waited for that did not come within jobWaitTimeout: missing, not late (deleted "
                                    "with --cascade=orphan, or an owner reference another tool wrote); their pods were "
                                    "judged as plain pods of their LocalQueue.")
        never.add_metric([], state.job_workloads.job_wait_counts.get("expired", 0))
        refused = CounterMetricFamily("quotient_quota_invariant_refusals",
                                      "Bindings refused because their charge would have taken the ClusterQueue or a "
                                      "Cohort above its quota (victims still running, or a race); each one a pod "
                                      "that waits instead of an over-admission.", labels=q)
        for name, n in sorted(state.ledger.quota_refusals.items()):
            refused.add_metric([name], n)
        overruns = CounterMetricFamily("quotient_quota_overruns",
                                       "Changes of bound pods the API took (queue label moved, resized in place, bound "
                                       "by another) that put their ClusterQueue or its Cohort above quota; the queue "
                                       "admits nothing until it is back within.", labels=q)
        for name, n in sorted(state.ledger.overrun_counts.items()):
            overruns.add_metric([name], n)
        yield from (pending, reserving, admitted, share, cohort_share, status, nominal, borrowing, lending,
                    reservation, usage, expired, forgotten, waited, never, refused, overruns)


class GateCollector:
    """Kueue's admission gates (scheduler.ungate), read at scrape time: the pods waiting behind the gate per
    ClusterQueue, and the gate removals written and failed (gates: the scheduler's Gates, read as plain counts)."""

    def __init__(self, state, gates):
        self.state, self.gates = state, gates

    def describe(self):
        return []

    def collect(self):
        waiting = GaugeMetricFamily("quotient_gated_pods",
                                    "Pods of the ClusterQueue that carry Kueue's admission gate "
                                    "kueue.x-k8s.io/admission: kube-scheduler leaves them alone until Quotient "
                                    "admits them and removes it.", labels=["cluster_queue"])
        for cq, shapes in sorted(self.state.queues.gated.items()):
            waiting.add_metric([cq], sum(len(entries) for entries in shapes.values()))
        removed = CounterMetricFamily("quotient_admission_gates_removed",
                                      "Admission gates Quotient removed (the pod admitted, or not Quotient's to hold).")
        removed.add_metric([], self.gates.ungated)
        failed = CounterMetricFamily("quotient_admission_gate_removal_failures",
                                     "Admission gate removals the API refused or that failed; the pod's reservation "
                                     "ends and a later pass decides it again.")
        failed.add_metric([], self.gates.failed)
        yield waiting
        yield removed
        yield failed
