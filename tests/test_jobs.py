"""A batch/v1 Job labelled with a queue is one workload (issue 10, part 3), as Kueue's Job integration makes it
(pkg/controller/jobs/job/job_controller.go; site docs tasks/run/jobs.md, concepts/workload.md "partial
admission"): its pods inherit the Job's labels, are admitted all together or not at all, keep the workload's
quota for the pods that replace finished or failed ones, and are preempted as one candidate."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.act.writer import SnapshotWriter
from app.config import Configuration, WaitForPodsReady
from app.core.admission import decide
from app.scheduler.scheduler import Scheduler
from app.core.workload import JOB, WorkloadKey, group_of
from app.objects.errors import InvalidObject
from app.objects.job import decode_job
from app.sim.run import differences, simulate
from app.sim.scenario import load_scenario
from app.sync.snapshot import SnapshotError, read_snapshot
from builders import (Job, LocalQueue, Namespace, Node, Pod, PriorityClass, ResourceFlavor, WorkloadPriorityClass,
                      cpu_queue, snapshot_yaml)
from helpers import FakeClock, Verbs, answer_reasons, apply, make_state, pod_info, workload_info

CPU = 1000


def cluster(*objects, quota=8, nodes=2, preemption=None):
    """ClusterQueue cq (quota CPUs) behind LocalQueue q in team-a, nodes of 4 CPUs."""
    return make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
                      cpu_queue("cq", quota, **({"preemption": preemption} if preemption else {})),
                      LocalQueue("q", "team-a").cluster_queue("cq").obj(),
                      *(Node(f"n{i}").cpu("4").obj() for i in range(1, nodes + 1)), *objects)


def pods_of(job: Job, n: int, cpu="1", start=0) -> list[Pod]:
    return [Pod(f"{job.name}-{i}").of_job(job).cpu(cpu).created(i) for i in range(start, start + n)]


def planned(state) -> int:
    return state.tree.queues["cq"].usage.get(("default-flavor", "cpu"), 0)


# ---- the Job as Kueue reads it ------------------------------------------------------------------------------

@pytest.mark.parametrize("parallelism, completions, succeeded, count", [
    (4, None, 0, 4), (4, 4, 0, 4), (4, 2, 0, 2), (4, 10, 7, 3), (4, 10, 10, 0), (3, 10, 2, 3)])
def test_the_workload_count_is_parallelism_bounded_by_the_completions_left(parallelism, completions, succeeded, count):
    """podsCount = min(parallelism, completions), less the completions done (ReclaimablePods)."""
    job = Job("j").queue("q").parallelism(parallelism).succeeded(succeeded)
    if completions is not None:
        job.completions(completions)
    assert decode_job(job.obj()).count == count


@pytest.mark.parametrize("value", ["0", "4", "5", "two", "-1"])
def test_a_min_parallelism_kueue_refuses_refuses_the_jobs_pods(value):
    """Kueue's Job webhook: job-min-parallelism must be an integer in [1, parallelism)."""
    job = Job("j").queue("q").parallelism(4).min_parallelism(value)
    s = cluster(job.obj(), *(p.obj() for p in pods_of(job, 4)))
    verdict = decide(s, workload_info(s, "team-a", "j-0"))
    assert (verdict.admit, verdict.rule) == (False, "InvalidJob")
    assert "kueue.x-k8s.io/job-min-parallelism" in verdict.reason and "pod count 4" in verdict.reason


def test_a_job_of_the_wrong_shape_is_an_error():
    with pytest.raises(InvalidObject, match="spec.parallelism must be a non-negative 32-bit integer"):
        decode_job(Job("j").parallelism("four").obj())
    with pytest.raises(InvalidObject, match="spec.completions must be a non-negative 32-bit integer, got 2147483648"):
        decode_job(Job("j").completions(2**31).obj())


# ---- its pods join its queue --------------------------------------------------------------------------------

def test_the_pods_of_a_labelled_job_join_its_queue_and_its_workload_priority_class():
    job = Job("j").queue("q").label("kueue.x-k8s.io/priority-class", "prod").parallelism(2)
    s = cluster(WorkloadPriorityClass("prod", 1000).obj(), job.obj(), *(p.obj() for p in pods_of(job, 2)))
    p = pod_info(s, "team-a", "j-0")
    assert (p.queue_name, p.priority, group_of(p)) == ("q", 1000, WorkloadKey(JOB, "team-a", "j", job.uid))
    assert [m.name for m in s.queues.pending_pods("cq")] == ["j-0", "j-1"]


