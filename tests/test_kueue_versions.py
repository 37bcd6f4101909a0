"""Kueue's quota API in kueue.x-k8s.io/v1beta1 and v1beta2, mixed in one cluster (issue 10, part 1).

v1beta2 renames ClusterQueue's spec.cohort to spec.cohortName, knows only MayStopSearch and TryNextFlavor in
flavorFungibility (v1beta1's Borrow and Preempt are deprecated names of MayStopSearch), and moves
spec.admissionChecks under spec.admissionChecksStrategy (apis/kueue/v1beta2/clusterqueue_types.go,
apis/kueue/v1beta1/clusterqueue_conversion.go). ResourceFlavor, Cohort and LocalQueue specs are the same
in both. A field of one version used under the other is an error naming the field and the version that
has it, as the API server refuses an unknown field; never a silent default.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from app.act.kube import KubeWriter
from app.cli import build_from_snapshot
from app.config import ConfigError, decode_configuration
from app.objects.errors import InvalidObject
from app.objects.kueue import decode_cluster_queue
from app.sim.run import simulate
from app.sim.scenario import load_scenario
from app.sync.dispatch import apply_object
from app.sync.watch import kueue_version, make_api_client
from builders import (ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, Pod, ResourceFlavor, as_v1beta2,
                      cpu_queue, snapshot_yaml)
from fakeapi import FakeApiServer
from helpers import decide_pod, make_state
from live import Running, until

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((REPO.parent / "shared" / "scenarios" / "examples").glob("*.yaml"))
OWN_SCENARIOS = sorted((REPO / "tests" / "scenarios").glob("*.yaml"))


def v1beta2(obj: dict, **spec) -> dict:
    """obj in v1beta2, its spec fields then set (or, given None, removed) as written."""
    out = as_v1beta2(obj)
    for k, v in spec.items():
        if v is None:
            out["spec"].pop(k, None)
        else:
            out["spec"][k] = v
    return out


def queue(cohort: str | None = "co", **spec) -> dict:
    return ClusterQueue("cq").cohort(cohort).resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")) \
        .spec(**spec).obj()


# ---- reading each version under its own names ----------------------------------------------------------

def test_a_v1beta2_cluster_queue_names_its_cohort_cohort_name():
    cq = decode_cluster_queue(v1beta2(queue()))
    assert (cq.cohort, cq.api_version) == ("co", "v1beta2")
    assert decode_cluster_queue(queue()).cohort == "co" and decode_cluster_queue(queue()).api_version == "v1beta1"


@pytest.mark.parametrize("policy", ["Borrow", "Preempt"])
def test_v1beta1s_deprecated_fungibility_names_read_as_may_stop_search(policy):
    field = "whenCanBorrow" if policy == "Borrow" else "whenCanPreempt"
    cq = decode_cluster_queue(queue(flavorFungibility={field: policy}))
    assert (cq.when_can_borrow if policy == "Borrow" else cq.when_can_preempt) == "MayStopSearch"


@pytest.mark.parametrize("obj,message", [
    (v1beta2(queue(), cohort="co", cohortName=None),
     "spec.cohort is a kueue.x-k8s.io/v1beta1 field; in v1beta2 it is spec.cohortName"),
    (dict(queue(cohort=None), spec={**queue(cohort=None)["spec"], "cohortName": "co"}),
     "spec.cohortName is a kueue.x-k8s.io/v1beta2 field; in v1beta1 it is spec.cohort"),
    (v1beta2(queue(), admissionChecks=["check"]),
     "spec.admissionChecks is a kueue.x-k8s.io/v1beta1 field; in v1beta2 it is "
     "spec.admissionChecksStrategy.admissionChecks"),
    (v1beta2(queue(), flavorFungibility={"whenCanBorrow": "Borrow"}),
     "spec.flavorFungibility.whenCanBorrow: Borrow is kueue.x-k8s.io/v1beta1's (deprecated) name; "
     "v1beta2 calls it MayStopSearch"),
    (v1beta2(queue(), flavorFungibility={"whenCanPreempt": "Preempt"}),
     "whenCanPreempt: Preempt is kueue.x-k8s.io/v1beta1's (deprecated) name"),
    ({**queue(), "apiVersion": "kueue.x-k8s.io/v1alpha1"},
     "apiVersion must be kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2, got 'kueue.x-k8s.io/v1alpha1'"),
])
def test_a_field_of_the_other_version_is_an_error_naming_it(obj, message):
    with pytest.raises(InvalidObject) as e:
        apply_object(make_state(), obj)
    assert message in str(e.value)


@pytest.mark.parametrize("kind", ["ResourceFlavor", "Cohort", "LocalQueue"])
def test_an_unknown_version_of_any_kueue_kind_is_refused(kind):
    obj = {"apiVersion": "kueue.x-k8s.io/v1", "kind": kind, "metadata": {"name": "x", "namespace": "team-a"},
           "spec": {"clusterQueue": "cq"}}
    with pytest.raises(InvalidObject, match="apiVersion must be kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2"):
        apply_object(make_state(), obj)


# ---- one cluster, both versions -------------------------------------------------------------------------

def cohort_cluster(convert) -> list[dict]:
    """Cohort co: a (4 CPUs) and b (4 CPUs, running 6: it borrows 2 of a's); each object through convert."""
    return [convert(o) for o in (
        ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(), Cohort("co").obj(),
        cpu_queue("a", 4, "co", preemption={"reclaimWithinCohort": "Any"}), cpu_queue("b", 4, "co"),
        LocalQueue("lq", "team-a").cluster_queue("a").obj(), LocalQueue("lq", "team-b").cluster_queue("b").obj(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b", "labels": {}}},
        Pod("b-run", "team-b").queue("lq").cpu("6").node("n1").obj())]


def mixed(obj: dict) -> dict:
    """Every other Kueue object in v1beta2: ClusterQueue a and the LocalQueues, not b or the Cohort."""
    name = obj["metadata"]["name"]
    return as_v1beta2(obj) if name in ("a", "lq") else obj


@pytest.mark.parametrize("convert", [lambda o: o, as_v1beta2, mixed], ids=["v1beta1", "v1beta2", "mixed"])
def test_the_same_cluster_in_either_version_or_both_decides_the_same(convert):
    state = make_state(*cohort_cluster(convert))
    assert state.tree.queues["a"].parent.name == "co" and state.tree.queues["b"].parent.name == "co"
    fits = decide_pod(state, Pod("fits").queue("lq").cpu("2").obj())
    assert fits.admit is True, fits.reason
    over = decide_pod(state, Pod("over").queue("lq").cpu("3").created(1).obj())
    assert over.admit is False and over.rule == "QuotaExceeded"
    assert "cohort" in over.reason


# ---- the seeds' examples, rewritten in v1beta2 ------------------------------------------------------------

def outcome(path: Path) -> tuple:
    out = asyncio.run(simulate(load_scenario(str(path))))
    return out.admitted, out.pending, out.preempted, out.evictions, out.timeline


@pytest.mark.parametrize("path", SCENARIOS + OWN_SCENARIOS, ids=lambda p: p.stem)
def test_every_scenario_in_v1beta2_decides_as_in_v1beta1(path, tmp_path):
    """FORMAT.md's examples (the seeds' cases) and our own: the same placements, preemptions, evictions and
    timeline with every Kueue object converted to v1beta2 as Kueue converts it."""
    docs = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))
    converted = [as_v1beta2(d) if isinstance(d, dict) else d for d in docs]
    assert any(d.get("apiVersion") == "kueue.x-k8s.io/v1beta2" for d in converted if isinstance(d, dict))
    rewritten = tmp_path / path.name
    rewritten.write_text(yaml.safe_dump_all(converted, sort_keys=False), encoding="utf-8")
    assert outcome(rewritten) == outcome(path)


