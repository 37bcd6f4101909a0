"""A refused pod is retried at once when its refusal clears (issue 20).

kube-scheduler (pkg/scheduler/backend/queue/scheduling_queue.go, v1.36) parks a pod an extender refused until a
pod or node event moves it, or for 5 minutes; an update of the pod itself is such an event. The simulator models
that queue (../shared/scenarios/FORMAT.md, step 4; app/sim/queue.py); Quotient wakes a pod whose refusal cleared
with one annotation patch (act/: Wake), rate-limited, never while the refusal holds.
"""
from __future__ import annotations

import pytest

from app.act.intents import WAKE_RATE
from app.act.writer import RETRY_ANNOTATION
from app.config import Configuration, decode_configuration
from app.extender import Extender
from app.sim.queue import MAX_UNSCHEDULABLE, SchedulingQueue
from app.sim.run import differences, simulate
from app.sim.scenario import load_scenario
from helpers import cq, flavor, lq, namespace, node, pod
from live import started, until
from test_interleaving import pending, refusal, uid

OWN = __import__("pathlib").Path(__file__).resolve().parent / "scenarios"
# One scenario per wake-up reason: a podsReady backoff over, a preemption delay over, victims gone after
# kube-scheduler's last attempt, a hold that expires.
WAKE_SCENARIOS = {"ready-timeout-backoff": "PodsReadyGateCleared", "wake-preemption-delay": "PreemptionDelayOver",
                  "wake-victims-gone": "VictimsGone", "wake-hold-expires": "HoldExpired"}


# ---- the simulator: kube-scheduler's queue, and the scenarios that need a wake-up -----------------------

@pytest.mark.parametrize("name", sorted(WAKE_SCENARIOS))
async def test_each_wake_up_scenario_passes_and_fails_without_its_wake_up(name, monkeypatch):
    scenario = load_scenario(str(OWN / f"{name}.yaml"))
    out = await simulate(scenario)
    assert differences(scenario, out) == []
    assert any("woken" in line and WAKE_SCENARIOS[name] in line for line in out.timeline), out.timeline
    monkeypatch.setattr(Extender, "wake_plan", lambda self: [])
    scenario = load_scenario(str(OWN / f"{name}.yaml"))
    assert differences(scenario, await simulate(scenario)), f"{name} passes without wake-ups"


async def test_without_a_wake_up_the_pod_waits_for_the_five_minute_flush(monkeypatch, tmp_path):
    """The real cluster's behaviour the issue reports: parked, then tried again 5 minutes after the last attempt."""
    monkeypatch.setattr(Extender, "wake_plan", lambda self: [])
    text = (OWN / "wake-victims-gone.yaml").read_text().replace("until: 2m", "until: 7m")
    path = tmp_path / "flush.yaml"
    path.write_text(text)
    out = await simulate(load_scenario(str(path)))
    bound = [float(line.split("s", 1)[0]) for line in out.timeline if "bound" in line and "team-a/h1" in line]
    assert bound and 40 + MAX_UNSCHEDULABLE <= bound[0] <= 40 + MAX_UNSCHEDULABLE + 10, out.timeline


def test_queue_backs_off_doubling_to_ten_seconds_and_flushes_after_five_minutes():
    q = SchedulingQueue()
    q.add("p")
    q.active.discard("p")
    waits = []
    for attempt in range(6):
        q.failed("p", 100.0)
        waits.append(q.backoff_over("p") - 100.0)
        q.unschedulable.pop("p")
    assert waits == [1, 2, 4, 8, 10, 10]
    q.failed("p", 200.0)
    q.due(200.0 + MAX_UNSCHEDULABLE - 1)
    assert "p" in q.unschedulable and not q.active           # nothing changed: parked
    q.due(200.0 + MAX_UNSCHEDULABLE)
    assert "p" in q.active                                   # the 5-minute flush, its backoff long over
    q.active.discard("p")
    q.failed("p", 600.0)
    q.changed(600.5)                                         # a pod or node changed: moved, backing off first
    assert q.backoff == {"p": 610.0} and not q.active
    q.due(610.0)
    assert "p" in q.active


# ---- live, against the fake API server ----------------------------------------------------------------

def objects(quota: str = "4", **queue):
    return (namespace("team-a"), node("n1", cpu="64"), flavor("default-flavor"),
            cq("cq", flavors=[("default-flavor", {"cpu": quota})], **queue), lq("team-a", "lq", "cq"))


def wakes(kit, name: str | None = None) -> list[dict]:
    """The wake-up patches the fake API received (of one pod)."""
    return [body for method, path, body in kit.api.writes if method == "PATCH" and "/pods/" in path
            and not path.endswith("/status") and (name is None or path.endswith(f"/pods/{name}"))]


