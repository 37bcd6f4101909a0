"""Kueue's local_queue_* metrics as quotient_local_queue_*: names, label names and types of Kueue's
pkg/metrics/metrics.go (LocalQueuePendingWorkloads {name, namespace, status}, LocalQueueReservingActiveWorkloads,
LocalQueueAdmittedActiveWorkloads, LocalQueueQuotaReservedWorkloadsTotal and LocalQueueAdmittedWorkloadsTotal
{name, namespace, priority_class}, LocalQueueEvictedWorkloadsTotal {name, namespace, reason, underlying_cause,
priority_class}, LocalQueueResourceReservations / LocalQueueResourceUsage {name, namespace, flavor, resource},
LocalQueueByStatus {name, namespace, active}), a Job's pods or a pod group's members counted as one workload."""
from __future__ import annotations

import yaml
from prometheus_client.parser import text_string_to_metric_families

from builders import ClusterQueue, FlavorQuotas, Job, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import FakeClock, apply
from test_debug import bind_for, filter_for

T0 = 1_800_000_000.0
TRAIN = Job("train").queue("lq").parallelism(2)


def snapshot() -> str:
    """cq (8 CPUs) behind lq and held (Hold); Job train (2 pods of 1 CPU) and lone p (1 CPU) pending in lq, big
    (9 CPUs, never fits) too; h in held."""
    docs = [Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
            LocalQueue("held", "team-a").cluster_queue("cq").stop_policy("Hold").obj(),
            TRAIN.obj(), *(Pod(f"train-{i}").of_job(TRAIN).cpu("1").created(i).obj() for i in range(2)),
            Pod("p").queue("lq").cpu("1").priority_class("batch").created(3).obj(),
            Pod("big").queue("lq").cpu("9").created(4).obj(), Pod("h").queue("held").cpu("1").obj(),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"}, "value": 1}]
    return yaml.safe_dump_all(docs)


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(found: dict, family: str, sample_name: str | None = None, /, **labels) -> float | None:
    """The value of one sample of a family (sample_name: its _total, _bucket, ...), None when absent."""
    for s in found[family].samples:
        if s.name == (sample_name or family) and s.labels == labels:
            return s.value
    return None


async def test_local_queue_metrics_count_workloads_as_kueue_does(build_extender, api):
    """A 2-pod Job is one workload reserved, admitted and evicted once; HoldAndDrain's evictions are counted with
    reason LocalQueueStopped; gauges follow the state; every family has Kueue's type and label names."""
    ext = build_extender(snapshot(), clock=FakeClock(T0))
    lq = {"name": "lq", "namespace": "team-a"}
    async with api(ext) as c:
        before = families((await c.get("/metrics")).text)
        for key in ("team-a/train-0", "team-a/train-1", "team-a/p", "team-a/big"):
            await c.post("/filter", json=filter_for(ext, key, ["n1"]))
        reserved = families((await c.get("/metrics")).text)
        for key in ("team-a/train-0", "team-a/train-1", "team-a/p"):
            assert (await c.post("/bind", json=bind_for(ext, key, "n1"))).json() == {"Error": ""}
        bound = families((await c.get("/metrics")).text)
        apply(ext.state, LocalQueue("lq", "team-a").cluster_queue("cq").stop_policy("HoldAndDrain").obj())
        assert await ext.reconcile() == 3
        drained = families((await c.get("/metrics")).text)

    assert sample(before, "quotient_local_queue_pending_workloads", **lq, status="active") == 3     # train, p, big
    assert sample(before, "quotient_local_queue_pending_workloads", **lq, status="inadmissible") == 0
    assert sample(before, "quotient_local_queue_pending_workloads", name="held", namespace="team-a",
                  status="active") == 0                                                      # stopped: none
    assert sample(before, "quotient_local_queue_status", name="held", namespace="team-a", active="False") == 1
    assert sample(before, "quotient_local_queue_status", **lq, active="True") == 1

    assert sample(reserved, "quotient_local_queue_pending_workloads", **lq, status="inadmissible") == 1   # big
    assert sample(reserved, "quotient_local_queue_pending_workloads", **lq, status="active") == 0
    assert sample(reserved, "quotient_local_queue_reserving_active_workloads", **lq) == 2
    assert sample(reserved, "quotient_local_queue_resource_reservation", **lq, flavor="default-flavor",
                  resource="cpu") == 3.0
    assert sample(reserved, "quotient_local_queue_quota_reserved_workloads", "quotient_local_queue_quota_reserved_"
                  "workloads_total", **lq, priority_class="") == 1                           # the Job: once
    assert sample(reserved, "quotient_local_queue_quota_reserved_workloads", "quotient_local_queue_quota_reserved_"
                  "workloads_total", **lq, priority_class="batch") == 1

    assert sample(bound, "quotient_local_queue_admitted_active_workloads", **lq) == 2
    assert sample(bound, "quotient_local_queue_resource_usage", **lq, flavor="default-flavor", resource="cpu") == 3.0
    total = "quotient_local_queue_admitted_workloads_total"
    assert sample(bound, "quotient_local_queue_admitted_workloads", total, **lq, priority_class="") == 1
    assert sample(bound, "quotient_local_queue_admitted_workloads", total, **lq, priority_class="batch") == 1
    waited = "quotient_local_queue_admission_wait_time_seconds"                             # the Job: one wait
    assert sample(bound, waited, waited + "_count", **lq, priority_class="") == 1
    assert sample(bound, "quotient_local_queue_quota_reserved_workloads", "quotient_local_queue_quota_reserved_"
                  "workloads_total", **lq, priority_class="") == 1                           # bind did not recount

    evicted = "quotient_local_queue_evicted_workloads_total"
    assert sample(drained, "quotient_local_queue_evicted_workloads", evicted, **lq, reason="LocalQueueStopped",
                  underlying_cause="", priority_class="") == 1                               # 2 pods, 1 workload
    assert sample(drained, "quotient_local_queue_evicted_workloads", evicted, **lq, reason="LocalQueueStopped",
                  underlying_cause="", priority_class="batch") == 1
    assert sample(drained, "quotient_local_queue_admitted_active_workloads", **lq) == 0
    assert sample(drained, "quotient_local_queue_status", **lq, active="False") == 1

    types = {"quotient_local_queue_pending_workloads": "gauge", "quotient_local_queue_reserving_active_workloads":
             "gauge", "quotient_local_queue_admitted_active_workloads": "gauge", "quotient_local_queue_status": "gauge",
             "quotient_local_queue_resource_reservation": "gauge", "quotient_local_queue_resource_usage": "gauge",
             "quotient_local_queue_quota_reserved_workloads": "counter",
             "quotient_local_queue_admitted_workloads": "counter", "quotient_local_queue_evicted_workloads": "counter"}
    assert {name: drained[name].type for name in types} == types


def test_eviction_reasons_are_kueues():
    """metrics.go LocalQueueEvictedWorkloadsTotal: every preemption is Preempted; a workload past backoffLimitCount
    is Deactivated, underlying_cause RequeuingLimitExceeded."""
    from app.observe.kueue_shapes import eviction_labels
    assert eviction_labels("InCohortReclamation", False) == ("Preempted", "")
    assert eviction_labels("PodsReadyTimeout", False) == ("PodsReadyTimeout", "")
    assert eviction_labels("PodsReadyTimeout", True) == ("Deactivated", "RequeuingLimitExceeded")
    assert eviction_labels("ClusterQueueStopped", False) == ("ClusterQueueStopped", "")