# ---- a Kueue Configuration, pasted as it is (config.kueue.x-k8s.io) ---------------------------------------

def kueue_config(version: str, **fields) -> dict:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration",
            "namespace": "kueue-system", "integrations": {"frameworks": ["batch/job"]}, **fields}


def test_v1beta1_turns_features_on_with_enable_and_blocks_admission_by_default():
    cfg = decode_configuration(kueue_config("v1beta1", waitForPodsReady={"enable": True},
                                            fairSharing={"enable": True}))
    w = cfg.wait_for_pods_ready
    assert (w.timeout, w.block_admission, w.recovery_timeout) == (300.0, True, None)    # Kueue v1beta1 defaults
    assert cfg.fair_sharing and cfg.preemption_strategies == ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    assert cfg.unused == ("integrations", "namespace")
    off = decode_configuration(kueue_config("v1beta1", waitForPodsReady={"timeout": "10m"}))
    assert off.wait_for_pods_ready is None and off.fair_sharing is False                 # enable unset: off


def test_v1beta2_turns_features_on_by_their_sections_with_its_own_defaults():
    cfg = decode_configuration(kueue_config("v1beta2", waitForPodsReady={"timeout": "10m"},
                                            fairSharing={"preemptionStrategies": ["LessThanInitialShare"]}))
    w = cfg.wait_for_pods_ready
    assert (w.timeout, w.block_admission, w.recovery_timeout) == (600.0, False, 600.0)  # recovery = timeout
    assert cfg.fair_sharing and cfg.preemption_strategies == ("LessThanInitialShare",)
    none = decode_configuration(kueue_config("v1beta2", waitForPodsReady={"timeout": "5m", "recoveryTimeout": "0s"}))
    assert none.wait_for_pods_ready.recovery_timeout is None                             # "0s" turns it off
    assert decode_configuration(kueue_config("v1beta2")).wait_for_pods_ready is None


