"""Prometheus metrics: counted on events (verb latency, decisions, preemptions, evictions, watch), read from the state at scrape time (queues, quota, shares, expiries).

Names, label names and types follow Kueue's pkg/metrics/metrics.go (kueue_pending_workloads ->
quotient_pending_workloads, ...; histograms with Kueue's buckets), and a workload is counted as Kueue counts
it: a Job's pods or a pod group's members are one (observe.workloads). deploy/components/prometheus ships the
recording rules that name them kueue_* for Kueue's dashboards and alerts. Each Metrics has its own registry,
so several applications in one process (tests) never collide. Label values are bounded: a rule name, a
ClusterQueue, a flavor or resource, a priority class, never a reason's free text.
"""
from __future__ import annotations

import platform
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from ..act.writer import PREEMPTION_REASONS
from ..core.fairsharing import dominant_resource_share
from ..refusals import WAITED_BUCKETS
from ..version import build_info
from .kueue_shapes import amount, eviction_labels, kueue_buckets
from .localqueue_metrics import LocalQueueMetrics
from .views import queue_status, reserved_usage
from .workloads import Episodes, counts as workload_counts, priority_class, workload_key

disable_created_metrics()      # no *_created series: one sample per counter, as Kueue exports them
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
VERB_BUCKETS = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
PREEMPT_VERBS = frozenset({"preempt", "reclaim"})
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)   # client_golang's DefBuckets
# A filter decision on a pod (the journal's outcome) as Kueue's admission attempt result: a workload admitted is a
# success; a pod of a workload admitted before (its node held, a Job's slot) is no attempt; any refusal is one.
ATTEMPT_SUCCESS = frozenset({"Admitted", "GroupAdmitted"})
NO_ATTEMPT = frozenset({"AlreadyAdmitted", "GroupReserved", "JobSlot"})


# The journal's outcome (the deciding rule) -> the coarse outcome label; anything else refused.
OUTCOMES = {"Admitted": "admitted", "AlreadyAdmitted": "admitted", "Bound": "bound", "WriteFailed": "failed",
            "Evicted": "evicted", "Preempting": "preempting", "Preempted": "preempted"}


