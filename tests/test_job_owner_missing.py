"""Issue 31, point 11: a missing owner is missing, not late.

A pod whose ownerReference names a batch/v1 Job the API does not have (deleted with --cascade=orphan, or an owner
reference another tool wrote) waited for ever as JobNotSeen, although the Job list was complete. Now a pod seen
before its Job waits jobWaitTimeout (5 s), measured from when its Job's first pod was first seen: a Job merely late
(the Job and Pod watches are not ordered) is waited for and its pods are admitted as its workload; after the bound
the pods are judged by the pod rules, as plain pods of their LocalQueue (Kueue's pod webhook decides by the owner
reference's kind alone, and refuses no such pod). A Job that comes after the bound takes its running pods as its
workload without charging them twice. quotient_job_waits_total and quotient_job_waits_expired_total count both.
"""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from app.act.writer import SnapshotWriter
from app.config import Configuration, ConfigError, decode_configuration
from app.scheduler.scheduler import Scheduler
from app.observe.metrics import Metrics
from builders import Job, LocalQueue, Namespace, Node, Pod, ResourceFlavor, cpu_queue
from helpers import FakeClock, Verbs, apply, delete, make_state, refused
from live import started, until

import pytest

CPU = 1000
NOT_MADE = dict(kind="Job", name="never-made", uid="uid-job-never-made")


def cluster_objects(quota: int = 2) -> list[dict]:
    """ClusterQueue cq (quota CPUs) behind LocalQueue q in team-a, node n1 of 4 CPUs."""
    return [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), cpu_queue("cq", quota),
            LocalQueue("q", "team-a").cluster_queue("cq").obj(), Node("n1").cpu("4").obj()]


def orphans(n: int, job=NOT_MADE) -> list[Pod]:
    """Plain pods of LocalQueue q whose controller is a Job (that, by default, is never created)."""
    return [Pod(f"{job['name']}-{i}").queue("q").owner(**job).cpu("1") for i in range(n)]


def waits(state) -> dict[str, float]:
    """The two counters, as /metrics exports them."""
    text = Metrics(state).render().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in ("quotient_job_waits_total", "quotient_job_waits_expired_total"):
                out[s.name] = s.value
    return out