def test_a_job_without_the_label_or_pods_of_a_pod_group_keep_todays_rules():
    plain, grouped = Job("plain").parallelism(1), Job("grouped").queue("q")
    s = cluster(plain.obj(), grouped.obj(), Pod("plain-0").of_job(plain).cpu("1").obj(),
                Pod("grouped-0").of_job(grouped).cpu("1").label("kueue.x-k8s.io/pod-group-name", "g")
                .annotation("kueue.x-k8s.io/pod-group-total-count", "1").obj())
    assert (pod_info(s, "team-a", "plain-0").queue_name, pod_info(s, "team-a", "plain-0").job) == ("", "")
    grouped_pod = pod_info(s, "team-a", "grouped-0")
    assert (grouped_pod.queue_name, grouped_pod.job) == ("", "")


def test_labelling_the_job_later_brings_its_pods_in_and_unlabelling_takes_them_out():
    job = Job("j").parallelism(1)
    s = cluster(job.obj(), Pod("j-0").of_job(job).cpu("1").obj())
    assert pod_info(s, "team-a", "j-0").queue_name == ""
    apply(s, job.clone().queue("q").obj())
    assert pod_info(s, "team-a", "j-0").queue_name == "q" and list(s.queues.pending_pods("cq"))
    apply(s, job.obj())
    assert pod_info(s, "team-a", "j-0").queue_name == "" and not list(s.queues.pending_pods("cq"))


def test_a_pod_whose_job_the_watch_has_not_delivered_waits_instead_of_passing_unmanaged():
    """Jobs are a source (one is known): the Job of this pod may put it in a queue, so it must not pass
    unchecked; kube-scheduler is told to try it again after its backoff."""
    known, late = Job("known").queue("q"), Job("late").queue("q")
    s = cluster(known.obj())
    ext = Scheduler(s, SnapshotWriter(s))
    answer = Verbs(ext).filter(Pod("late-0").of_job(late).cpu("1").obj(), ["n1"])
    assert answer["NodeNames"] == [] and "Job team-a/late, the pod's owner, is not known" in answer["Error"]
    apply(s, late.obj(), Pod("late-0").of_job(late).cpu("1").obj())
    assert Verbs(ext).filter(Pod("late-0").of_job(late).cpu("1").obj(), ["n1"])["NodeNames"] == ["n1"]


# ---- all or nothing, and partial admission --------------------------------------------------------------------

def test_a_job_that_does_not_fit_admits_nothing_then_all_of_it_at_once():
    """quota 8, 5 CPUs in use: a parallelism-4 Job of 1-CPU pods does not fit, and none of its pods holds
    anything; once the running pod goes, the first filter admits all 4 (a node held for each)."""
    job = Job("j").queue("q").parallelism(4)
    run = Pod("run").queue("q").cpu("3").node("n1")
    s = cluster(run.obj(), Pod("run2").queue("q").cpu("2").node("n2").obj(), job.obj(),
                *(p.obj() for p in pods_of(job, 4)))
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    for p in pods_of(job, 4):
        answer = verbs.filter(p.obj(), ["n1", "n2"])
        assert answer["NodeNames"] == [] and "Job team-a/j (4 pending members, admitted whole or not at all)" in \
            answer_reasons(answer, ["n1", "n2"])["n1"]
    assert s.reservations == {} and s.holds == {}
    apply(s, run.clone().phase("Succeeded").obj())
    assert verbs.filter(pods_of(job, 1)[0].obj(), ["n1", "n2"])["NodeNames"]
    assert sorted(s.holds) == sorted(f"uid-team-a-j-{i}" for i in range(4))
    assert s.job_admissions[job.uid].size == 4


def test_partial_admission_admits_the_most_pods_that_fit_down_to_the_minimum():
    """kueue.x-k8s.io/job-min-parallelism: 3 of 4 fit, so 3 are admitted and the fourth stays pending."""
    job = Job("j").queue("q").parallelism(4).min_parallelism(2)
    s = cluster(Pod("run").queue("q").cpu("5").node("n1").obj(), job.obj(), *(p.obj() for p in pods_of(job, 4)),
                nodes=3)
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    assert verbs.filter(pods_of(job, 1)[0].obj(), ["n1", "n2", "n3"])["NodeNames"]
    assert sorted(s.holds) == [f"uid-team-a-j-{i}" for i in range(3)] and s.job_admissions[job.uid].size == 3
    last = verbs.filter(pods_of(job, 4)[3].obj(), ["n1", "n2", "n3"])
    assert last["NodeNames"] == [] and "admitted with 3 pod(s)" in answer_reasons(last, ["n1"])["n1"]


