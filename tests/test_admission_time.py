"""Issue 12, points 1 and 2: admission time as Kueue means it, and a simulator and fake API that stamp
times as a real API server does.

Kueue: pkg/scheduler/preemption/common/ordering.go CandidatesOrdering takes "workloads admitted more recently
first" by quotaReservationTime (the QuotaReserved condition's lastTransitionTime, whole seconds on the
wire), its last tie by UID; common/preemption_policy.go SatisfiesPreemptionPolicy lets
LowerOrNewerEqualPriority take an equal-priority workload only when preemptorTS.Before(candidateTS). For a
pod the bind is the admission: Quotient's own bind second, else PodScheduled, else startTime, else
creationTimestamp; the tie-break (later startTime, later creation, name descending) replaces the UID, which
a real API server draws at random.
"""
from __future__ import annotations

import asyncio
import copy

import pytest

from app.core.preemption.candidates import find_candidates, unqueued_on
from app.core.preemption.ordering import newer
from app.core.preemption.targets import Preemptor
from app.core.flavors import Charge
from app.objects.meta import format_time, parse_time
from app.objects.pod import decode_pod
from app.observe.podview import pod_view
from app.journal import Journal
from app.sim.sim_cluster import SimCluster, SimPod
from app.sim.scenario import ScenarioError, load_scenario
from app.sim.kube_scheduler import SimScheduler

from builders import (BASE_TIME, ClusterQueue, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor, running,
                      snapshot_yaml)
from helpers import FakeClock, apply, make_state, pod_info, preemptor_of, workload_info


def within_state(*pods, policy="LowerOrNewerEqualPriority", clock=None, quota="4"):
    return make_state(ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
                      ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", quota))
                          .preemption({"withinClusterQueue": policy}).obj(),
                      LocalQueue("lq", "team-a").cluster_queue("cq").obj(), *pods, clock=clock)


def candidate_keys(state, ns="team-a", name="p") -> list[str]:
    pre = preemptor_of(state, ns, name)
    return [x.pod.key for x in find_candidates(state, pre, pre.relevant, set())]


# ---- decoding and the source of the admission time ------------------------------------------------------

def test_pod_decodes_podscheduled_and_starttime():
    obj = running("a", "lq", "1", created=1).scheduled(10).started(12).obj()
    obj["status"]["conditions"].append({"type": "Ready", "status": "True", "lastTransitionTime": "2030-01-01T00:00:00Z"})
    info = decode_pod(obj)
    assert (info.scheduled_at, info.started, info.created) == (BASE_TIME + 10, BASE_TIME + 12, BASE_TIME + 1)
    unschedulable = running("b", "lq", "1", created=1).obj()
    unschedulable["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                              "lastTransitionTime": format_time(BASE_TIME + 5)}]
    assert decode_pod(unschedulable).scheduled_at is None      # kube-scheduler's "not yet": no admission


@pytest.mark.parametrize("scheduled, started, source, at", [
    (10, 12, "PodScheduled", 10), (None, 12, "startTime", 12), (None, None, "creationTimestamp", 1)])
def test_a_pod_quotient_did_not_bind_is_admitted_when_the_api_says_it_was_bound(scheduled, started, source, at):
    """Issue 12 point 1: PodScheduled's lastTransitionTime, else status.startTime, else creationTimestamp; the
    charge records which, and /debug shows it."""
    s = within_state(running("a", "lq", "1", created=1).scheduled(scheduled).started(started).obj())
    charge = s.admitted["uid-team-a-a"]
    assert (charge.admitted_at, charge.admitted_from) == (BASE_TIME + at, source)
    view = pod_view(s, Journal(), "team-a", "a")["charge"]
    assert view["admittedAtSource"] == source and parse_time(view["admittedAt"]) == BASE_TIME + at
    assert view["admittedAtNote"]


def test_admission_times_are_whole_seconds():
    obj = running("a", "lq", "1").obj()
    obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                    "lastTransitionTime": "2026-01-01T00:00:07.900Z"}]
    s = within_state(obj)
    assert s.admitted["uid-team-a-a"].admitted_at == parse_time("2026-01-01T00:00:07Z")