def bound_cpu(api) -> int:
    """What the API's own pods ask of cq: the CPU of every pod it shows bound and not finished."""
    return sum(CPU for p in api.objects("Pod") if (p.get("spec") or {}).get("nodeName")
               and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


# ---- live, against the fake API server ----------------------------------------------------------------------

async def test_pods_whose_job_never_exists_are_admitted_within_the_bound_and_quota_holds(tmp_path):
    """Before: JobNotSeen ("its watch event is late") at every filter, for ever."""
    pods = orphans(3)
    async with started(tmp_path, [*cluster_objects(2), *(p.obj() for p in pods)]) as live:
        assert live.state.jobs_listed and not live.state.jobs
        reason = refused(live.filter(pods[0].obj()), ["n1"])
        assert "JobNotSeen" not in reason and "Job team-a/never-made" in reason and "5s" in reason
        live.clock.advance(5.0)                       # the bound, from when the pod was first seen
        admitted = []
        for p in pods:
            answer = live.filter(p.obj())
            if answer["NodeNames"] == ["n1"]:
                assert await live.bind(p.obj()) == ""
                admitted.append(p.obj()["metadata"]["name"])
            else:
                assert answer["NodeNames"] == [] and "ClusterQueue cq" in str(answer), answer
        assert admitted == ["never-made-0", "never-made-1"]
        await until(lambda: sum(1 for p in live.api.objects("Pod") if p["spec"].get("nodeName")) == 2,
                    what="the bindings on the API")
        assert bound_cpu(live.api) == 2 * CPU          # the API's own objects: cq at its 2 CPUs, not above
        await until(lambda: all(live.knows(p.obj(), node_name="n1") for p in pods[:2]), what="the watch")
        assert live.state.tree.queues["cq"].bound[("default-flavor", "cpu")] == 2 * CPU
        assert not live.state.job_admissions           # plain pods: no Job workload
        assert waits(live.state) == {"quotient_job_waits_total": 1, "quotient_job_waits_expired_total": 1}
        await live.equal_to_a_fresh_list()


async def test_a_job_created_a_second_after_its_pods_is_waited_for_and_admits_them_as_its_workload(tmp_path):
    """The watches of two kinds are not ordered: the Job's pods come first, the Job 1 s later."""
    job = Job("late").queue("q").parallelism(2)
    pods = [Pod(f"late-{i}").of_job(job).cpu("1") for i in range(2)]      # no queue label: the Job's
    async with started(tmp_path, [*cluster_objects(2), *(p.obj() for p in pods)]) as live:
        for p in pods:
            assert "is not known to Quotient yet" in refused(live.filter(p.obj()), ["n1"])
        live.clock.advance(1.0)
        live.api.apply(job.obj())
        await until(lambda: job.uid in live.state.jobs, what="the Job")
        for p in pods:
            answer = live.filter(p.obj())
            assert answer["NodeNames"] == ["n1"], answer
            assert await live.bind(p.obj()) == ""
        rec = live.state.job_admissions[job.uid]
        assert (rec.size, rec.charge.cluster_queue) == (2, "cq")
        await until(lambda: bound_cpu(live.api) == 2 * CPU, what="the bindings on the API")
        await until(lambda: all(live.knows(p.obj(), node_name="n1") for p in pods), what="the watch")
        assert live.state.tree.queues["cq"].bound[("default-flavor", "cpu")] == 2 * CPU
        assert live.state.tree.queues["cq"].usage[("default-flavor", "cpu")] == 2 * CPU    # charged once
        live.clock.advance(60.0)
        live.filter(Pod("other").queue("q").cpu("1").obj())      # a sweep: the wait ended when the Job came
        assert waits(live.state) == {"quotient_job_waits_total": 1, "quotient_job_waits_expired_total": 0}


# ---- the state, on a fake clock ---------------------------------------------------------------------------------

def state_with(*objects, clock, config=None):
    return make_state(*cluster_objects(4), *objects, clock=clock, config=config)


def test_the_bound_is_measured_from_when_the_pod_was_first_seen_not_from_each_filter():
    clock = FakeClock()
    s = state_with(clock=clock)
    s.jobs_listed = True
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    [pod] = orphans(1)
    apply(s, pod.obj())
    for _ in range(4):          # kube-scheduler's retries: 1, 2, 4 s ... none of them restarts the wait
        assert "not known to Quotient yet" in refused(verbs.filter(pod.obj(), ["n1"]), ["n1"])
        clock.advance(1.25)
    assert verbs.filter(pod.obj(), ["n1"])["NodeNames"] == ["n1"]


def test_a_second_pod_of_a_job_already_found_missing_does_not_wait_again():
    """A replacement pod of the same owner: its Job is known not to exist, not late."""
    clock = FakeClock()
    s = state_with(clock=clock)
    s.jobs_listed = True
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    first, second = orphans(2)
    apply(s, first.obj())
    clock.advance(5.0)
    assert verbs.filter(first.obj(), ["n1"])["NodeNames"] == ["n1"]
    apply(s, second.obj())
    assert verbs.filter(second.obj(), ["n1"])["NodeNames"] == ["n1"]


def test_a_job_deleted_with_cascade_orphan_leaves_its_pods_to_the_pod_rules_at_once():
    """The Job's DELETED event: the Job is gone, not late; its pending pods do not wait."""
    clock = FakeClock()
    job = Job("j").queue("q").parallelism(2)
    pods = [Pod(f"j-{i}").of_job(job).queue("q").cpu("1") for i in range(2)]
    s = state_with(job.obj(), *(p.obj() for p in pods), clock=clock)
    s.jobs_listed = True
    delete(s, job.obj())
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    assert verbs.filter(pods[0].obj(), ["n1"])["NodeNames"] == ["n1"]
    assert waits(s) == {"quotient_job_waits_total": 0, "quotient_job_waits_expired_total": 0}


async def test_a_job_that_comes_after_the_bound_takes_its_running_pods_without_charging_them_twice():
    clock = FakeClock()
    job = Job("slow").queue("q").parallelism(2)
    pods = [Pod(f"slow-{i}").of_job(job).queue("q").cpu("1") for i in range(2)]
    s = state_with(clock=clock)
    s.jobs_listed = True
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    apply(s, *(p.obj() for p in pods))
    clock.advance(5.0)
    for p in pods:
        assert verbs.filter(p.obj(), ["n1"])["NodeNames"] == ["n1"]
        assert (await verbs.bind(p.obj(), "n1"))["Error"] == ""
        apply(s, p.node("n1").phase("Running").obj())
    cq = s.tree.queues["cq"]
    assert (cq.usage[("default-flavor", "cpu")], cq.bound[("default-flavor", "cpu")]) == (2 * CPU, 2 * CPU)
    apply(s, job.obj())                     # the Job, at last
    rec = s.job_admissions[job.uid]
    assert (rec.size, rec.spare) == (2, 0)
    assert all(s.pods[p.obj()["metadata"]["uid"]].job for p in pods)      # the Job's pods now
    assert (cq.usage[("default-flavor", "cpu")], cq.bound[("default-flavor", "cpu")]) == (2 * CPU, 2 * CPU)
    assert waits(s) == {"quotient_job_waits_total": 1, "quotient_job_waits_expired_total": 1}


def test_without_a_job_source_nothing_waits():
    """Quotient reads no Jobs (a snapshot without them): an owner is never waited for."""
    s = state_with(clock=FakeClock())
    [pod] = orphans(1)
    apply(s, pod.obj())
    assert Verbs(Scheduler(s, SnapshotWriter(s))).filter(pod.obj(), ["n1"])["NodeNames"] == ["n1"]


def test_job_wait_timeout_is_configurable():
    assert Configuration().job_wait_timeout == 5.0
    cfg = decode_configuration({"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration",
                                "jobWaitTimeout": "30s"})
    assert cfg.job_wait_timeout == 30.0
    with pytest.raises(ConfigError, match="jobWaitTimeout"):
        decode_configuration({"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration",
                              "jobWaitTimeout": "soon"})


def test_the_wait_follows_job_wait_timeout():
    clock = FakeClock()
    s = state_with(clock=clock, config=Configuration(job_wait_timeout=30.0))
    s.jobs_listed = True
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    [pod] = orphans(1)
    apply(s, pod.obj())
    clock.advance(29.0)
    assert "up to 30s" in refused(verbs.filter(pod.obj(), ["n1"]), ["n1"])
    clock.advance(1.0)
    assert verbs.filter(pod.obj(), ["n1"])["NodeNames"] == ["n1"]


# ---- the simulator lists Jobs as a real cluster does ------------------------------------------------------------

async def test_the_simulator_lists_jobs_even_when_the_scenario_declares_none():
    """Before: jobs_listed stayed False without a Job document, so a missing owner never showed in a scenario."""
    from pathlib import Path

    from app.sim.run import differences, simulate
    from app.sim.scenario import load_scenario

    scenario = load_scenario(str(Path(__file__).parent / "scenarios" / "job-owner-missing.yaml"))
    out = await simulate(scenario)
    assert differences(scenario, out) == []
    assert any("team-a/w-0: Job team-a/train, the pod's owner, is not known to Quotient yet" in line
               for line in out.timeline)
    assert any(line.split()[0] == "7.0s" and "bound" in line and "team-a/w-0" in line for line in out.timeline)


@pytest.mark.parametrize("ending, cause", [("bound", "JobWaitOver"), ("job", "JobSeen")])
def test_a_jobnotseen_refusal_clears_when_the_wait_ends_or_the_job_comes(ending, cause):
    """/debug/pods and quotient_refusals_cleared_total say why the pod stopped waiting."""
    clock = FakeClock()
    s = state_with(clock=clock)
    s.jobs_listed = True
    ext = Scheduler(s, SnapshotWriter(s))
    job = Job("j").queue("q")
    [pod] = [Pod("j-0").of_job(job).queue("q").cpu("1")]
    apply(s, pod.obj())
    refused(Verbs(ext).filter(pod.obj(), ["n1"]), ["n1"])
    ext.note_cleared()
    assert ext.refusals[pod.obj()["metadata"]["uid"]].cleared_at is None      # still waiting
    if ending == "bound":
        clock.advance(5.0)
    else:
        apply(s, job.obj())
    assert ext.note_cleared() == 1
    assert ext.refusals[pod.obj()["metadata"]["uid"]].cause == cause