@pytest.mark.parametrize("fields,message", [
    ({"waitForPodsReady": {"enable": True, "timeout": "5m"}}, "waitForPodsReady.enable is config.kueue.x-k8s.io/"
                                                              "v1beta1's; in v1beta2 the waitForPodsReady section's"),
    ({"fairSharing": {"enable": True, "preemptionStrategies": []}}, "fairSharing.enable is config.kueue.x-k8s.io/"),
    ({"waitForPodsReady": {}}, "waitForPodsReady.timeout is required in v1beta2"),
    ({"fairSharing": {}}, "fairSharing.preemptionStrategies is required in v1beta2"),
])
def test_v1beta1_fields_in_a_v1beta2_configuration_are_errors(fields, message):
    with pytest.raises(ConfigError) as e:
        decode_configuration(kueue_config("v1beta2", **fields))
    assert message in str(e.value)


def test_a_kueue_configuration_in_a_snapshot_configures_quotient(tmp_path):
    path = tmp_path / "snapshot.yaml"
    path.write_text(snapshot_yaml(*cohort_cluster(as_v1beta2),
                                  kueue_config("v1beta2", fairSharing={"preemptionStrategies": ["LessThanInitialShare"]})))
    ext = build_from_snapshot(str(path))
    assert ext.state.config.fair_sharing and ext.state.config.preemption_strategies == ("LessThanInitialShare",)
    assert ext.state.cluster_queues["a"].cohort == "co" and ext.state.cluster_queues["a"].api_version == "v1beta2"


# ---- live: API discovery, and the status written in the version read --------------------------------------

@pytest.mark.parametrize("group,version", [
    ({"versions": [{"version": "v1beta1"}, {"version": "v1beta2"}], "preferredVersion": {"version": "v1beta2"}},
     "v1beta2"),
    ({"versions": [{"version": "v1beta1"}, {"version": "v1beta2"}], "preferredVersion": {"version": "v1beta1"}},
     "v1beta1"),                                     # the server's preference (its storage version) decides
    ({"versions": [{"version": "v1beta1"}, {"version": "v1"}], "preferredVersion": {"version": "v1"}}, "v1beta1"),
    ({"versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}}, None),
])
def test_the_version_read_is_the_preferred_one_quotient_knows(group, version):
    assert kueue_version(group) == version


@pytest.mark.parametrize("served,written_in", [
    (("v1beta2",), as_v1beta2),                      # a cluster whose Kueue serves only v1beta2
    (("v1beta1", "v1beta2"), lambda o: o),           # both served, v1beta2 preferred; objects written in v1beta1
])
async def test_live_mode_reads_the_preferred_version_and_writes_status_in_it(tmp_path, served, written_in):
    async with FakeApiServer(bookmark_interval=0.3, kueue_versions=served) as api:
        for obj in cohort_cluster(written_in):
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.ready, what="initial list")
                state = source.state
                a = state.cluster_queues["a"]
                assert (a.cohort, a.api_version) == ("co", "v1beta2")
                assert state.tree.queues["a"].parent.name == "co"
                assert await KubeWriter(client, state).publish_status() == 2
            patched = [path for method, path, _ in api.writes if path.endswith("/status")]
            assert sorted(patched) == ["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/a/status",
                                       "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/b/status"]
            assert "admittedWorkloads" in api.get("ClusterQueue", None, "b", "kueue.x-k8s.io/v1beta2")["status"]
        finally:
            await client.close()
