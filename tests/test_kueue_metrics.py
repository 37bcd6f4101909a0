"""Kueue's metrics on /metrics, named quotient_*: its names, label names and types (pkg/metrics/metrics.go), and
workloads counted as Kueue counts them, a Job's pods (or a pod group's members) once (issue 34).

Scenario: tests/test_debug.py's (team-a-cq and team-b-cq in cohort co), with Job team-a/j of 4 pods of 500m.
"""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.objects.meta import format_time
from app.observe import attach
from builders import Job, Pod, snapshot_yaml
from helpers import FakeClock
from test_debug import NODES, SCENARIO, T0, bind_for, filter_for
from test_metrics import scrape, value

JOB = Job("j").queue("lq").parallelism(4)
JOB_PODS = [Pod(f"j-{i}").of_job(JOB).cpu("500m").created_at(format_time(T0 - 30)) for i in range(4)]
A = "team-a-cq"


CLUSTER = SCENARIO + "---\n" + snapshot_yaml(JOB.obj(), *(p.obj() for p in JOB_PODS))   # conftest's ext


async def admit_the_job(ext, c) -> dict[str, str]:
    """kube-scheduler's filter and bind for each of the Job's pods; returns pod -> node."""
    nodes = {}
    for i in range(4):
        r = await c.post("/filter", json=filter_for(ext, f"team-a/j-{i}"))
        (nodes[f"team-a/j-{i}"],) = r.json()["NodeNames"]
    ext.state.clock.advance(2)
    for key, node in nodes.items():
        assert (await c.post("/bind", json=bind_for(ext, key, node))).json() == {"Error": ""}
    return nodes


async def test_a_four_pod_job_is_one_workload_in_the_gauges_counters_and_wait_times(ext, api):
    """Kueue counts Workloads: a Job is one (pkg/cache/scheduler/clusterqueue.go, pkg/scheduler/scheduler.go
    recordWorkloadAdmissionMetrics). Its wait is from its creation (QueuedWaitTime) to quota reservation and to
    admission, here its first pod bound."""
    async with api(ext) as c:
        before = await scrape(c)
        for i in range(4):
            await c.post("/filter", json=filter_for(ext, f"team-a/j-{i}"))
        reserved = await scrape(c)
        ext.state.clock.advance(2)
        for i in range(4):
            node = ext.state.holds[ext.state.store.pod_by_key(f"team-a/j-{i}").uid].node
            assert (await c.post("/bind", json=bind_for(ext, f"team-a/j-{i}", node))).json() == {"Error": ""}
        bound = await scrape(c)
    assert value(before, "quotient_pending_workloads", cluster_queue=A, status="active") == 2    # wait-1, the Job
    assert value(before, "quotient_pending_workloads", cluster_queue=A, status="inadmissible") == 0
    assert value(reserved, "quotient_pending_workloads", cluster_queue=A, status="active") == 1
    assert value(reserved, "quotient_reserving_active_workloads", cluster_queue=A) == 1
    assert value(reserved, "quotient_quota_reserved_workloads_total", cluster_queue=A, priority_class="") == 1
    assert value(reserved, "quotient_quota_reserved_wait_time_seconds_count", cluster_queue=A, priority_class="") == 1
    assert value(reserved, "quotient_quota_reserved_wait_time_seconds_sum", cluster_queue=A, priority_class="") == 30
    assert value(reserved, "quotient_admission_attempts_total", result="success") == 1      # the group's decision
    assert value(reserved, "quotient_admission_attempt_duration_seconds_count", result="success") == 1
    assert value(reserved, "quotient_admitted_workloads_total", cluster_queue=A, priority_class="") is None
    assert value(bound, "quotient_reserving_active_workloads", cluster_queue=A) == 0
    assert value(bound, "quotient_admitted_active_workloads", cluster_queue=A) == 2            # run-a, the Job
    assert value(bound, "quotient_admitted_workloads_total", cluster_queue=A, priority_class="") == 1
    assert value(bound, "quotient_quota_reserved_workloads_total", cluster_queue=A, priority_class="") == 1
    waited = dict(cluster_queue=A, priority_class="")
    assert value(bound, "quotient_admission_wait_time_seconds_count", **waited) == 1
    assert value(bound, "quotient_admission_wait_time_seconds_sum", **waited) == 32
    assert value(bound, "quotient_admission_wait_time_seconds_bucket", le="20.0", **waited) == 0
    assert value(bound, "quotient_admission_wait_time_seconds_bucket", le="40.0", **waited) == 1
    les = sorted(float(dict(k[1])["le"]) for k in bound if k[0] == "quotient_admission_wait_time_seconds_bucket")
    assert les[:-1] == [          # Kueue's generateExponentialBuckets(16)
       1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0,
                                                    2560.0, 5120.0, 10240.0, 20480.0, 40960.0]