async def test_exactly_one_wake_up_per_cleared_refusal_and_none_while_it_holds(tmp_path, api):
    async with started(tmp_path, objects()) as kit, api(kit.ext) as http:
        running, waiting = pod("big", cpu="4", node="n1"), pod("p", cpu="2")
        await pending(kit, running)
        await pending(kit, waiting)
        assert "cpu request 2 > 0 available" in refusal(kit.filter(waiting))
        for _ in range(3):
            assert await kit.ext.wake() == 0                  # the quota is still taken: no write
            kit.clock.advance(1)
        assert wakes(kit) == []
        kit.api.delete("Pod", "team-a", "big")
        await until(lambda: uid(running) not in kit.state.pods, what="the deletion")
        assert await kit.ext.wake() == 1
        for _ in range(3):
            kit.clock.advance(1)
            assert await kit.ext.wake() == 0                  # once per refusal
        [patch] = wakes(kit, "p")
        assert patch["metadata"]["annotations"][RETRY_ANNOTATION].endswith(" QuotaFreed")
        await until(lambda: RETRY_ANNOTATION in kit.state.pods[uid(waiting)].annotations, what="the woken pod")
        shown = (await http.get("/debug/pods/team-a/p")).json()["refusal"]
        assert shown["rule"] == "QuotaExceeded" and shown["clearedBecause"] == "QuotaFreed"
        assert shown["at"] <= shown["clearedAt"] == shown["wokenAt"]
        assert "Woken:" in (await http.get("/debug/pods/team-a/p?format=text")).text
        metrics = (await http.get("/metrics")).text
        assert 'quotient_refused_pods_woken_total{cause="QuotaFreed"} 1.0' in metrics
        assert kit.filter(waiting)["NodeNames"] == ["n1"]      # kube-scheduler's retry passes
        assert uid(waiting) not in kit.ext.refusals


async def test_a_burst_of_a_thousand_cleared_refusals_stays_within_the_rate_limit(tmp_path):
    """1,000 workloads requeued by waitForPodsReady whose backoff ends at once: each is woken once, never more
    than WAKE_RATE a second (a burst of WAKE_RATE first)."""
    config = decode_configuration({"waitForPodsReady": {"enable": True, "timeout": "10s",
                                                        "requeuingStrategy": {"backoffBaseSeconds": 60}}})
    async with started(tmp_path, objects(quota="10000"), config) as kit:
        from app.core.readiness import Requeue, after_eviction, requeue_key

        pods = [pod(f"w{i}", cpu="1") for i in range(1000)]
        for p in pods:
            kit.api.apply(p)
        await until(lambda: all(uid(p) in kit.state.pods for p in pods), timeout=30, what="1,000 pods")
        for p in pods:                      # each one's workload was evicted once and backs off 60 s
            info = kit.state.pods[uid(p)]
            record = kit.state.requeues.setdefault(requeue_key(info), Requeue(first_created=info.created))
            after_eviction(record, config.wait_for_pods_ready, kit.clock())
            assert "backoff" in refusal(kit.filter(p))
        assert await kit.ext.wake() == 0 and wakes(kit) == []
        kit.clock.advance(61)
        written, seconds = [], 0
        while len(wakes(kit)) < 1000:
            written.append(await kit.ext.wake())
            assert sum(written) <= WAKE_RATE * (1 + seconds)
            kit.clock.advance(1)
            seconds += 1
            assert seconds < 60
        assert max(written) <= WAKE_RATE and written[0] == WAKE_RATE
        assert sorted(p.split("/")[-1] for _, p, _ in [w for w in kit.api.writes if w[0] == "PATCH"
                                                        and "/pods/" in w[1] and not w[1].endswith("/status")]) \
            == sorted(p["metadata"]["name"] for p in pods)          # every pod exactly once


async def test_a_stopped_queue_started_again_wakes_its_refused_pod(tmp_path):
    """stopPolicy Hold, then None: a Kueue object kube-scheduler does not watch, so only a wake-up moves the pod."""
    async with started(tmp_path, objects(stopPolicy="Hold")) as kit:
        waiting = pod("p", cpu="1")
        await pending(kit, waiting)
        assert "stopPolicy" in refusal(kit.filter(waiting))
        assert await kit.ext.wake() == 0
        kit.api.apply(cq("cq", flavors=[("default-flavor", {"cpu": "4"})]))
        await until(lambda: kit.state.cluster_queues["cq"].stop_policy in ("", "None"), what="the queue restarted")
        assert await kit.ext.wake() == 1
        assert wakes(kit, "p")[0]["metadata"]["annotations"][RETRY_ANNOTATION].endswith(" QueueChanged")


async def test_a_group_completed_after_kube_scheduler_tried_it_is_woken(tmp_path):
    """The last member's creation moves the first member in kube-scheduler before Quotient's watch has it: the
    member is refused "GroupIncomplete"; once Quotient has the whole group it wakes it."""
    async with started(tmp_path, objects()) as kit:
        members = [pod(f"g-{i}", cpu="1") for i in range(2)]
        for m in members:
            m["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
            m["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
        await pending(kit, members[0])
        assert "1 of 2 members exist" in refusal(kit.filter(members[0]))
        assert await kit.ext.wake() == 0
        await pending(kit, members[1])
        assert await kit.ext.wake() == 1
        assert wakes(kit, "g-0")[0]["metadata"]["annotations"][RETRY_ANNOTATION].endswith(" GroupComplete")


def test_wake_up_config_of_the_live_service_is_the_reconcile_loops():
    """The wake loop runs beside the reconcile, at most every second (app/api/app.py)."""
    from app.api.app import WAKE_INTERVAL
    assert WAKE_INTERVAL <= 1.0 and Configuration().reconcile_interval >= WAKE_INTERVAL