def test_partial_admission_below_the_minimum_admits_nothing():
    job = Job("j").queue("q").parallelism(4).min_parallelism(3)
    s = cluster(Pod("run").queue("q").cpu("6").node("n1").obj(), job.obj(), *(p.obj() for p in pods_of(job, 4)),
                nodes=3)
    answer = Verbs(Scheduler(s, SnapshotWriter(s))).filter(pods_of(job, 1)[0].obj(), ["n1", "n2", "n3"])
    assert answer["NodeNames"] == [] and "nor with fewer pods, down to kueue.x-k8s.io/job-min-parallelism=3" in \
        answer_reasons(answer, ["n1"])["n1"]
    assert s.holds == {} and s.job_admissions == {}


# ---- the workload keeps its quota for replacements ---------------------------------------------------------

async def admitted_job(parallelism=4, completions=None, quota=8, preemption=None):
    job = Job("j").queue("q").parallelism(parallelism)
    if completions is not None:
        job.completions(completions)
    s = cluster(job.obj(), *(p.obj() for p in pods_of(job, parallelism)), quota=quota, preemption=preemption)
    ext = Scheduler(s, SnapshotWriter(s))
    verbs = Verbs(ext)
    for p in pods_of(job, parallelism):
        [node] = verbs.filter(p.obj(), ["n1", "n2"])["NodeNames"]
        assert (await verbs.bind(p.obj(), node)) == {"Error": ""}
    return s, ext, verbs, job


async def test_a_failed_pods_quota_stays_with_the_job_for_its_replacement():
    s, ext, verbs, job = await admitted_job(quota=5)
    assert planned(s) == 4 * CPU
    apply(s, pods_of(job, 1)[0].node("n1").phase("Failed").obj())
    assert planned(s) == 4 * CPU and s.job_admissions[job.uid].spare == 1
    other = Pod("other").queue("q").cpu("2").created(50).obj()      # 1 CPU of quota is free, not 2
    apply(s, other)
    assert verbs.filter(other, ["n1", "n2"])["NodeNames"] == []
    replacement = Pod("j-new").of_job(job).cpu("1").created(60)
    apply(s, replacement.obj())
    passed = verbs.filter(replacement.obj(), ["n1", "n2"])["NodeNames"]
    assert passed and s.job_admissions[job.uid].spare == 0 and planned(s) == 4 * CPU
    assert (await verbs.bind(replacement.obj(), passed[0])) == {"Error": ""}
    assert planned(s) == 4 * CPU and s.job_admissions[job.uid].spare == 0


async def test_completions_done_free_their_share_and_the_rest_keep_theirs():
    """completions 6, parallelism 4: after 1 success the Job still runs 4 at once (the slot waits for its next
    pod); after 3, only 3 completions are left, so one slot's quota is freed (Kueue's ReclaimablePods:
    parallelism - remaining = 1): 1 pod runs and 2 slots wait for the last completions."""
    s, ext, verbs, job = await admitted_job(completions=6)
    apply(s, pods_of(job, 1)[0].node("n1").phase("Succeeded").obj(), job.clone().completions(6).succeeded(1).obj())
    assert planned(s) == 4 * CPU and s.job_admissions[job.uid].spare == 1
    apply(s, *(p.node("n1").phase("Succeeded").obj() for p in pods_of(job, 2, start=1)),
          job.clone().completions(6).succeeded(3).obj())
    assert s.job_admissions[job.uid].spare == 2 and planned(s) == 3 * CPU


async def test_a_preempted_job_is_one_candidate_and_its_workload_ends():
    """Preemption takes a running Job whole (as a pod group), and the Job's workload (its slots) ends."""
    s, ext, verbs, job = await admitted_job(quota=4, preemption={"withinClusterQueue": "LowerPriority"})
    urgent = Pod("urgent").queue("q").cpu("2").priority_class("high").created(100).obj()
    apply(s, PriorityClass("high", 1000).obj(), urgent)
    answer = verbs.filter(urgent, ["n1", "n2"])
    assert answer["NodeNames"] == [] and "preempting" in " ".join(answer_reasons(answer, ["n1", "n2"]).values())
    assert sorted(s.holds["uid-team-a-urgent"].victims) == sorted(f"uid-team-a-j-{i}" for i in range(4))
    assert job.uid not in s.job_admissions


def test_a_restarted_quotient_takes_a_running_job_as_an_admitted_workload_of_what_runs():
    """After a restart a Job whose pods run is admitted with those pods (its size at admission is kept nowhere
    Quotient reads; guessing its count could charge beyond the quota): one that then fails keeps its slot."""
    job = Job("j").queue("q").parallelism(3)
    s = cluster(job.obj(), *(p.node("n1").obj() for p in pods_of(job, 2)),
                Pod("j-2").of_job(job).cpu("1").node("n2").phase("Failed").obj())
    rec = s.job_admissions[job.uid]
    assert (rec.size, rec.spare, rec.partial, planned(s)) == (2, 0, True, 2 * CPU)
    apply(s, pods_of(job, 1)[0].node("n1").phase("Failed").obj())
    assert (rec.spare, planned(s)) == (1, 2 * CPU)


