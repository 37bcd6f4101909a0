"""Prometheus metrics: counted on events (verb latency, decisions, preemptions, evictions, watch); what is read from the state at scrape time (queues, quota, shares, expiries) is observe.collectors'.

Names, label names and types follow Kueue's pkg/metrics/metrics.go (kueue_pending_workloads ->
quotient_pending_workloads, ...; histograms with Kueue's buckets), and a workload is counted as Kueue counts
it: a Job's pods or a pod group's members are one (observe.workload_counts). deploy/components/prometheus ships the
recording rules that name them kueue_* for Kueue's dashboards and alerts. Each Metrics has its own registry,
so several applications in one process (tests) never collide. Label values are bounded: a rule name, a
ClusterQueue, a flavor or resource, a priority class, never a reason's free text.
"""
from __future__ import annotations

import platform
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from ..core.rules import (ADMITTED, ALREADY_ADMITTED, GROUP_ADMITTED, GROUP_RESERVED, JOB_SLOT, PREEMPTED,
                          PREEMPTION_REASONS)
from ..version import build_info
from .kueue_shapes import eviction_labels, kueue_buckets
from .collectors import DecisionCollector, RefusalCollector, StateCollector
from .localqueue_metrics import LocalQueueMetrics
from .workload_counts import Episodes, priority_class, workload_key

disable_created_metrics()      # no *_created series: one sample per counter, as Kueue exports them
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
VERB_BUCKETS = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
PREEMPT_VERBS = frozenset({"preempt", "reclaim"})
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)   # client_golang's DefBuckets
# A filter decision on a pod (the journal's outcome) as Kueue's admission attempt result: a workload admitted is a
# success; a pod of a workload admitted before (its node held, a Job's slot) is no attempt; any refusal is one.
ATTEMPT_SUCCESS = frozenset({ADMITTED, GROUP_ADMITTED})
NO_ATTEMPT = frozenset({ALREADY_ADMITTED, GROUP_RESERVED, JOB_SLOT})



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
        self._loops = None              # app.scheduler.loops.Loops, once an application runs the background loops
        self.journal = None             # app.journal.Journal whose listener this is: its pending books come first

    # ---- event side: cheap, on the verb path ------------------------------------
    def timer(self, verb: str):
        """The timer of one verb's requests: its .observe(seconds), once the answer is sent, is all the verb path
        pays; it also writes the request's books (VerbTimer)."""
        timer = self._timers.get(verb)
        if timer is None:
            timer = self._timers[verb] = VerbTimer(self.request_duration.labels(verb), self, verb == "filter")
        return timer

    # ---- workloads, as Kueue counts them: a Job or a pod group once ------------------------
    def quota_reserved_pod(self, pod, charge, at: float, in_job: bool) -> None:
        """scheduler.commit's on_reserved, after the request's answer: a pod's reservation taken at `at` (state.clock).
        Counted once per workload: not for a pod of a workload that already holds quota (a group's other members, a
        Job's pod taking a slot of its admitted workload: in_job), nor for the same pod reserved again."""
        if in_job or not self._reserved.first(self.state, pod):
            return
        self.workload_event("quota_reserved", pod, charge, at)

    def admitted_pod(self, pod, charge, at: float, started: bool) -> None:
        """scheduler.commit's on_admitted, after the request's answer: a pod Quotient binds is charged at `at`. The
        workload is admitted with the first of its pods (for a Job, the first since it was admitted: not when
        `started`, one of its pods bound already)."""
        if started or not self._admitted.first(self.state, pod):
            return
        self.workload_event("admitted", pod, charge, at)

    def workload_event(self, event: str, pod, charge, at: float | None = None) -> None:
        """One workload reserved quota ("quota_reserved") or was admitted ("admitted") in charge's ClusterQueue (at
        `at`, state.clock; now when None): its counter and wait-time histogram, then workload_listeners
        (per-LocalQueue metrics may add theirs)."""
        wait = self.waited(pod, at)
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

    def waited(self, pod, at: float | None = None) -> float:
        """Seconds from the workload's queueing to `at` (state.clock; now when None), as Kueue's QueuedWaitTime: its
        creation, here its oldest live pod's (pods a workload requeued after an eviction gets are made anew, at its
        requeue)."""
        state = self.state
        created = [p.created for p in map(state.pods.get, state.store.groups.get(workload_key(pod), ()))
                   if p is not None and p.created is not None]
        if pod.created is not None:
            created.append(pod.created)
        return max(0.0, (state.clock() if at is None else at) - min(created)) if created else 0.0

    def on_decision(self, entry: dict) -> None:
        """Journal listener, on the verb path: one dict increment (exported at scrape time); a
        preemption counts each of its victims."""
        verb, rule = entry["verb"], entry["outcome"]
        key = (verb, rule, entry.get("queue") or "")
        counts = self.decision_counts
        counts[key] = counts.get(key, 0) + 1
        if rule == PREEMPTED and verb in PREEMPT_VERBS:
            self._count_preemption(entry)
        elif verb == "filter" and rule not in NO_ATTEMPT:
            self._attempts.append("success" if rule in ATTEMPT_SUCCESS else "inadmissible")

    def attempt_done(self, seconds: float) -> None:
        """A filter request ended: the admission attempt it journaled, if any, is counted with its duration (its
        books, written after the answer, are written first: VerbTimer.observe flushes them)."""
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
        if self.journal is not None:
            self.journal.flush()        # the books of requests answered just now count
        return generate_latest(self.registry)


def _preemption_reason(reason: object) -> str:
    """Kueue's preemption reason named in `reason` (its first word), else Other: labels stay bounded."""
    text = str(reason or "")
    word = text.split(":", 1)[0].split()[0] if text.strip() else ""
    return word if word in PREEMPTION_REASONS else "Other"


class VerbTimer:
    """A verb's request-duration histogram child. Observed when the request's answer is sent, it also writes the
    books the request left for after its answer (scheduler.outcome.book_later: the journal, its listeners) and,
    for filter, ends the admission attempt the request made."""

    __slots__ = ("child", "metrics", "attempts")

    def __init__(self, child, metrics: Metrics, attempts: bool):
        self.child, self.metrics, self.attempts = child, metrics, attempts

    def observe(self, seconds: float) -> None:
        self.child.observe(seconds)
        metrics = self.metrics
        if metrics.journal is not None:
            metrics.journal.flush()
        if self.attempts:
            metrics.attempt_done(seconds)
