"""Issue 31, point 6: every duration Quotient measures runs on the monotonic clock (ClusterState.timer).

A step of the wall clock (FakeClock.step: NTP stepping, a clock set by hand) right after a bind must not end
the guard on Quotient's own binding (a late PodScheduled=False event of the pod would unbind it and let
another pod into the same quota), and reservations, preemption holds and learned pods neither expire early
nor live for ever across it. Quota is judged on the API's own objects (tests/fakeapi.py)."""
from __future__ import annotations

import asyncio

import pytest

from app.core.flavors import Charge
from app.objects.pod import decode_pod
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import CPU, FakeClock, make_state, uid
from live import api_cpu, started, until

HOUR = 3600.0
STEPS = [120.0, -HOUR]
IGNORED = "pod event older than Quotient's own binding ignored"


def cluster(quota: str = "4") -> tuple[dict, ...]:
    return (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", quota)).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj())


@pytest.mark.parametrize("step", STEPS)
async def test_a_wall_clock_step_right_after_a_bind_lets_no_late_event_unbind_it(tmp_path, step):
    async with started(tmp_path, cluster("4")) as live:
        p, q = Pod("p").queue("lq").cpu("4").obj(), Pod("q").queue("lq").cpu("4").obj()
        for obj in (p, q):
            live.api.apply(obj)
            await until(lambda: live.knows(obj), what="the watch to deliver the pod")
        assert live.filter(p)["NodeNames"] == ["n1"]
        live.api.fault("pause", resource="pods", verb="write", sub="binding")
        bind_p = asyncio.create_task(live.bind(p))
        await live.api.paused_request()                # Quotient's binding is made, its write on the way
        live.clock.step(step)                          # the wall clock steps
        late = Pod("p").queue("lq").cpu("4").obj()     # kube-scheduler's PodScheduled=False, written before
        late.setdefault("status", {})["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        live.api.apply(late)                           # the bind, delivered after it
        await until(lambda: live.state.skips[IGNORED] or not live.state.pods[uid(p)].node_name,
                    what="the late event")
        answer = live.filter(q)
        if answer["NodeNames"]:                        # before (+120 s): the quota looked free again
            assert await live.bind(q) == ""
        live.api.resume()
        assert await bind_p == ""
        await until(lambda: live.knows(p, node_name="n1") and uid(p) not in live.state.assumed,
                    what="the binding confirmed")
        await asyncio.sleep(0.2)
        assert api_cpu(live.api) <= 4 * CPU            # before: 8,000m of a 4,000m nominal quota
        assert not answer["NodeNames"] and live.state.skips[IGNORED] == 1
        await live.equal_to_a_fresh_list()


@pytest.mark.parametrize("step", STEPS)
def test_reservations_holds_and_learned_pods_neither_expire_early_nor_live_for_ever_across_a_step(step):
    clock = FakeClock()
    a, b = Pod("a").queue("lq").cpu("1").obj(), Pod("b").queue("lq").cpu("1").obj()
    state = make_state(*cluster(), a, b, clock=clock)
    cfg = state.config
    state.workloads.reserve(uid(a), Charge("cq", {"cpu": "default-flavor"}, {("default-flavor", "cpu"): CPU}))
    state.workloads.hold_for_preemptor(uid(b), "n1", {"cpu": CPU}, None, {})
    state.learned_pods.learn_pod(decode_pod(Pod("ghost").queue("lq").cpu("1").obj()))
    state.learned_pods.forget_stale_learned()
    clock.advance(10)
    clock.step(step)
    state.expire_lapsed()
    # before (+120 s): the 30 s reservation and the 60 s hold ended 10 s in
    assert uid(a) in state.reservations and uid(b) in state.holds
    clock.advance(max(cfg.reservation_timeout, cfg.preemption_hold_timeout, cfg.learned_pod_timeout) + 1)
    state.expire_lapsed()
    state.learned_pods.forget_stale_learned()
    # before (-1 h): all three lived an hour longer
    assert uid(a) not in state.reservations and uid(b) not in state.holds
    assert "ghost" not in {p.name for p in state.pods.values()}


@pytest.mark.parametrize("version", ["", "300"])
def test_a_binding_the_api_never_showed_is_given_up_after_its_guard_without_waiting_for_another_event(version):
    """The API answered an unbinding event while Quotient's own binding was unconfirmed (a restored API server lost
    it, say), and nothing else comes of the pod: the reconcile takes the API's word once ASSUMED_TTL has passed on
    the timer, rather than keep the pod charged until some later event of it (found by test_api_truth_faults).
    With a resourceVersion: the relist after a restore shows the pod at the very version the binding was decided
    on. Before, the guard's expiry applied it as a watch event, dropped as no newer than the known state (the
    decided version, the binding being Quotient's own): the pod stayed bound here for good, nothing assumed."""
    from app.state.bindings import ASSUMED_TTL
    from helpers import apply

    clock = FakeClock()
    pod = Pod("p").queue("lq").cpu("4").obj()
    if version:
        pod["metadata"]["resourceVersion"] = version
    state = make_state(*cluster("4"), pod, clock=clock)
    charge = Charge("cq", {"cpu": "default-flavor"}, {("default-flavor", "cpu"): 4 * CPU})
    assert state.bindings.commit(uid(pod), "n1", charge) == ""
    if version:                                         # a relist after a restore: the API's whole word
        state.begin_bulk()
    apply(state, pod)                                   # the API's word: unbound (held back: the guard)
    if version:
        state.end_bulk()
    assert state.pods[uid(pod)].node_name == "n1" and uid(pod) in state.bindings.held_back
    clock.advance(ASSUMED_TTL - 1)
    assert state.bindings.expire_assumed() == 0 and uid(pod) in state.admitted
    clock.advance(2)
    assert state.bindings.expire_assumed() == 1
    assert state.pods[uid(pod)].node_name == "" and uid(pod) not in state.admitted
    assert not state.assumed and not state.bindings.held_back


def test_the_guards_expiry_does_not_bring_back_an_unbinding_event_older_than_what_came_since():
    """Held back: the pod pending (rv 20). Applied since: the pod Failed before any node took it (rv 30, say its
    activeDeadlineSeconds passed; a finished pod is never held back, and one shown on a node confirms the
    binding). When the guard expires, the older unbinding event must not be applied over it (found in review:
    the pod went back into the queue as Pending)."""
    from app.state.bindings import ASSUMED_TTL
    from helpers import apply

    clock = FakeClock()
    pod = Pod("p").queue("lq").cpu("4").obj()
    pod["metadata"]["resourceVersion"] = "10"
    state = make_state(*cluster("4"), pod, clock=clock)
    charge = Charge("cq", {"cpu": "default-flavor"}, {("default-flavor", "cpu"): 4 * CPU})
    assert state.bindings.commit(uid(pod), "n1", charge) == ""
    pending = dict(pod, metadata={**pod["metadata"], "resourceVersion": "20"})
    apply(state, pending)
    assert uid(pod) in state.bindings.held_back
    failed = Pod("p").queue("lq").cpu("4").phase("Failed").obj()
    failed["metadata"]["resourceVersion"] = "30"
    apply(state, failed)
    clock.advance(ASSUMED_TTL + 1)
    state.bindings.expire_assumed()
    assert state.pods[uid(pod)].phase == "Failed"
    assert uid(pod) not in {u for items in state.pending.values() for _, u in items}