def test_quotients_own_bind_is_its_second_then_the_apis_podscheduled():
    """A pod Quotient bound is admitted at the bind moment, to the second (as the API server's PodScheduled
    records it); once the watch shows the binding, the API's own time is taken, which is what a restart reads."""
    clock = FakeClock(BASE_TIME + 20.8)
    s = within_state(Pod("x").queue("lq").cpu("1").created(1).obj(), clock=clock)
    x = pod_info(s, "team-a", "x")
    s.bindings.commit(x.uid, "n1", Charge("cq", {"cpu": "default-flavor"}, {("default-flavor", "cpu"): 1000}))
    assert (s.admitted[x.uid].admitted_at, s.admitted[x.uid].admitted_from) == (BASE_TIME + 20, "bind")
    apply(s, running("x", "lq", "1", created=1).scheduled(21).obj())      # the API server's clock was a second on
    assert (s.admitted[x.uid].admitted_at, s.admitted[x.uid].admitted_from) == (BASE_TIME + 21, "PodScheduled")


# ---- one order: most recently admitted first, ties broken the same way everywhere --------------------------

TIED = [  # all created in one second; admission, then startTime, then creation, then name decide
    running("a-first", "lq", "1").scheduled(30).obj(),
    running("b-latest", "lq", "1").scheduled(40).obj(),
    running("c-older-start", "lq", "1").scheduled(35).started(36).obj(),
    running("d-later-start", "lq", "1").scheduled(35).started(37).obj(),
    running("e-tie", "lq", "1").scheduled(20).started(21).obj(),
    running("f-tie", "lq", "1").scheduled(20).started(21).obj(),
]
NEWEST_FIRST = ["team-a/b-latest", "team-a/d-later-start", "team-a/c-older-start", "team-a/a-first",
                "team-a/f-tie", "team-a/e-tie"]


def test_candidates_are_most_recently_admitted_first_with_a_deterministic_tie_break():
    """CandidatesOrdering criterion 4 (quotaReservationTime): the later PodScheduled first; at an equal second
    the later startTime, then the later creationTimestamp, then the name descending, never the UID. The UIDs
    here sort the other way round, so a UID tie-break fails this test."""
    pods = [copy.deepcopy(p) for p in TIED]
    for i, p in enumerate(pods):
        p["metadata"]["uid"] = f"uid-{i}"
    s = within_state(*pods, Pod("p").queue("lq").cpu("1").created(-10).obj())
    assert candidate_keys(s) == NEWEST_FIRST


def test_the_same_key_orders_pods_in_no_queue():
    """Pods in no queue, taken for room on a node only, use the same newest_first order."""
    pods = [copy.deepcopy(p) for p in TIED]
    for p in pods:
        p["metadata"]["labels"] = {}
    s = within_state(*pods, Pod("p").queue("lq").cpu("1").priority(100).created(-10).obj())
    pre = Preemptor(workload_info(s, "team-a", "p"), s.cluster_queues["cq"], s.ledger.quota_node("cq"), {}, set())
    assert [c.pod.key for c in unqueued_on(s, pre, "n1")] == NEWEST_FIRST


def test_a_restart_rebuilds_the_same_candidate_order():
    """Issue 12: a fresh ClusterState listing the same objects (Quotient's own bind included, as the API shows
    it) orders the candidates as the state that made the bind did."""
    clock = FakeClock(BASE_TIME + 35.9)
    objects = [copy.deepcopy(p) for p in TIED] + [Pod("x").queue("lq").cpu("1").obj(),
                                                  Pod("p").queue("lq").cpu("1").created(-10).obj()]
    s = within_state(*objects, clock=clock, quota="7")
    x = pod_info(s, "team-a", "x")
    assert s.bindings.commit(x.uid, "n1", Charge("cq", {"cpu": "default-flavor"}, {("default-flavor", "cpu"): 1000})) == ""
    assert s.admitted[x.uid].admitted_at == BASE_TIME + 35
    bound = running("x", "lq", "1").scheduled(35).obj()       # the API's PodScheduled, the same second
    apply(s, bound)
    before = candidate_keys(s)
    restarted = within_state(*[o for o in objects if o["metadata"]["name"] != "x"], bound, quota="7")
    assert candidate_keys(restarted) == before
    # x: PodScheduled 35 and no startTime, so after d and c (started at 37 and 36), before a-first (30)
    assert before == NEWEST_FIRST[:3] + ["team-a/x"] + NEWEST_FIRST[3:]


# ---- LowerOrNewerEqualPriority compares whole seconds ------------------------------------------------

def test_newer_is_a_later_second_not_the_same_one():
    """SatisfiesPreemptionPolicy: preemptorTS.Before(candidateTS) on API times (seconds): the same second is
    not newer, whatever fraction a file or a clock carried."""
    assert newer(BASE_TIME + 5, BASE_TIME + 4.9)
    assert not newer(BASE_TIME + 5.7, BASE_TIME + 5.1)
    assert not newer(BASE_TIME + 4, BASE_TIME + 5)


