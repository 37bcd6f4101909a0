"""Issue 34, decisions 3-5: who goes next, as Kueue's own tests decide it.

Each test names the Kueue test it translates; each has a scenario in tests/scenarios/ run through the simulator,
whose kube-scheduler requeues a refused pod as v1.36 does (app/sim/queue.py: an extender Error backs off 1-10 s;
FailedNodes with an in-tree rejector, such as a tainted control-plane node's TaintToleration, parks the pod until
an event that rejector's hint takes, or 5 minutes).
"""
from __future__ import annotations

from pathlib import Path

import yaml

from app.config import decode_configuration
from app.sim.run import differences, simulate
from app.sim.scenario import load_scenario
from builders import BASE_TIME, Pod, extender_args
from helpers import FakeClock, Verbs, uid
from helpers import refused as refused_on
from test_readiness import Recorder, admit, watch

OWN = Path(__file__).resolve().parent / "scenarios"


async def run(name: str):
    scenario = load_scenario(str(OWN / f"{name}.yaml"))
    out = await simulate(scenario)
    return scenario, out


def bound_at(out, pod: str) -> float | None:
    return next((float(line.split("s", 1)[0]) for line in out.timeline if "bound" in line and f" {pod} ->" in line),
                None)


# ---- decision 4: the queue's head starts as soon as quota frees --------------------------------------------

async def test_the_next_job_starts_when_the_running_one_completes():
    """Kueue test/integration/singlecluster/controller/jobs/job/job_controller_test.go, "Should schedule jobs as
    they fit in their ClusterQueue", as Kueue writes it: Jobs, prod-cq with no preemption policy. prod-job2
    starts within kube-scheduler's backoff of prod-job1 completing (60s)."""
    scenario, out = await run("job-next-starts-when-quota-frees")
    assert differences(scenario, out) == []
    assert 60 <= bound_at(out, "team-a/prod-job2-0") <= 71, out.timeline


async def test_the_queue_head_is_retried_whatever_its_cluster_queues_policies():
    """The same Kueue test with prod-cq given a preemption policy (withinClusterQueue LowerPriority) and plain
    pods: no victim exists (equal priorities), and a tainted control-plane node fails kube-scheduler's own
    filters. The head used to be answered FailedNodes and parked by TaintToleration until the 5-minute flush;
    it is a retry (QueueHead) and starts within 10 s of the quota freeing at 60s."""
    scenario, out = await run("queue-head-retried-whatever-policy")
    assert differences(scenario, out) == []
    assert 60 <= bound_at(out, "team-a/prod-2") <= 71, out.timeline
    assert any("team-a/prod-2" in line and "QueueHead" in line and "SchedulerError" in line
               for line in out.timeline), out.timeline


# ---- decision 5: a pod group is one workload in the cohort's order --------------------------------------------

