"""Issue 34, decisions 3-5: who goes next, as Kueue's own tests decide it.

Each test names the Kueue test it translates; each has a scenario in tests/scenarios/ run through the simulator,
whose kube-scheduler requeues a refused pod as v1.36 does (app/sim/queue.py: an extender Error backs off 1-10 s;
FailedNodes with an in-tree rejector, such as a tainted control-plane node's TaintToleration, parks the pod until
an event that rejector's hint takes, or 5 minutes).
"""
from __future__ import annotations

from pathlib import Path

from app.sim.run import differences, simulate
from app.sim.scenario import load_scenario

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