async def test_a_job_evicted_or_preempted_counts_one_workload_with_kueues_reason(ext, api):
    """kueue_evicted_workloads_total{reason="Preempted"} once per Workload (pkg/workload/evict/evict.go), and
    kueue_preempted_workloads_total once per Workload preempted (ReportPreemption). Metrics.workload_listeners
    (where per-LocalQueue metrics hook) hear each event once for the Job too."""
    observers = attach(ext)
    events = []
    observers.metrics.workload_listeners.append(lambda event, pod, cq, detail: events.append((event, cq, detail)))
    async with api(ext) as c:
        await admit_the_job(ext, c)
        pods = [ext.state.store.pod_by_key(f"team-a/j-{i}") for i in range(4)]
        for p in pods:
            ext.journal.record({"time": T0, "verb": "reclaim", "pod": p.key, "outcome": "Preempted", "reason": "x",
                                "reasons": ["InCohortReclamation"], "preemptor": "uid-big"})
        for p in pods:
            await ext.writer.evict(p, "InCohortReclamation", "preempted")
        m = await scrape(c)
    assert observers.metrics.preemption_counts == {("team-b-cq", "InCohortReclamation"): 1}
    assert events == [("quota_reserved", A, 30.0), ("admitted", A, 32.0), ("evicted", A, ("Preempted", ""))]
    assert value(m, "quotient_evicted_workloads_total", cluster_queue=A, reason="Preempted", underlying_cause="",
                 priority_class="") == 1
    assert value(m, "quotient_admitted_active_workloads", cluster_queue=A) == 1                # run-a alone


async def test_a_refused_workload_is_inadmissible_until_its_refusal_clears(ext, api):
    """Kueue's pending_workloads{status}: "inadmissible" after a failed admission attempt, until a change in the
    cluster could make it fit (pkg/cache/queue: inadmissible workloads, requeued on such events)."""
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-b/big"))       # 12 CPUs: beyond what the cohort has free
        refused = await scrape(c)
        ext.state.remove_pod("uid-run-b")
        ext.state.remove_pod("uid-run-a")
        assert ext.note_cleared() >= 1
        cleared = await scrape(c)
    assert value(refused, "quotient_admission_attempts_total", result="inadmissible") == 1
    assert value(refused, "quotient_pending_workloads", cluster_queue="team-b-cq", status="inadmissible") == 1
    assert value(refused, "quotient_pending_workloads", cluster_queue="team-b-cq", status="active") == 1   # small
    assert value(cleared, "quotient_pending_workloads", cluster_queue="team-b-cq", status="inadmissible") == 0
    assert value(cleared, "quotient_pending_workloads", cluster_queue="team-b-cq", status="active") == 2


async def test_no_summary_is_exported_and_build_info_has_kueues_label_names(ext, api):
    """A summary cannot be aggregated across replicas; Kueue exports none. kueue_build_info's labels are
    git_version, git_commit, build_date, go_version, compiler, platform (Python's version in place of Go's)."""
    async with api(ext) as c:
        text = (await c.get("/metrics")).text
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert "summary" not in types.values(), [n for n, t in types.items() if t == "summary"]
    assert types["quotient_refusal_cleared_to_retry_seconds"] == "histogram"
    assert types["quotient_admission_wait_time_seconds"] == types["quotient_quota_reserved_wait_time_seconds"] \
        == types["quotient_admission_attempt_duration_seconds"] == "histogram"
    (info,) = (f for f in text_string_to_metric_families(text) if f.name == "quotient_build_info")
    assert set(info.samples[0].labels) == {"git_version", "git_commit", "build_date", "python_version", "compiler",
                                           "platform"}
