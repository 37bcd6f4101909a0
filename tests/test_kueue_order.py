"""Issue 34, decisions 3-5: who goes next, as Kueue's own tests decide it.

Each test names the Kueue test it translates; each has a scenario in tests/scenarios/ run through the simulator,
whose kube-scheduler requeues a refused pod as v1.36 does (app/sim/queue.py: an extender Error backs off 1-10 s;
FailedNodes with an in-tree rejector, such as a tainted control-plane node's TaintToleration, parks the pod until
an event that rejector's hint takes, or 5 minutes).
"""
from __future__ import annotations

from pathlib import Path

import yaml

from app.sim.run import differences, simulate
from app.sim.scenario import load_scenario
from builders import extender_args

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
