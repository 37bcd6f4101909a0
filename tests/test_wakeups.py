"""A refused pod is tried again in time when its refusal clears by itself (issue 20).

kube-scheduler v1.36 parks a pod an extender refused with FailedNodes when an in-tree plugin also rejected a
node (a tainted control plane, a full node): only an event that plugin's queueing hint accepts moves it, else
it waits 5 minutes. An extender Error is no FitError, so the pod goes to the backoff queue (1 s doubling to
10 s). Quotient answers refusals that clear by themselves soon as such a retry (app/refusals.py) and parks the
others; nothing is written to the pod. The simulator models that queue (app/sim/queue.py).
"""
from __future__ import annotations

import pytest

import app.scheduler.outcome
from app.scheduler.loops import CLEARED_INTERVAL
from app.config import Configuration, decode_configuration
from app.refusals import RETRY_HORIZON
from app.sim.queue import (ASSIGNED_POD_DELETE, ASSIGNED_POD_UPDATE, MAX_UNSCHEDULABLE, UNSCHEDULED_POD_ADD,
                           UNSCHEDULED_POD_UPDATE, SchedulingQueue)
from app.sim.run import differences, simulate
from app.sim.scenario import load_scenario
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from live import started, until
from helpers import refusal, uid

OWN = __import__("pathlib").Path(__file__).resolve().parent / "scenarios"
# One scenario per retry reason: a podsReady backoff over, a preemption delay over, victims gone after
# kube-scheduler's last attempt, a hold that expires.
RETRY_SCENARIOS = {"ready-timeout-backoff": "PodsReadyBackoff", "wake-preemption-delay": "PreemptionDelay",
                   "wake-victims-gone": "VictimsLeaving", "wake-hold-expires": "VictimsLeaving"}


def no_retries(monkeypatch):
    """Every refusal parks the pod, as before issue 20."""
    monkeypatch.setattr(app.scheduler.outcome, "retry_cause", lambda *args, **kw: "")


# ---- the simulator: kube-scheduler's queue, and the scenarios that need a retry -----------------------

@pytest.mark.parametrize("name", sorted(RETRY_SCENARIOS))
async def test_each_retry_scenario_passes_and_fails_when_refusals_park_the_pod(name, monkeypatch):
    scenario = load_scenario(str(OWN / f"{name}.yaml"))
    out = await simulate(scenario)
    assert differences(scenario, out) == []
    assert any("SchedulerError" in line and RETRY_SCENARIOS[name] in line for line in out.timeline), out.timeline
    no_retries(monkeypatch)
    scenario = load_scenario(str(OWN / f"{name}.yaml"))
    assert differences(scenario, await simulate(scenario)), f"{name} passes with every refusal parked"


async def test_a_parked_pod_waits_for_the_five_minute_flush(monkeypatch, tmp_path):
    """The real cluster's behaviour the issue reports: parked by TaintToleration, no event its hint accepts, tried
    again 5 minutes after its last attempt."""
    no_retries(monkeypatch)
    text = (OWN / "wake-victims-gone.yaml").read_text().replace("until: 2m", "until: 7m")
    path = tmp_path / "flush.yaml"
    path.write_text(text)
    out = await simulate(load_scenario(str(path)))
    bound = [float(line.split("s", 1)[0]) for line in out.timeline if "bound" in line and "team-a/h1" in line]
    assert bound and 40 + MAX_UNSCHEDULABLE <= bound[0] <= 40 + MAX_UNSCHEDULABLE + 10, out.timeline


async def test_without_a_tainted_node_kube_scheduler_retries_a_refused_pod_by_itself(monkeypatch, tmp_path):
    """No in-tree plugin rejected a node: the FitError has no rejector and the pod backs off (1-10 s) however it
    was refused, so the scenario passes even with every refusal parked."""
    no_retries(monkeypatch)
    text = (OWN / "wake-victims-gone.yaml").read_text()
    start = text.index("apiVersion: v1\nkind: Node\nmetadata: {name: control-plane")
    path = tmp_path / "untainted.yaml"
    path.write_text(text[:start] + text[text.index("---\n", start) + 4:])
    scenario = load_scenario(str(path))
    assert differences(scenario, await simulate(scenario)) == []


def test_queue_backs_off_doubling_to_ten_seconds_and_flushes_after_five_minutes():
    q = SchedulingQueue()
    fit = frozenset({"NodeResourcesFit"})
    waits = []
    for attempt in range(6):
        q.failed("p", 100.0, fit)
        waits.append(q.backoff_over("p") - 100.0)
        q.unschedulable.pop("p")
    assert waits == [1, 2, 4, 8, 10, 10]
    q.failed("p", 200.0, fit)
    q.due(200.0 + MAX_UNSCHEDULABLE - 1)
    assert "p" in q.unschedulable and not q.active           # nothing changed: parked
    q.due(200.0 + MAX_UNSCHEDULABLE)
    assert "p" in q.active                                   # the 5-minute flush, its backoff long over


