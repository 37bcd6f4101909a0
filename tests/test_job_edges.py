"""The edges of a Job's workload (issue 10, part 3), found by review: the workload's record and its spare slots
never outlive its admission, its queue or its preemption, and the planned usage always equals what the
admitted pods, the reservations and the spare slots charge (a randomized sequence checks it)."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from app.act.writer import SnapshotWriter, WriteError
from app.config import Configuration, WaitForPodsReady
from app.scheduler.scheduler import Scheduler
from app.objects.job import decode_job
from app.sync.apiserver import make_api_client
from builders import Job, LocalQueue, Namespace, Node, Pod, PriorityClass, ResourceFlavor, cpu_queue
from fakeapi import FakeApiServer
from helpers import FakeClock, Verbs, answer_reasons, apply, delete, make_state, pod_info
from live import Running, until
from test_jobs import CPU, admitted_job, cluster, planned, pods_of

LOWER = {"withinClusterQueue": "LowerPriority"}


def expected_usage(s) -> tuple[dict, dict]:
    """What the tree's planned (usage) and running (bound) totals must be, recomputed from the records."""
    planned_, bound = {q: Counter() for q in s.tree.queues}, {q: Counter() for q in s.tree.queues}
    for uid, charge in s.admitted.items():
        if charge.cluster_queue in planned_:
            bound[charge.cluster_queue].update(charge.usage)
            if uid not in s.going:
                planned_[charge.cluster_queue].update(charge.usage)
    for r in s.reservations.values():
        if r.charge.cluster_queue in planned_:
            planned_[r.charge.cluster_queue].update(r.charge.usage)
    for rec in s.job_admissions.values():
        if rec.charge.cluster_queue in planned_:
            planned_[rec.charge.cluster_queue].update({fr: v * rec.spare for fr, v in rec.charge.usage.items()})
    return planned_, bound


def drift(s) -> list[str]:
    out = []
    planned_, bound = expected_usage(s)
    for q, node in s.tree.queues.items():
        for what, got, want in (("usage", node.usage, planned_[q]), ("bound", node.bound, bound[q])):
            if {k: v for k, v in got.items() if v} != {k: v for k, v in want.items() if v}:
                out.append(f"{q} {what} {dict(got)} != {dict(want)}")
    for uid, rec in s.job_admissions.items():
        job = s.jobs[uid]
        holding = sum(1 for u in s.store.owned.get(uid, ()) if u in s.admitted or u in s.reservations)
        if rec.spare != max(0, min(rec.size, job.count) - holding):
            out.append(f"Job {job.key}: spare {rec.spare}, size {rec.size}, count {job.count}, holding {holding}")
    return out


# ---- the record ends with its queue, its preemption, its lapsed holds ----------------------------------------

async def test_unlabelling_a_running_job_ends_its_workload_and_frees_its_slots():
    s, ext, verbs, job = await admitted_job()
    apply(s, pods_of(job, 1)[0].node("n1").phase("Failed").obj())
    apply(s, Job("j").parallelism(4).obj())
    assert pod_info(s, "team-a", "j-1").queue_name == "" and job.uid not in s.job_admissions and planned(s) == 0
    assert not drift(s)


async def test_a_job_moved_to_another_queue_is_admitted_there_anew_never_over_its_quota():
    """Kueue forbids moving a running Job; Quotient ends the workload, so a replacement is decided in the new
    ClusterQueue, whose quota is full: refused, and cq2 stays within its 4 CPUs."""
    s, ext, verbs, job = await admitted_job()
    apply(s, cpu_queue("cq2", 4), LocalQueue("q2", "team-a").cluster_queue("cq2").obj(),
          pods_of(job, 1)[0].node("n1").phase("Failed").obj(), Job("j").queue("q2").parallelism(4).obj())
    assert job.uid not in s.job_admissions
    other = Pod("other").queue("q2").cpu("1").created(50).obj()
    apply(s, other)
    assert (await verbs.bind(other, verbs.filter(other, ["n1", "n2"])["NodeNames"][0])) == {"Error": ""}
    rep = Pod("j-new").of_job(job).cpu("1").created(60)
    apply(s, rep.obj())
    assert verbs.filter(rep.obj(), ["n1", "n2"])["NodeNames"] == []
    assert s.tree.queues["cq2"].bound[("default-flavor", "cpu")] == 4 * CPU