def test_an_equal_priority_pod_group_created_before_the_preemptor_is_no_candidate():
    """LowerOrNewerEqualPriority for a running pod group (one workload in Kueue): newer by its queue-order
    time, its first member's creation; before, a group was taken as soon as one member was newer."""
    def member(name, created):
        obj = running(name, "lq", "2", created=created).obj()
        obj["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
        obj["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
        return obj
    old = within_state(member("g1", 1), member("g2", 7), Pod("p").queue("lq").cpu("2").created(5).obj())
    assert candidate_keys(old) == []
    new = within_state(member("g1", 6), member("g2", 7), Pod("p").queue("lq").cpu("2").created(5).obj())
    assert candidate_keys(new) == ["team-a/g1"] or candidate_keys(new) == ["team-a/g2"]


# ---- the simulator stamps as an API server does ---------------------------------------------------------

def scenario_file(tmp_path, pods: str) -> str:
    """A scenario file: cq (8 CPUs) behind team-a/q, node n1 (8 CPUs, 8Gi, 10 pods), then the pods as the file
    writes them (sim_pod: no uid, no creationTimestamp unless given: the simulator stamps them)."""
    text = snapshot_yaml(ResourceFlavor("default-flavor").obj(),
                         ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", 8)).obj(),
                         LocalQueue("q", "team-a").cluster_queue("cq").obj(),
                         Node("n1").cpu("8").memory("8Gi").allocatable("pods", "10").obj()) + pods
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


POD = """---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: team-a, labels: {{kueue.x-k8s.io/queue-name: q}}{meta}}}
spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: '1'}}}}}}]{spec}}}
{status}"""


def sim_pod(name, meta="", spec="", status=""):
    return POD.format(name=name, meta=meta, spec=spec, status=status)


def test_scheduled_at_annotation_and_a_podscheduled_condition_give_running_pods_their_time(tmp_path):
    """scenario.quotient.dev/scheduled-at (RFC 3339) on a running pod becomes its PodScheduled condition;
    without it, a PodScheduled entry the file gives in status.conditions is kept."""
    path = scenario_file(tmp_path, sim_pod("a", ", annotations: {scenario.quotient.dev/scheduled-at: '2026-01-01T00:01:00.5Z'}",
                                           ", nodeName: n1")
                         + sim_pod("b", "", ", nodeName: n1",
                                   "status: {conditions: [{type: PodScheduled, status: 'True', "
                                   "lastTransitionTime: '2026-01-01T00:02:00Z'}]}"))
    sim = SimScheduler(load_scenario(path), verbose=False)
    sim.load()
    charges = {k: sim.state.admitted[sim.state.store.uid_by_key[k]] for k in ("team-a/a", "team-a/b")}
    assert (charges["team-a/a"].admitted_at, charges["team-a/a"].admitted_from) == \
        (parse_time("2026-01-01T00:01:00Z"), "PodScheduled")
    assert charges["team-a/b"].admitted_at == parse_time("2026-01-01T00:02:00Z")
    # and, as a kubelet would have set it, a startTime: when it was bound, to the second
    started = {k: sim.state.pods[sim.state.store.uid_by_key[k]].started for k in ("team-a/a", "team-a/b")}
    assert started == {"team-a/a": parse_time("2026-01-01T00:01:00Z"), "team-a/b": parse_time("2026-01-01T00:02:00Z")}


@pytest.mark.parametrize("meta, spec, why", [
    (", annotations: {scenario.quotient.dev/scheduled-at: 'yesterday'}", ", nodeName: n1", "not an RFC 3339 time"),
    (", annotations: {scenario.quotient.dev/scheduled-at: '2026-01-01T00:00:00Z'}", "", "already running")])
def test_scheduled_at_is_checked(tmp_path, meta, spec, why):
    with pytest.raises(ScenarioError, match=why):
        load_scenario(scenario_file(tmp_path, sim_pod("a", meta, spec)))


def test_simulated_creation_times_are_whole_seconds(tmp_path):
    """The API server sets creationTimestamp to the second: explicit ones in the file and submit-at pods too."""
    path = scenario_file(tmp_path, sim_pod("a", ", creationTimestamp: '2026-01-01T00:00:03.7Z'")
                         + sim_pod("b", ", annotations: {scenario.quotient.dev/submit-at: '2.5s'}"))
    created = {p.key: p.obj["metadata"]["creationTimestamp"] for p in load_scenario(path).pods}
    assert created == {"team-a/a": "2026-01-01T00:00:03Z", "team-a/b": "2026-01-01T00:00:05Z"}


async def test_a_simulated_bind_sets_podscheduled_and_starttime_and_new_resource_versions(tmp_path):
    path = scenario_file(tmp_path, sim_pod("a"))
    sim = SimScheduler(load_scenario(path), verbose=False)
    sim.now += 0.75
    await sim.run(None)
    obj = sim.cluster.pods["team-a/a"].obj
    second = format_time(sim.scenario.start)
    scheduled = next(c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["lastTransitionTime"], obj["status"]["startTime"]) == ("True", second, second)
    assert {c["type"] for c in obj["status"]["conditions"]} == {"PodScheduled", "Ready"}
    assert isinstance(obj["metadata"]["resourceVersion"], str) and int(obj["metadata"]["resourceVersion"]) >= 2
    charge = sim.state.admitted[sim.state.store.uid_by_key["team-a/a"]]
    assert charge.admitted_at == parse_time(second)


def test_a_simulated_eviction_of_a_bound_pod_goes_through_deletion_timestamp(monkeypatch):
    """MODIFIED with deletionTimestamp, then DELETED (at once without terminate-after); a recreated pod's
    creationTimestamp is the second it was recreated."""
    seen = []
    import app.sim.sim_cluster as simcluster
    real = simcluster.apply_object

    def spy(state, obj, deleted=False):
        seen.append(("DELETED" if deleted else "MODIFIED", bool(obj["metadata"].get("deletionTimestamp"))))
        return real(state, obj, deleted=deleted)
    state = within_state()
    cluster = SimCluster(state)
    obj = running("v", "lq", "1").obj()
    obj["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": "uid-j", "controller": True}]
    cluster.add_pod(SimPod(obj, decode_pod(obj)))
    monkeypatch.setattr(simcluster, "apply_object", spy)
    fresh = cluster.evict("team-a/v", BASE_TIME + 9.6, "test", preemption=True)
    assert seen[:2] == [("MODIFIED", True), ("DELETED", True)]
    assert fresh.obj["metadata"]["creationTimestamp"] == format_time(BASE_TIME + 9)


# ---- the fake API server stamps as a real one does ------------------------------------------------------

class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


async def test_fakeapi_sets_creation_times_itself_to_the_second_and_start_pod_sets_starttime():
    from fakeapi import FakeApiServer

    clock = Clock(BASE_TIME + 4.9)
    async with FakeApiServer(clock=clock) as api:
        stored = api.apply(Pod("a").queue("lq").cpu("1").created(100).node("n1").obj())
        assert stored["metadata"]["creationTimestamp"] == format_time(BASE_TIME + 4)   # the given one is ignored
        clock.now += 3
        again = api.apply(Pod("a").queue("lq").cpu("1").created(200).node("n1").obj())
        assert again["metadata"]["creationTimestamp"] == format_time(BASE_TIME + 4)    # immutable
        started = api.start_pod("team-a", "a")
        assert started["status"]["startTime"] == format_time(BASE_TIME + 7)
        assert started["status"]["phase"] == "Running" and isinstance(started["metadata"]["resourceVersion"], str)


@pytest.mark.parametrize("grace", [0.0, 0.2])
async def test_fakeapi_evicts_a_bound_pod_through_deletion_timestamp(grace, tmp_path):
    """An eviction (as a DELETE) of a bound pod: MODIFIED with deletionTimestamp, then DELETED after the grace
    period; a pod never bound goes at once."""
    from fakeapi import FakeApiServer
    from app.act.kube import KubeWriter

    async with FakeApiServer(pod_grace=grace) as api:
        api.apply(Pod("v").queue("lq").cpu("1").node("n1").obj())
        api.apply(Pod("w").queue("lq").cpu("1").obj())
        client = await api.api_client(tmp_path)
        try:
            writer = KubeWriter(client, state=None)
            start = api.rv
            await writer.evict(decode_pod(api.get("Pod", "team-a", "v")), "InClusterQueue", "test")
            await writer.evict(decode_pod(api.get("Pod", "team-a", "w")), "InClusterQueue", "test")
        finally:
            await client.close()
        events = [(etype, obj["metadata"]["name"], bool(obj["metadata"].get("deletionTimestamp")))
                  for rv, k, ns, etype, obj in api.history if rv > start and k.kind == "Pod"]
        assert ("MODIFIED", "v", True) in events and ("DELETED", "w", False) in events
        if grace:
            assert api.get("Pod", "team-a", "v")["metadata"]["deletionTimestamp"]
            await asyncio.sleep(grace + 0.2)
        assert api.get("Pod", "team-a", "v") is None
        deleted = [e for e in events if e[0] == "DELETED" and e[1] == "v"] or \
            [("DELETED", obj["metadata"]["name"]) for rv, k, ns, etype, obj in api.history
             if etype == "DELETED" and obj["metadata"]["name"] == "v"]
        assert deleted