def test_only_an_event_a_rejectors_hint_accepts_moves_a_parked_pod():
    q = SchedulingQueue()
    q.failed("full", 600.0, frozenset({"NodeResourcesFit"}))
    q.failed("tainted", 600.0, frozenset({"TaintToleration"}))
    q.changed(600.5, [ASSIGNED_POD_UPDATE, UNSCHEDULED_POD_UPDATE, UNSCHEDULED_POD_ADD])
    assert set(q.unschedulable) == {"full", "tainted"}       # UpdatePodOther and a new pod move neither
    q.changed(600.5, [ASSIGNED_POD_DELETE])
    assert set(q.unschedulable) == {"tainted"}               # a deleted pod may free room: NodeResourcesFit
    assert q.backoff["full"] > 600.5                          # moved, backing off first


def test_a_failure_with_no_rejector_or_a_matching_event_in_flight_backs_off():
    q = SchedulingQueue()
    q.failed("error", 10.0)                                  # the extender's Error: no FitError, no rejector
    q.failed("moved", 10.0, frozenset({"NodeResourcesFit"}), during=[ASSIGNED_POD_DELETE])
    q.failed("parked", 10.0, frozenset({"NodeResourcesFit"}), during=[ASSIGNED_POD_UPDATE])
    assert set(q.backoff) == {"error", "moved"} and set(q.unschedulable) == {"parked"}


# ---- live, against the fake API server ----------------------------------------------------------------

def objects(quota: str = "4", **queue):
    return (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", quota)).spec(**queue)
                .obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj())


def retried(answer: dict) -> str:
    """The refusal answered as a retry: the Error field, no node passing and no FitError reasons."""
    assert answer["Error"] and not answer["NodeNames"], answer
    assert not answer["FailedNodes"] and not answer["FailedAndUnresolvableNodes"], answer
    return answer["Error"]


def pod_writes(kit) -> list:
    """Writes to pods themselves (not their binding, eviction or status)."""
    return [(m, p) for m, p, _ in kit.api.writes if "/pods/" in p and p.rsplit("/", 2)[-2] == "pods"]


async def test_the_queue_head_and_the_pods_behind_it_retry_and_nothing_is_written(tmp_path, api):
    """Quota in use frees as pods finish, an event no in-tree plugin's hint takes: every pod that fits once it
    frees is answered as a retry, the head (QueueHead) and those behind it (QuotaInUse), so each is tried within
    kube-scheduler's 10 s backoff of its refusal clearing (issue 32)."""
    async with started(tmp_path, objects()) as kit, api(kit.ext) as http:
        running = Pod("big").queue("lq").cpu("4").node("n1").obj()
        first, second = Pod("p").queue("lq").cpu("2").obj(), Pod("q").queue("lq").cpu("2").obj()
        await kit.deliver(running)
        await kit.deliver(first)
        kit.clock.advance(1)
        await kit.deliver(second)
        assert "cpu request 2 > 0 available" in retried(kit.filter(first))        # the head: a retry
        assert "tries it again after its backoff, QueueHead" in retried(kit.filter(first))
        assert "backoff, QuotaInUse" in retried(kit.filter(second))                 # behind it: a retry too
        for _ in range(3):
            kit.clock.advance(1)
            assert kit.ext.note_cleared() == 0                                      # the quota is still taken
        kit.api.delete("Pod", "team-a", "big")
        await until(lambda: uid(running) not in kit.state.pods, what="the deletion")
        assert kit.ext.note_cleared() == 2 and kit.ext.note_cleared() == 0          # once per refusal
        kit.clock.advance(3)
        assert kit.filter(first)["NodeNames"] == ["n1"]                              # kube-scheduler's retry passes
        shown = (await http.get("/debug/pods/team-a/q")).json()["refusal"]
        assert shown["rule"] == "QuotaExceeded" and shown["answer"] == "retry (QuotaInUse)"
        assert shown["clearedBecause"] == "QuotaFreed" and shown["retriedAt"] is None
        assert kit.filter(second)["NodeNames"] == ["n1"]
        shown = (await http.get("/debug/pods/team-a/q")).json()["refusal"]
        assert shown["at"] <= shown["clearedAt"] < shown["retriedAt"]
        assert "Tried again:" in (await http.get("/debug/pods/team-a/q?format=text")).text
        metrics = (await http.get("/metrics")).text
        assert 'quotient_refusal_retries_total{cause="QueueHead"} 2.0' in metrics
        assert 'quotient_refusal_retries_total{cause="QuotaInUse"} 1.0' in metrics
        assert 'quotient_refusals_cleared_total{cause="QuotaFreed"} 2.0' in metrics
        assert "quotient_refusal_cleared_to_retry_seconds_count 2.0" in metrics
        assert "quotient_refusal_cleared_to_retry_seconds_sum 6.0" in metrics       # 3 s each, as kube-scheduler
        assert pod_writes(kit) == []


