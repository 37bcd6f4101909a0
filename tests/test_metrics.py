"""GET /metrics (Prometheus) and the decision log: what is counted on events, what is read from the state.

Scenario: the one of tests/test_debug.py (team-a-cq and team-b-cq in cohort co).
"""
from __future__ import annotations

import io
import logging

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.act.writer import WriteError
from app.observe import attach
from app.observe.logs import JsonFormatter, setup_logging
from helpers import FakeClock
from test_debug import NODES, SCENARIO, T0, bind_for, filter_for

Gi = 2**30


CLUSTER = SCENARIO         # the conftest's ext fixture builds it


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, frozenset of label items): value} from the exposition text."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: dict, name: str, **labels) -> float | None:
    return found.get((name, frozenset(labels.items())))


async def scrape(c) -> dict:
    r = await c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return samples(r.text)


async def test_decisions_counted_by_outcome_and_rule_and_verb_latency_per_verb(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        await c.post("/filter", json=filter_for(ext, "team-b/small"))
        await c.post("/filter", json=filter_for(ext, "team-b/big"))
        await c.post("/bind", json=bind_for(ext, "team-a/wait-1", "od-1"))
        m = await scrape(c)
    assert value(m, "quotient_decisions_total", verb="filter", outcome="admitted", reason="Admitted",
                 cluster_queue="team-a-cq") == 1
    assert value(m, "quotient_decisions_total", verb="filter", outcome="refused", reason="StrictFIFO",
                 cluster_queue="team-b-cq") == 1
    assert value(m, "quotient_decisions_total", verb="filter", outcome="refused", reason="QuotaExceeded",
                 cluster_queue="team-b-cq") == 1
    assert value(m, "quotient_decisions_total", verb="bind", outcome="bound", reason="Bound",
                 cluster_queue="team-a-cq") == 1
    assert value(m, "quotient_extender_request_duration_seconds_count", verb="filter") == 3
    assert value(m, "quotient_extender_request_duration_seconds_count", verb="bind") == 1
    assert value(m, "quotient_extender_request_duration_seconds_count", verb="prioritize") == 0
    assert value(m, "quotient_extender_request_duration_seconds_bucket", verb="filter", le="+Inf") == 3
    assert 0 < value(m, "quotient_extender_request_duration_seconds_sum", verb="filter") < 3


async def test_queue_gauges_are_read_from_the_state_at_scrape_time(ext, api):
    async with api(ext) as c:
        m = await scrape(c)
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        reserved = await scrape(c)
        await c.post("/bind", json=bind_for(ext, "team-a/wait-1", "od-1"))
        bound = await scrape(c)
    assert value(m, "quotient_pending_workloads", cluster_queue="team-a-cq", status="active") == 1
    assert value(m, "quotient_pending_workloads", cluster_queue="team-b-cq", status="active") == 2
    assert value(m, "quotient_admitted_active_workloads", cluster_queue="team-b-cq") == 1
    labels = dict(cohort="co", cluster_queue="team-a-cq", flavor="on-demand")
    assert value(m, "quotient_cluster_queue_nominal_quota", resource="cpu", **labels) == 6
    assert value(m, "quotient_cluster_queue_nominal_quota", resource="memory", **labels) == 36 * Gi
    assert value(m, "quotient_cluster_queue_borrowing_limit", resource="cpu", **labels) == 2
    assert value(m, "quotient_cluster_queue_lending_limit", cohort="co", cluster_queue="team-b-cq",
                 flavor="on-demand", resource="cpu") == 4
    assert value(m, "quotient_cluster_queue_resource_usage", resource="cpu", **labels) == 5
    assert value(m, "quotient_cluster_queue_status", cluster_queue="team-a-cq", status="active") == 1
    # a reservation holds quota (resource_reservation) but is not yet usage
    assert value(reserved, "quotient_reserving_active_workloads", cluster_queue="team-a-cq") == 1
    assert value(reserved, "quotient_pending_workloads", cluster_queue="team-a-cq", status="active") == 0
    assert value(reserved, "quotient_cluster_queue_resource_reservation", resource="cpu", **labels) == 7
    assert value(reserved, "quotient_cluster_queue_resource_usage", resource="cpu", **labels) == 5
    assert value(bound, "quotient_admitted_active_workloads", cluster_queue="team-a-cq") == 2
    assert value(bound, "quotient_cluster_queue_resource_usage", resource="cpu", **labels) == 7
    # 1 CPU borrowed of the 14 the cohort can lend: a weighted share of 71 (per mille), as /debug/queues says
    assert value(bound, "quotient_cluster_queue_weighted_share", cluster_queue="team-a-cq") == 71
    assert value(bound, "quotient_cohort_weighted_share", cohort="co") == 0


async def test_reservation_expiries_are_counted(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        ext.state.clock.advance(31)
        await c.post("/filter", json=filter_for(ext, "team-b/small"))   # expiry happens on the next request
        m = await scrape(c)
    assert value(m, "quotient_reservation_expiries_total") == 1
    assert value(m, "quotient_reserving_active_workloads", cluster_queue="team-a-cq") == 0
    assert value(m, "quotient_learned_pods_forgotten_total") == 0


async def test_preemption_counts_victims_under_the_preemptors_cluster_queue(ext, api):
    urgent = {"metadata": {"name": "urgent", "namespace": "team-a", "uid": "uid-urgent",
                           "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "creationTimestamp": "2026-01-01T02:00:00Z"},
              "spec": {"priority": 100, "containers": [{"name": "c", "resources": {"requests": {"cpu": "6"}}}]}}
    async with api(ext) as c:
        await c.post("/filter", json={"Pod": urgent, "Nodes": None, "NodeNames": NODES})
        await ext.actions.settle()              # evicted at once, by the filter's decision
        assert await ext.reconcile() == 0
        m = await scrape(c)
    assert value(m, "quotient_preempted_workloads_total", preempting_cluster_queue="team-a-cq",
                 reason="InClusterQueue") == 1
    assert value(m, "quotient_evicted_workloads_total", cluster_queue="team-a-cq", reason="Preempted",
                 underlying_cause="", priority_class="") == 1        # Kueue's eviction reason for a preemption
    assert value(m, "quotient_decisions_total", verb="reclaim", outcome="preempting", reason="Preempting",
                 cluster_queue="team-a-cq") == 1


async def test_preemption_reasons_outside_kueues_are_other(ext, api):
    observers = attach(ext)
    ext.journal.record({"time": T0, "verb": "reclaim", "pod": "team-b/run-b", "outcome": "Preempted",
                        "reason": "gone", "reasons": ["SomethingNew", "InCohortReclamation"], "preemptor": "uid-big"})
    assert observers.metrics.preemption_counts == {("team-b-cq", "Other"): 1, ("team-b-cq", "InCohortReclamation"): 1}


async def test_drain_evictions_and_their_failures(build_extender, api):
    class Flaky:
        def __init__(self, state):
            self.state, self.fail = state, True

        async def bind(self, pod, node):
            pass

        async def evict(self, pod, reason, message):
            if self.fail:
                raise WriteError("the API server said no")
            self.state.remove_pod(pod.uid)

    stopped = SCENARIO.replace("  queueingStrategy: StrictFIFO\n", "  queueingStrategy: StrictFIFO\n  stopPolicy: HoldAndDrain\n")
    clock = FakeClock(T0)
    ext = build_extender(stopped, clock=clock, writer=lambda state: Flaky(state))
    async with api(ext) as c:
        assert await ext.reconcile() == 0
        ext.writer.fail = False            # set through the counting wrapper, on the real writer
        assert await ext.reconcile() == 0  # the failed eviction backs off (1 s) before it is tried again
        clock.advance(1.0)
        assert await ext.reconcile() == 1
        m = await scrape(c)
    assert value(m, "quotient_eviction_failures_total", cluster_queue="team-b-cq", reason="ClusterQueueStopped") == 1
    assert value(m, "quotient_evicted_workloads_total", cluster_queue="team-b-cq", reason="ClusterQueueStopped",
                 underlying_cause="", priority_class="") == 1
    assert value(m, "quotient_decisions_total", verb="drain", outcome="evicted", reason="Evicted",
                 cluster_queue="team-b-cq") == 1
    assert value(m, "quotient_cluster_queue_status", cluster_queue="team-b-cq", status="stopped") == 1


async def test_watch_counters_are_defined_for_the_live_source(ext, api):
    observers = attach(ext)
    async with api(ext) as c:
        text = (await c.get("/metrics")).text
        observers.metrics.watch_restarted("Pod")
        observers.metrics.relisted("Pod", "http 504")
        m = await scrape(c)
    assert "# TYPE quotient_watch_restarts_total counter" in text
    assert "# TYPE quotient_watch_relists_total counter" in text
    assert value(m, "quotient_watch_restarts_total", kind="Pod") == 1
    assert value(m, "quotient_watch_relists_total", kind="Pod", reason="http 504") == 1


def test_attach_is_once_per_extender(ext):
    first, second = attach(ext), attach(ext)
    assert first is second
    assert ext.journal.listeners.count(first.metrics.on_decision) == 1


# ---- decision log ------------------------------------------------------------------------------
@pytest.fixture
def captured():
    """The quotient.decisions logger's records, as text lines and as JSON lines."""
    text, json = io.StringIO(), io.StringIO()
    handlers = [logging.StreamHandler(text), logging.StreamHandler(json)]
    handlers[0].setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handlers[1].setFormatter(JsonFormatter())
    logger = logging.getLogger("quotient.decisions")
    old_level = logger.level
    logger.setLevel(logging.INFO)
    for h in handlers:
        logger.addHandler(h)
    yield text, json
    for h in handlers:
        logger.removeHandler(h)
    logger.setLevel(old_level)


async def test_one_log_line_per_decision_that_changed_something(ext, api, captured):
    text, json = captured
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))      # a reservation: DEBUG only
        await c.post("/filter", json=filter_for(ext, "team-b/small"))       # a refusal: not logged
        await c.post("/bind", json=bind_for(ext, "team-a/wait-1", "od-1"))
        await c.post("/bind", json={**bind_for(ext, "team-b/small", "spot-1")})   # refused: a warning
    lines = text.getvalue().splitlines()
    assert lines[0] == ("INFO quotient.decisions: bind team-a/wait-1 Bound node od-1 ClusterQueue team-a-cq "
                        "flavors cpu=on-demand,memory=on-demand borrowing")
    assert len(lines) == 2 and lines[1].startswith("WARNING quotient.decisions: bind team-b/small Refused")
    first = orjson.loads(json.getvalue().splitlines()[0])
    assert {k: first[k] for k in ("level", "logger", "verb", "pod", "outcome", "node", "queue", "flavors", "borrowing")} == {
        "level": "info", "logger": "quotient.decisions", "verb": "bind", "pod": "team-a/wait-1", "outcome": "Bound",
        "node": "od-1", "queue": "team-a-cq", "flavors": {"cpu": "on-demand", "memory": "on-demand"}, "borrowing": True}
    assert first["time"].endswith("Z") and first["message"].startswith("bind team-a/wait-1 Bound")


async def test_reservations_are_logged_at_debug(ext, api, captured):
    text, _ = captured
    logging.getLogger("quotient.decisions").setLevel(logging.DEBUG)
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
    assert text.getvalue().splitlines() == [
        "DEBUG quotient.decisions: filter team-a/wait-1 Admitted quota reserved in team-a-cq "
        "flavors cpu=on-demand,memory=on-demand borrowing 2 of 3 offered nodes"]


def test_setup_logging_json_lines():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    try:
        setup_logging("json", "info", stream=stream)
        logging.getLogger("quotient.test").info("hello %s", "there")
        logging.getLogger("quotient.test").debug("not shown")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    [line] = stream.getvalue().splitlines()
    obj = orjson.loads(line)
    assert (obj["level"], obj["logger"], obj["message"]) == ("info", "quotient.test", "hello there")