class Metrics:
    def __init__(self, state, refusals=None):
        self.state = state
        self.registry = registry = CollectorRegistry()
        self.request_duration = Histogram(
            "quotient_extender_request_duration_seconds",
            "Time to answer one extender request, from its arrival to the last byte of the answer, per verb.",
            ["verb"], buckets=VERB_BUCKETS, registry=registry)
        self.evicted = Counter(
            "quotient_evicted_workloads_total",
            "Workloads Quotient evicted, a Job or pod group once (as Kueue's kueue_evicted_workloads_total), by "
            "ClusterQueue, reason (Preempted, PodsReadyTimeout, ClusterQueueStopped), underlying_cause (\"\") and "
            "priority class.",
            ["cluster_queue", "reason", "underlying_cause", "priority_class"], registry=registry)
        wl = ["cluster_queue", "priority_class"]
        self.quota_reserved = Counter(
            "quotient_quota_reserved_workloads_total",
            "Workloads that got a quota reservation (passed filter), a Job or pod group once (as Kueue's "
            "kueue_quota_reserved_workloads_total).", wl, registry=registry)
        self.quota_reserved_wait = Histogram(
            "quotient_quota_reserved_wait_time_seconds",
            "From a workload's creation (its oldest pod's; a requeued workload's pods are made anew) to its quota "
            "reservation (as Kueue's kueue_quota_reserved_wait_time_seconds).",
            wl, buckets=kueue_buckets(14), registry=registry)
        self.admitted = Counter(
            "quotient_admitted_workloads_total",
            "Workloads admitted: the first of their pods bound and charged, a Job or pod group once (as Kueue's "
            "kueue_admitted_workloads_total).", wl, registry=registry)
        self.admission_wait = Histogram(
            "quotient_admission_wait_time_seconds",
            "From a workload's creation (its oldest pod's; a requeued workload's pods are made anew) to its "
            "admission, the first of its pods bound (as Kueue's kueue_admission_wait_time_seconds).",
            wl, buckets=kueue_buckets(16), registry=registry)
        self.attempts = Counter(
            "quotient_admission_attempts_total",
            "Filter decisions for a workload not admitted yet (as Kueue's kueue_admission_attempts_total): "
            "result success (admitted) or inadmissible (refused).", ["result"], registry=registry)
        self.attempt_duration = Histogram(
            "quotient_admission_attempt_duration_seconds",
            "Time to answer such a filter request (as Kueue's kueue_admission_attempt_duration_seconds), by result.",
            ["result"], buckets=GO_DEFAULT_BUCKETS, registry=registry)
        self._reserved, self._admitted, self._evicted, self._preempted = Episodes(), Episodes(), Episodes(), Episodes()
        self._attempts: deque[str] = deque(maxlen=64)    # filter decisions journaled, until their request ends
        # f(event, pod, cluster_queue, detail), once per workload: "quota_reserved" and "admitted" with the wait in
        # seconds, "evicted" with Kueue's (reason, underlying_cause). Per-LocalQueue metrics hook here (the pod
        # names its LocalQueue).
        self.workload_listeners: list = []
        self.eviction_failures = Counter(
            "quotient_eviction_failures_total",
            "Evictions the API server refused or that failed to be written; they are tried again.",
            ["cluster_queue", "reason"], registry=registry)
        self.watch_restarts = Counter(
            "quotient_watch_restarts_total",
            "Watches of the API server restarted after an error or a timeout (fed by the live watch source).",
            ["kind"], registry=registry)
        self.watch_relists = Counter(
            "quotient_watch_relists_total",
            "Full relists after a watch could not resume, by kind and reason (expired: 410 Gone; http 504: too "
            "large resource version, as after a restore from a backup; any error the server reported; fed by the "
            "live watch source). /readyz is 503 until the relist is applied.",
            ["kind", "reason"], registry=registry)
        self.watch_errors = Counter(
            "quotient_watch_errors_total",
            "Problems the live watch source met and survived, by kind and cause (invalid object, undecodable "
            "event, connection dropped, watch idle, timeout, http 500, expired, ...).",
            ["kind", "cause"], registry=registry)
        self.forbidden = Counter(
            "quotient_forbidden_requests_total",
            "Requests refused 403 on the main port (app/api/identity.py), by the caller's role (anonymous: no client "
            "certificate; unmapped: a certificate no clientIdentities entry matches) and route (its template).",
            ["role", "route"], registry=registry)
        self.client_certificate_expiry = Gauge(
            "quotient_tls_client_certificate_expiry_timestamp_seconds",
            "When the client certificate a role's caller last presented expires (Unix time), by its roles: "
            "kube-scheduler reads its certificate once at start, so a renewed Secret shows here only after it restarts.",
            ["role"], registry=registry)
        self.leader_label_failures = Counter(
            "quotient_leader_label_failures_total",
            "Writes of this replica's pod label quotient.dev/leader that failed (they are tried again while the "
            "label is wrong; Service quotient selects the labelled pod). Forbidden: RBAC lacks pods patch.",
            registry=registry)
        build = build_info()
        Gauge("quotient_build_info", "1, labelled as Kueue's kueue_build_info: git_version is Quotient's version, "
              "python_version stands for go_version, compiler the Python implementation; git_commit and build_date "
              "\"unknown\" unless the build sets them.",
              ["git_version", "git_commit", "build_date", "python_version", "compiler", "platform"],
              registry=registry).labels(build["version"], build.get("commit", "unknown"), build.get("date", "unknown"),
                                        build["python"], platform.python_implementation(), build["platform"]).set(1)
        self.decision_counts: dict[tuple[str, str, str], int] = {}      # (verb, rule, ClusterQueue) -> count
        self.preemption_counts: dict[tuple[str, str], int] = {}         # (preemptor's ClusterQueue, reason) -> count
        registry.register(DecisionCollector(self))
        registry.register(StateCollector(state, refusals))
        if refusals is not None:
            registry.register(RefusalCollector(refusals))
        self.local_queues = LocalQueueMetrics(state, refusals, registry)     # quotient_local_queue_*
        registry.register(self.local_queues)
        self.workload_listeners.append(self.local_queues.on_workload)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self._timers: dict[str, object] = {}
        self._loops = None              # app.api.app.Loops, once an application runs the background loops

    # ---- event side: cheap, on the verb path ------------------------------------
    def timer(self, verb: str):
        """The histogram child for one verb: its .observe(seconds) is all the verb path pays (filter's also
        times the admission attempt its request made, if any)."""
        child = self._timers.get(verb)
        if child is None:
            child = self._timers[verb] = self.request_duration.labels(verb)
            if verb == "filter":
                child = self._timers[verb] = FilterTimer(child, self)
        return child

    # ---- workloads, as Kueue counts them: a Job or a pod group once ------------------------
    def quota_reserved_pod(self, pod, charge) -> None:
        """ClusterState.workloads.on_reserved: a pod's reservation taken. Counted once per workload: not for a pod of a
        workload that already holds quota (a group's other members, a Job's pod taking a slot of its admitted
        workload), nor for the same pod reserved again."""
        state = self.state
        job = state.job_admissions.get(pod.owner.uid) if pod.job and pod.owner is not None else None
        if job is not None or not self._reserved.first(state, pod):
            return
        self.workload_event("quota_reserved", pod, charge)

    def admitted_pod(self, pod, charge) -> None:
        """ClusterState.ledger.on_admitted: a pod Quotient binds is charged. The workload is admitted with the first of
        its pods (for a Job, the first since it was admitted)."""
        state = self.state
        job = state.job_admissions.get(pod.owner.uid) if pod.job and pod.owner is not None else None
        if (job is not None and job.started) or not self._admitted.first(state, pod):
            return
        self.workload_event("admitted", pod, charge)

    def workload_event(self, event: str, pod, charge) -> None:
        """One workload reserved quota ("quota_reserved") or was admitted ("admitted") in charge's ClusterQueue:
        its counter and wait-time histogram, then workload_listeners (per-LocalQueue metrics may add theirs)."""
        wait = self.waited(pod)
        labels = (charge.cluster_queue, priority_class(pod))
        if event == "quota_reserved":
            self.quota_reserved.labels(*labels).inc()
            self.quota_reserved_wait.labels(*labels).observe(wait)
        else:
            self.admitted.labels(*labels).inc()
            self.admission_wait.labels(*labels).observe(wait)
        self._tell(event, pod, charge.cluster_queue, wait)

    def _tell(self, event: str, pod, cluster_queue: str, detail) -> None:
        for listener in self.workload_listeners:
            listener(event, pod, cluster_queue, detail)

    def waited(self, pod) -> float:
        """Seconds since the workload was queued, as Kueue's QueuedWaitTime: its creation, here its oldest live
        pod's (pods a workload requeued after an eviction gets are made anew, at its requeue)."""
        state = self.state
        created = [p.created for p in map(state.pods.get, state.store.groups.get(workload_key(pod), ()))
                   if p is not None and p.created is not None]
        if pod.created is not None:
            created.append(pod.created)
        return max(0.0, state.clock() - min(created)) if created else 0.0

    def on_decision(self, entry: dict) -> None:
        """Journal listener, on the verb path: one dict increment (exported at scrape time); a
        preemption counts each of its victims."""
        verb, rule = entry["verb"], entry["outcome"]
        key = (verb, rule, entry.get("queue") or "")
        counts = self.decision_counts
        counts[key] = counts.get(key, 0) + 1
        if rule == "Preempted" and verb in PREEMPT_VERBS:
            self._count_preemption(entry)
        elif verb == "filter" and rule not in NO_ATTEMPT:
            self._attempts.append("success" if rule in ATTEMPT_SUCCESS else "inadmissible")

    def attempt_done(self, seconds: float) -> None:
        """A filter request ended: the admission attempt it journaled, if any, is counted with its duration."""
        if self._attempts:
            result = self._attempts.popleft()
            self.attempts.labels(result).inc()
            self.attempt_duration.labels(result).observe(seconds)

    def _count_preemption(self, entry: dict) -> None:
        """A victim evicted (reclaim Preempted, about the victim): counted under its preemptor's ClusterQueue,
        once per workload (a Job's or a pod group's other members evicted with it are not counted again)."""
        victim = self.state.store.pod_by_key(entry.get("pod") or "")
        if victim is not None and not self._preempted.first(self.state, victim):
            return
        queue = self._preemptor_queue(entry.get("preemptor"))
        counts = self.preemption_counts
        for reason in entry.get("reasons") or ():         # one reason per victim
            key = (queue, _preemption_reason(reason))
            counts[key] = counts.get(key, 0) + 1

    def _preemptor_queue(self, uid: object) -> str:
        state = self.state
        pod = state.pods.get(uid) if isinstance(uid, str) else None
        if pod is not None:
            _, cq = state.store.queue_of(pod)
            if cq is not None:
                return cq.name
        held = state.reservations.get(uid) if isinstance(uid, str) else None
        return held.charge.cluster_queue if held is not None else ""

    def evicted_pod(self, pod, cluster_queue: str, reason: str) -> None:
        """An eviction written: counted once per workload, with Kueue's eviction reason (a preemption's reason,
        InClusterQueue and the like, is Kueue's Preempted; preempted_workloads_total has it)."""
        if pod is not None and not self._evicted.first(self.state, pod):
            return
        labels = eviction_labels(reason)
        self.evicted.labels(cluster_queue, *labels, priority_class(pod) if pod is not None else "").inc()
        if pod is not None:
            self._tell("evicted", pod, cluster_queue, labels)

    def eviction_failed(self, cluster_queue: str, reason: str) -> None:
        self.eviction_failures.labels(cluster_queue, reason).inc()

    def watch_restarted(self, kind: str) -> None:
        """For the live watch source: a watch of `kind` was restarted."""
        self.watch_restarts.labels(kind).inc()

    def watch_loops(self, loops) -> None:
        """Export how long ago each background loop (reconcile, refusals) finished a round (the last
        application built on this state is the one watched)."""
        first = self._loops is None
        self._loops = loops
        if first:
            gauge = Gauge("quotient_loop_seconds_since_round",
                          "Seconds since a background loop (reconcile, refusals) last finished a round; /livez fails "
                          "when one is stuck for several intervals.", ["loop"], registry=self.registry)
            for what in ("reconcile", "refusals"):
                gauge.labels(what).set_function(lambda what=what: self._loops.age(what))

    def relisted(self, kind: str, reason: str = "expired") -> None:
        """For the live watch source: `kind` was listed again from scratch, because of `reason` (a bounded cause)."""
        self.watch_relists.labels(kind, reason).inc()

    def watch_error(self, kind: str, cause: str) -> None:
        """For the live watch source: a bounded cause (never an object's name) met while listing or watching."""
        self.watch_errors.labels(kind, cause).inc()

    # ---- scrape side ------------------------------------------------------------
    def render(self) -> bytes:
        return generate_latest(self.registry)


def _preemption_reason(reason: object) -> str:
    """Kueue's preemption reason named in `reason` (its first word), else Other: labels stay bounded."""
    text = str(reason or "")
    word = text.split(":", 1)[0].split()[0] if text.strip() else ""
    return word if word in PREEMPTION_REASONS else "Other"


class FilterTimer:
    """filter's request-duration histogram child, that also ends the admission attempt the request made."""

    __slots__ = ("child", "metrics")

    def __init__(self, child, metrics: Metrics):
        self.child, self.metrics = child, metrics

    def observe(self, seconds: float) -> None:
        self.child.observe(seconds)
        self.metrics.attempt_done(seconds)


class DecisionCollector:
    """Exports the decision and preemption counts the journal listener keeps in plain dicts."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

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