async def test_a_thousand_refusals_in_a_backoff_are_retries_and_write_nothing(tmp_path):
    """1,000 workloads requeued by waitForPodsReady: each is answered as a retry while its backoff ends within
    5 minutes (kube-scheduler's own flush bounds any longer wait), parked while it ends later, admitted once it
    is over; no write to any pod."""
    config = decode_configuration({"waitForPodsReady": {"enable": True, "timeout": "10s",
                                                        "requeuingStrategy": {"backoffBaseSeconds": 60}}})
    async with started(tmp_path, objects(quota="10000"), config) as kit:
        from app.core.readiness import after_eviction, requeue_key
        from app.core.workload import RequeueRecord

        pods = [Pod(f"w{i}").queue("lq").cpu("1").obj() for i in range(1000)]
        for p in pods:
            kit.api.apply(p)
        await until(lambda: all(uid(p) in kit.state.pods for p in pods), timeout=30, what="1,000 pods")
        for p in pods:                      # each one's workload was evicted once and backs off 60 s
            info = kit.state.pods[uid(p)]
            record = kit.state.requeues.setdefault(requeue_key(info), RequeueRecord(first_created=info.created))
            after_eviction(record, config.wait_for_pods_ready, kit.clock())
            assert "60s backoff" in retried(kit.filter(p))
        assert kit.ext.refusals.retries["PodsReadyBackoff"] == 1000
        far = kit.state.requeues[requeue_key(kit.state.pods[uid(pods[0])])]
        far.at = kit.clock() + RETRY_HORIZON + 1
        assert "backoff" in refusal(kit.filter(pods[0]))        # ends after kube-scheduler's flush: parked
        kit.clock.advance(RETRY_HORIZON + 2)
        assert kit.ext.note_cleared() + kit.ext.note_cleared() == 1000        # 500 judged per call at most
        assert all(kit.filter(p)["NodeNames"] == ["n1"] for p in pods)
        assert pod_writes(kit) == []


async def test_a_stopped_queue_parks_its_pods_and_notes_when_it_starts_again(tmp_path):
    """stopPolicy Hold is lifted by an admin, not by time: the pod is parked (kube-scheduler tries it again on
    an event or within 5 minutes), and the clearing is noted."""
    async with started(tmp_path, objects(stopPolicy="Hold")) as kit:
        waiting = Pod("p").queue("lq").cpu("1").obj()
        await kit.deliver(waiting)
        assert "stopPolicy" in refusal(kit.filter(waiting))
        assert kit.ext.note_cleared() == 0
        kit.api.apply(ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj())
        await until(lambda: kit.state.cluster_queues["cq"].stop_policy in ("", "None"), what="the queue restarted")
        assert kit.ext.note_cleared() == 1
        assert kit.ext.refusals[uid(waiting)].cause == "QueueChanged"


async def test_an_incomplete_group_is_retried_until_it_is_whole(tmp_path):
    """The last member's creation may move the first member in kube-scheduler before Quotient's watch has it:
    "GroupIncomplete" is a retry, so it is tried again once Quotient has the whole group."""
    async with started(tmp_path, objects()) as kit:
        members = [Pod(f"g-{i}").queue("lq").cpu("1").obj() for i in range(2)]
        for m in members:
            m["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
            m["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
        await kit.deliver(members[0])
        assert "1 of 2 members exist" in retried(kit.filter(members[0]))
        assert kit.ext.note_cleared() == 0
        await kit.deliver(members[1])
        assert kit.ext.note_cleared() == 1
        assert kit.ext.refusals[uid(members[0])].cause == "GroupComplete"
        assert kit.filter(members[0])["NodeNames"] == ["n1"]


def test_the_clearing_loop_runs_beside_the_reconcile():
    """Refusals that cleared are looked for at most every second (app/api/app.py)."""
    assert CLEARED_INTERVAL <= 1.0 and Configuration().reconcile_interval >= CLEARED_INTERVAL