async def test_kube_schedulers_preemption_of_a_job_ends_its_workload():
    """kube-scheduler evicts the victims Quotient answers; the Job's pods made again must not pass as JobSlot."""
    job = Job("j").queue("q").parallelism(2)
    s = cluster(job.obj(), *(p.obj() for p in pods_of(job, 2, cpu="2")), quota=4, nodes=1, preemption=LOWER)
    apply(s, Node("n1").cpu("8").obj())
    verbs = Verbs(Scheduler(s, SnapshotWriter(s)))
    for p in pods_of(job, 2, cpu="2"):
        assert (await verbs.bind(p.obj(), verbs.filter(p.obj(), ["n1"])["NodeNames"][0])) == {"Error": ""}
    urgent = Pod("urgent").queue("q").cpu("4").priority_class("high").created(100)
    apply(s, PriorityClass("high", 1000).obj(), urgent.obj())
    answer = verbs.preempt(urgent.obj(), {"n1": ["uid-team-a-j-0", "uid-team-a-j-1"]})
    assert answer["NodeNameToMetaVictims"] and job.uid not in s.job_admissions
    for p in pods_of(job, 2, cpu="2"):
        delete(s, p.node("n1").obj())
    back = Pod("j-r1").of_job(job).cpu("2").created(101)
    apply(s, back.obj())
    assert verbs.filter(back.obj(), ["n1"])["NodeNames"] == [] and not drift(s)


async def test_a_preempted_jobs_reserved_replacement_loses_its_reservation():
    s, ext, verbs, job = await admitted_job(quota=4, preemption=LOWER)
    apply(s, pods_of(job, 1)[0].node("n1").phase("Failed").obj())
    rep = Pod("j-new").of_job(job).cpu("1").created(60)
    apply(s, rep.obj())
    passed = verbs.filter(rep.obj(), ["n1", "n2"])["NodeNames"]
    assert passed and "uid-team-a-j-new" in s.reservations
    urgent = Pod("urgent").queue("q").cpu("3").priority_class("high").created(100).obj()
    apply(s, PriorityClass("high", 1000).obj(), urgent)
    verbs.filter(urgent, ["n1", "n2"])
    assert "uid-team-a-urgent" in s.holds and job.uid not in s.job_admissions
    assert "uid-team-a-j-new" not in s.reservations
    answer = await verbs.bind(rep.obj(), passed[0])
    assert "holds no reservation" in answer["Error"]


async def test_preempting_a_job_counts_its_spare_slots_as_freed():
    s, ext, verbs, job = await admitted_job(quota=4, preemption=LOWER)
    apply(s, pods_of(job, 1)[0].node("n1").phase("Failed").obj())
    assert s.job_admissions[job.uid].spare == 1 and planned(s) == 4 * CPU
    urgent = Pod("urgent").queue("q").cpu("4").priority_class("high").created(100).obj()
    apply(s, PriorityClass("high", 1000).obj(), urgent)
    answer = verbs.filter(urgent, ["n1", "n2"])
    assert "uid-team-a-urgent" in s.holds, answer_reasons(answer, ["n1", "n2"])


async def test_holds_that_lapse_before_any_pod_binds_end_the_workload():
    class NoEvict(SnapshotWriter):
        async def evict(self, pod, reason, message):       # the victim never leaves (a PDB, an API error)
            pass

    clock = FakeClock()
    job = Job("j").queue("q").parallelism(2)
    s = make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
                   cpu_queue("cq", 4, preemption=LOWER), LocalQueue("q", "team-a").cluster_queue("cq").obj(),
                   PriorityClass("high", 1000).obj(), Node("n1").cpu("4").obj(), Node("n2").cpu("4").obj(),
                   Pod("low").queue("q").cpu("4").node("n1").obj(), job.obj(),
                   *(p.priority_class("high").obj() for p in pods_of(job, 2, cpu="2")), clock=clock)
    verbs = Verbs(Scheduler(s, NoEvict(s)))
    verbs.filter(pods_of(job, 1, cpu="2")[0].priority_class("high").obj(), ["n1", "n2"])
    assert s.holds and job.uid in s.job_admissions
    clock.advance(61)
    s.expire_lapsed()
    assert job.uid not in s.job_admissions and planned(s) == 4 * CPU and not drift(s)