def two_groups() -> tuple[str, dict[str, dict]]:
    """The scenario's quota tree and nodes, and its ten pending pods (two groups of 5 x 1 CPU) with uids, as
    YAML for a snapshot and as wire objects by name."""
    text = (OWN / "gang-cohort-borrowers-priority.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(text) if d and d["kind"] not in ("Pod", "Expectation")]
    pods = {}
    for group, priority in (("a1", 2), ("b1", 1)):
        for i in range(5):
            pods[f"{group}-{i}"] = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{group}-{i}", "namespace": "default", "uid": f"uid-{group}-{i}",
                             "creationTimestamp": "2026-01-01T00:00:00Z",
                             "labels": {"kueue.x-k8s.io/queue-name": f"tas-lq-{group[0]}",
                                        "kueue.x-k8s.io/pod-group-name": group},
                             "annotations": {"kueue.x-k8s.io/pod-group-total-count": "5"}},
                "spec": {"priority": priority,
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    return yaml.safe_dump_all(docs + list(pods.values())), pods


async def test_of_two_borrowing_groups_the_first_asked_is_not_held_back_by_the_others_members(load_extender, api):
    """Kueue pkg/scheduler/scheduler_tas_test.go, TestScheduleForTASCohorts, "two workloads considered; there is
    enough space only for the first" (without its topology): a1 (priority 2) and b1 (priority 1), 5 pods of 1
    CPU each, in two ClusterQueues of 4 CPUs nominal in one cohort; each must borrow, only one fits. a1 is
    admitted. It used to be refused "pending pods within their own nominal quota come first", counting b1's
    members one by one as within nominal (and b1 likewise: a deadlock)."""
    text, pods = two_groups()
    ext = load_extender(text)
    nodes = ["x1", "y1"]
    async with api(ext) as client:
        first = (await client.post("/filter", json=extender_args(pods["a1-0"], nodes))).json()
        other = (await client.post("/filter", json=extender_args(pods["b1-0"], nodes))).json()
    assert first["NodeNames"] and not first["Error"], first
    assert all(f"uid-a1-{i}" in ext.state.holds for i in range(5))
    assert other["NodeNames"] == [] and "within their own nominal quota" not in other["Error"], other
    assert not any(f"uid-b1-{i}" in ext.state.holds for i in range(5))


async def test_two_borrowing_groups_in_one_cohort_scenario():
    """The scenario of the Kueue case: kube-scheduler's active queue brings a1's members first (priority, then
    age), a1 runs and b1 waits, no eviction. It used to be the other way round: a1's members were refused for
    b1's members "within their own nominal quota", then b1 went while a1's members backed off."""
    scenario, out = await run("gang-cohort-borrowers-priority")
    assert differences(scenario, out) == []


# ---- decision 3: blockAdmission admits the workload that waits longest next -----------------------------------

def two_queues(clock):
    """The podsready test's prod-cq and dev-cq (cohort all, 5 CPUs each) on one 16-CPU node; waitForPodsReady
    with blockAdmission, timeout 10s, timestamp Eviction, backoffBaseSeconds 1."""
    text = (OWN / "ready-block-admission-next-in-line.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(text) if d and d["kind"] not in ("Pod", "Expectation", "Configuration")]
    config = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "Configuration")
    return yaml.safe_dump_all(docs), decode_configuration({"waitForPodsReady": config["waitForPodsReady"]})


def ns_pod(name: str, queue: str, at: float, owner: bool = False) -> dict:
    pod = Pod(name, "podsready").queue(queue).cpu("2").created(at)
    return (pod.owner("ReplicaSet", "prod", "rs-prod") if owner else pod).wire()


async def test_block_admission_admits_the_workload_waiting_longest_next(build_extender):
    """Kueue test/integration/singlecluster/scheduler/podsready/scheduler_test.go, "Should unblock admission of new
    workloads in other ClusterQueues once the admitted workload exceeds timeout" (Tiny PodsReady timeout): prod is
    admitted, dev (another ClusterQueue, created later) waits; prod times out and is evicted; dev is admitted
    next, and prod's requeued pod waits. Its place is its eviction time (timestamp Eviction), behind dev, so it is
    refused while kube-scheduler brings dev back from its backoff, though it asks first (it used to be admitted);
    dev then passes, and prod-r1 waits for dev to be Ready."""
    clock = FakeClock(BASE_TIME + 100)
    text, config = two_queues(clock)
    ext = build_extender(text, config=config, clock=clock, writer=lambda s: Recorder(s))
    verbs = Verbs(ext)
    prod, dev = ns_pod("prod", "prod-queue", 0, owner=True), ns_pod("dev", "dev-queue", 1)
    await admit(verbs, prod, ["node-1"])
    for backoff in (1, 2, 4, 8):               # kube-scheduler tries dev at 0, 1, 3 and 7s; next at 15s
        assert "blockAdmission" in refused_on(verbs.filter(dev, ["node-1"]), ["node-1"])
        if backoff < 8:
            clock.advance(backoff)
    clock.advance(3)                                                                     # 10s: prod times out
    assert await ext.reconcile() == 1
    prod_r1 = ns_pod("prod-r1", "prod-queue", clock.now - BASE_TIME, owner=True)
    watch(ext, prod_r1)
    clock.advance(1.5)                          # 11.5s: prod-r1's 1 s backoff is over; dev is due at 15s
    why = refused_on(verbs.filter(prod_r1, ["node-1"]), ["node-1"])
    assert "pod podsready/dev of ClusterQueue dev-cq comes before" in why and "admitted next" in why, why
    assert uid(prod_r1) not in ext.state.reservations
    clock.advance(3.5)                          # 15s: dev is tried again
    await admit(verbs, dev, ["node-1"])
    assert "workload podsready/dev is admitted and not all Ready" in refused_on(verbs.filter(prod_r1, ["node-1"]),
                                                                               ["node-1"])


async def test_a_workload_kube_scheduler_no_longer_brings_keeps_no_place(build_extender):
    """The workload that goes next keeps its place only while kube-scheduler brings it (after its backoff, 10 s at
    most): one not tried for longer (parked, or gone from kube-scheduler's queue) does not hold the others back."""
    clock = FakeClock(BASE_TIME + 100)
    text, config = two_queues(clock)
    ext = build_extender(text, config=config, clock=clock, writer=lambda s: Recorder(s))
    verbs = Verbs(ext)
    prod, dev = ns_pod("prod", "prod-queue", 0, owner=True), ns_pod("dev", "dev-queue", 1)
    await admit(verbs, prod, ["node-1"])
    assert "blockAdmission" in refused_on(verbs.filter(dev, ["node-1"]), ["node-1"])      # due again in 1 s
    clock.advance(10)
    assert await ext.reconcile() == 1
    prod_r1 = ns_pod("prod-r1", "prod-queue", clock.now - BASE_TIME, owner=True)
    watch(ext, prod_r1)
    clock.advance(1.5)                             # dev was due 10.5 s ago and has not come: it keeps nothing
    await admit(verbs, prod_r1, ["node-1"])


async def test_block_admission_scenario():
    """The scenario of the Kueue case: dev admitted at its next try after prod's eviction, prod-r1 pending."""
    scenario, out = await run("ready-block-admission-next-in-line")
    assert differences(scenario, out) == []