def test_a_huge_job_costs_no_time_or_quota_beyond_what_runs():
    """parallelism 2^31 - 1 (a valid int32): a relist neither charges nor loops per pod of it."""
    job = Job("j").queue("q").parallelism(2**31 - 1)
    s = cluster(job.obj(), Pod("j-0").of_job(job).cpu("1").node("n1").obj())
    s.begin_bulk()
    s.end_bulk()
    assert (s.job_admissions[job.uid].size, planned(s)) == (1, 1 * CPU)


def test_a_pod_of_another_kind_named_job_keeps_todays_rules():
    """Volcano's batch.volcano.sh Job is not a batch/v1 Job: its pod is neither held as JobNotSeen nor inherits."""
    s = cluster(Job("known").queue("q").obj())
    pod = Pod("v-0").owner("Job", "v", "uid-volcano", api_version="batch.volcano.sh/v1alpha1").cpu("1").obj()
    apply(s, pod)
    assert Verbs(Scheduler(s, SnapshotWriter(s))).filter(pod, ["n1"])["NodeNames"] == ["n1"]


# ---- the simulator's Job controller (tests/scenarios/job-*.yaml) -------------------------------------------

OWN = Path(__file__).parent / "scenarios"


def run(name: str, until: float | None = None):
    """The scenario, its expectation met; or, with until, run on to then (the expectation not checked)."""
    scenario = load_scenario(str(OWN / name))
    if until is not None:
        scenario.expectation.until = until
    out = asyncio.run(simulate(scenario))
    if until is None:
        assert differences(scenario, out) == []
    return out


def bound_at(out, pod: str) -> float:
    return next(float(line.split("s", 1)[0]) for line in out.timeline
                if line.split()[1] == "bound" and line.split()[2] == pod)


def test_a_job_is_bound_whole_at_one_instant_only_once_it_fits():
    out = run("job-all-or-nothing.yaml")
    times = {bound_at(out, f"team-a/train-{i}") for i in range(4)}
    finished = next(float(line.split("s", 1)[0]) for line in out.timeline if "finished   team-a/blocker" in line)
    assert len(times) == 1 and times.pop() >= finished


def test_the_job_controller_makes_the_next_pods_and_they_keep_the_jobs_quota():
    assert run("job-completions-keep-quota.yaml")      # at 15 s: batch-2 and -3 run, greedy waits
    out = run("job-completions-keep-quota.yaml", until=60.0)
    created = [line.split()[2] for line in out.timeline if line.split()[1] == "created"]
    assert created == ["team-a/batch-2", "team-a/batch-3"]
    last = max(float(line.split("s", 1)[0]) for line in out.timeline if "finished   team-a/batch-3" in line)
    assert bound_at(out, "team-a/greedy") >= last      # not in the quota batch-0 and -1 left behind



# ---- waitForPodsReady and the Job's workload agree ------------------------------------------------------------

async def test_wait_for_pods_ready_times_out_a_job_whole_and_its_workload_ends():
    """seed 003 / Kueue's waitForPodsReady: the Job is one workload; one pod never Ready evicts all of them,
    and the workload's record ends, so the pods its controller makes again are admitted whole anew."""
    clock = FakeClock()
    job = Job("j").queue("q").parallelism(2)
    s = make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), cpu_queue("cq", 8),
                   LocalQueue("q", "team-a").cluster_queue("cq").obj(), Node("n1").cpu("4").obj(), job.obj(),
                   *(p.obj() for p in pods_of(job, 2)),
                   config=Configuration(wait_for_pods_ready=WaitForPodsReady(timeout=60.0)), clock=clock)
    ext = Scheduler(s, SnapshotWriter(s))
    verbs = Verbs(ext)
    for p in pods_of(job, 2):
        assert (await verbs.bind(p.obj(), verbs.filter(p.obj(), ["n1"])["NodeNames"][0])) == {"Error": ""}
    apply(s, pods_of(job, 1)[0].node("n1").ready().obj())            # j-1 never becomes Ready
    assert s.readiness[WorkloadKey(JOB, "team-a", "j", job.uid)] is not None
    clock.advance(61)
    evicted = ext.plan()
    assert sorted(e.pod.name for e in evicted) == ["j-0", "j-1"]
    assert {e.reason for e in evicted} == {"PodsReadyTimeout"} and job.uid not in s.job_admissions


def test_a_snapshot_job_naming_no_queue_is_an_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(snapshot_yaml(Namespace("team-a").obj(), Job("j").queue("ghost").obj()))
    with pytest.raises(SnapshotError, match="label kueue.x-k8s.io/queue-name=ghost names no LocalQueue"):
        read_snapshot(str(path))