async def test_a_relist_brings_the_slots_up_to_date_and_does_not_readmit_a_preempted_job():
    s, ext, verbs, job = await admitted_job(quota=4, preemption=LOWER)
    s.begin_bulk()
    apply(s, pods_of(job, 1)[0].node("n1").phase("Failed").obj())
    s.end_bulk()
    assert s.job_admissions[job.uid].spare == 1 and not drift(s)
    urgent = Pod("urgent").queue("q").cpu("2").priority_class("high").created(100).obj()
    apply(s, PriorityClass("high", 1000).obj(), urgent)
    verbs.filter(urgent, ["n1", "n2"])
    assert job.uid not in s.job_admissions
    s.begin_bulk()
    s.end_bulk()
    assert job.uid not in s.job_admissions


async def test_a_job_scaled_up_is_admitted_anew():
    s, ext, verbs, job = await admitted_job(parallelism=2)
    apply(s, Job("j").queue("q").parallelism(4).obj(), *(p.obj() for p in pods_of(job, 2, start=2)))
    assert job.uid not in s.job_admissions
    assert verbs.filter(pods_of(job, 1, start=2)[0].obj(), ["n1", "n2"])["NodeNames"]


def test_a_work_queue_job_whose_pod_succeeded_needs_fewer_pods():
    """Kueue's ReclaimablePods: remaining = Deref(completions, parallelism) - succeeded."""
    assert decode_job(Job("j").queue("q").parallelism(4).succeeded(1).obj()).count == 3


async def test_a_partially_admitted_job_all_ready_is_not_timed_out():
    """Kueue sets the Job's parallelism to the admitted count, so waitForPodsReady waits for those pods only."""
    clock = FakeClock()
    job = Job("j").queue("q").parallelism(4).min_parallelism(2)
    s = make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), cpu_queue("cq", 8),
                   LocalQueue("q", "team-a").cluster_queue("cq").obj(),
                   *(Node(f"n{i}").cpu("4").obj() for i in range(1, 4)),
                   Pod("run").queue("q").cpu("5").node("n1").ready().obj(), job.obj(),
                   *(p.obj() for p in pods_of(job, 4)),
                   config=Configuration(wait_for_pods_ready=WaitForPodsReady(timeout=300.0)), clock=clock)
    ext = Scheduler(s, SnapshotWriter(s))
    verbs = Verbs(ext)
    for p in pods_of(job, 3):
        [node] = verbs.filter(p.obj(), ["n1", "n2", "n3"])["NodeNames"]
        assert (await verbs.bind(p.obj(), node)) == {"Error": ""}
        apply(s, p.node(node).ready().obj())
    assert s.job_admissions[job.uid].size == 3
    clock.advance(301)
    assert ext.plan() == []


async def test_live_jobs_are_a_source_even_when_none_exists_at_start(tmp_path):
    """The Job list is applied (empty): the first queued Job's pod, delivered before its Job, waits."""
    async with FakeApiServer(bookmark_interval=0.3) as api:
        for obj in (Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), cpu_queue("cq", 8),
                    LocalQueue("q", "team-a").cluster_queue("cq").obj(), Node("n1").cpu("4").obj()):
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.health.ready, what="initial list")
                assert source.state.jobs_listed and not source.state.jobs
                late = Job("first").queue("q")
                api.apply(Pod("first-0").of_job(late).cpu("1").obj())
                await until(lambda: source.state.store.pod_by_key("team-a/first-0") is not None, what="the pod")
                answer = Verbs(Scheduler(source.state, SnapshotWriter(source.state))).filter(
                    Pod("first-0").of_job(late).cpu("1").obj(), ["n1"])
                assert answer["NodeNames"] == [] and "is not known to Quotient yet" in answer["Error"]
        finally:
            await client.close()


# ---- a randomized sequence: the planned usage never drifts, a bind never goes over quota ----------------------

class Flaky(SnapshotWriter):
    """A Binding write that fails one time in five (bindings.undo takes the charge back)."""

    def __init__(self, state, rng):
        super().__init__(state)
        self.rng = rng

    async def bind(self, pod, node):
        if self.rng.random() < 0.2:
            raise WriteError("flaky")
        await super().bind(pod, node)


OPS = ("job", "filter", "filter", "filter", "fail", "succeed", "delete", "expire", "requeue", "status", "replace",
       "urgent", "terminating", "unlabel", "deljob", "relist", "reconcile")


@pytest.mark.parametrize("seed", range(150))
async def test_random_job_lives_keep_the_accounts_and_the_quota(seed):
    rng, clock = random.Random(seed), FakeClock()
    s = make_state(Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(),
                   cpu_queue("cq", 6, preemption=LOWER),
                   LocalQueue("q", "team-a").cluster_queue("cq").obj(), PriorityClass("high", 1000).obj(),
                   *(Node(f"n{i}").cpu("4").obj() for i in range(1, 4)), clock=clock)
    ext = Scheduler(s, Flaky(s, rng))
    verbs = Verbs(ext)
    jobs: dict[str, dict] = {}
    pods: dict[str, Pod] = {}
    made = [0]

    def new_pod(name: str) -> None:
        made[0] += 1
        pod = Pod(f"{name}-p{made[0]}").of_job(jobs[name]["b"]).cpu("1").created(made[0])
        pods[f"{name}-p{made[0]}"] = pod
        apply(s, pod.obj())

    def known(kind_running: bool | None = None) -> list[str]:
        out = []
        for k in pods:
            p = s.store.pod_by_key(f"team-a/{k}")
            if p is not None and not p.terminal and (kind_running is None or bool(p.node_name) == kind_running):
                out.append(k)
        return out

    for _ in range(60):
        op = rng.choice(OPS)
        if op == "job" and len(jobs) < 4:
            name, par = f"j{len(jobs)}", rng.randint(1, 3)
            b = Job(name).queue("q").parallelism(par)
            comp = rng.choice([None, par, par + 2])
            if comp is not None:
                b.completions(comp)
            if par > 1 and rng.random() < 0.3:
                b.min_parallelism(1)
            jobs[name] = {"b": b, "succ": 0, "comp": comp, "par": par}
            apply(s, b.obj())
            for _ in range(par):
                new_pod(name)
        elif op == "filter" and known(False):
            k = rng.choice(known(False))
            answer = verbs.filter(pods[k].obj(), ["n1", "n2", "n3"])
            if answer["NodeNames"]:
                cq = s.tree.queues["cq"]
                before = cq.bound.get(("default-flavor", "cpu"), 0)
                await verbs.bind(pods[k].obj(), rng.choice(answer["NodeNames"]))
                after = cq.bound.get(("default-flavor", "cpu"), 0)
                assert after <= before or after <= cq.quotas[("default-flavor", "cpu")].nominal, (seed, "over quota")
                node = s.store.pod_by_key(f"team-a/{k}").node_name
                if node:
                    pods[k] = pods[k].node(node)
        elif op in ("fail", "succeed", "delete", "terminating") and known(True):
            k = rng.choice(known(True))
            if op == "delete":
                delete(s, pods.pop(k).obj())
            elif op == "terminating":
                obj = pods[k].obj()
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                apply(s, obj)
            else:
                apply(s, pods[k].phase("Failed" if op == "fail" else "Succeeded").obj())
                if op == "succeed" and k.split("-")[0] in jobs:
                    jobs[k.split("-")[0]]["succ"] += 1
        elif op == "status":
            for j in jobs.values():
                apply(s, j["b"].succeeded(j["succ"]).obj())
        elif op == "replace":
            for name, j in jobs.items():
                active = sum(1 for k in known() if k.startswith(name + "-"))
                want = j["par"] if j["comp"] is None else min(j["par"], j["comp"] - j["succ"])
                for _ in range(max(0, (0 if j["comp"] is None and j["succ"] else want) - active)):
                    new_pod(name)
        elif op == "expire":
            clock.advance(rng.choice([5, 31, 61]))
            s.expire_lapsed()
            ext.plan()
        elif op == "urgent":
            made[0] += 1
            pods[f"urgent{made[0]}"] = Pod(f"urgent{made[0]}").queue("q").cpu("2").priority_class("high") \
                .created(made[0])
            apply(s, pods[f"urgent{made[0]}"].obj())
        elif op == "unlabel" and jobs:
            labels = jobs[rng.choice(list(jobs))]["b"]._obj["metadata"]["labels"]
            if labels.pop("kueue.x-k8s.io/queue-name", None) is None:
                labels["kueue.x-k8s.io/queue-name"] = "q"
            apply(s, *(j["b"].obj() for j in jobs.values()))
        elif op == "deljob" and jobs:
            delete(s, jobs[rng.choice(list(jobs))]["b"].obj())
        elif op == "relist":
            s.begin_bulk()
            s.end_bulk()
        elif op == "reconcile":
            await ext.reconcile()
        elif op == "requeue":
            apply(s, cpu_queue("cq", rng.choice([5, 6, 7]), preemption=LOWER))
        assert not drift(s), (seed, op)
