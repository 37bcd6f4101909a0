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
from aiohttp import web

from app.act.kube import KubeWriter
from app.cli import build_from_snapshot
from app.config import ConfigError, decode_configuration
from app.objects.errors import InvalidObject
from app.objects.kueue import decode_cluster_queue
from app.sim.run import simulate
from app.sim.scenario import load_scenario
from app.sync.dispatch import apply_object
from app.sync.apiserver import make_api_client
from app.sync.discovery import kueue_version
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
    assert cfg.unused == ("integrations.frameworks[batch/job]", "namespace")
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
    config = kueue_config("v1beta2", fairSharing={"preemptionStrategies": ["LessThanInitialShare"]})
    path.write_text(snapshot_yaml(*cohort_cluster(as_v1beta2), config))
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


@pytest.mark.parametrize("served,written_in,read", [
    (("v1beta2",), as_v1beta2, "v1beta2"),                   # a cluster whose Kueue serves only v1beta2
    (("v1beta1", "v1beta2"), lambda o: o, "v1beta2"),        # both, v1beta2 preferred; objects written in v1beta1
    (("v1beta2", "v1beta1"), as_v1beta2, "v1beta1"),         # both, v1beta1 preferred; objects written in v1beta2
])
async def test_live_mode_reads_the_preferred_version_and_writes_status_in_it(tmp_path, served, written_in, read):
    async with FakeApiServer(bookmark_interval=0.3, kueue_versions=served) as api:
        for obj in cohort_cluster(written_in):
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.health.ready, what="initial list")
                state = source.state
                a = state.cluster_queues["a"]
                assert (a.cohort, a.api_version) == ("co", read)
                assert state.tree.queues["a"].parent.name == "co"
                assert await KubeWriter(client, state).publish_status() == 2
            patched = [path for method, path, _ in api.writes if path.endswith("/status")]
            assert sorted(patched) == [f"/apis/kueue.x-k8s.io/{read}/clusterqueues/a/status",
                                       f"/apis/kueue.x-k8s.io/{read}/clusterqueues/b/status"]
            assert "admittedWorkloads" in api.get("ClusterQueue", None, "b", f"kueue.x-k8s.io/{read}")["status"]
        finally:
            await client.close()


class DiscoveryAnswers(FakeApiServer):
    """A fake API server whose discovery of kueue.x-k8s.io answers `status` with `body`."""

    def __init__(self, status: int, body: bytes, **kw):
        super().__init__(**kw)
        self.discovery_answer = (status, body)

    async def _discovery(self, request):
        status, body = self.discovery_answer
        return web.Response(status=status, body=body, content_type="application/json")


@pytest.mark.parametrize("status,body", [(403, b'{"kind":"Status","code":403}'), (200, b"[]"), (200, b"{not json"),
                                         (200, b'{"versions":[{"version":null}]}'), (500, b"")])
async def test_an_unusable_discovery_answer_falls_back_to_v1beta1_and_lists_everything(tmp_path, status, body):
    """Discovery refused (403), of another shape, garbled, or failing: Quotient reads v1beta1 as before it
    asked, lists every other resource, and says why in its error counts; it neither crashes nor waits."""
    async with DiscoveryAnswers(status, body, bookmark_interval=0.3) as api:
        for obj in cohort_cluster(lambda o: o):
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.health.ready, what="initial list")
                assert source.state.cluster_queues["a"].api_version == "v1beta1"
                assert "n1" in source.state.nodes
                assert any(source.kinds["APIGroup"].errors.values())
        finally:
            await client.close()


async def test_kueue_installed_after_start_is_found_in_the_version_then_served(tmp_path):
    """No Kueue at start (discovery 404: its resources absent); Kueue then installed serving only v1beta2: the
    absent resources ask discovery again and read v1beta2."""
    async with FakeApiServer(bookmark_interval=0.3, kueue_versions=()) as api:
        client = await make_api_client(api.kubeconfig_path(tmp_path))
        try:
            async with Running(client) as source:
                await until(lambda: source.health.ready, what="initial list")
                assert not source.state.cluster_queues
                api.kueue_versions = ("v1beta2",)
                for obj in cohort_cluster(as_v1beta2):
                    api.apply(obj)
                await until(lambda: "a" in source.state.cluster_queues and "b" in source.state.cluster_queues,
                            what="the ClusterQueues, read in v1beta2")
                assert source.state.cluster_queues["a"].api_version == "v1beta2"
                assert source.state.tree.queues["a"].parent.name == "co"
        finally:
            await client.close()


def test_v1beta1_has_both_admission_check_fields():
    """v1beta1 keeps admissionChecks and admissionChecksStrategy (mutually exclusive in Kueue); v1beta2 only
    the strategy."""
    strategy = {"admissionChecks": [{"name": "prov", "onFlavors": ["default-flavor"]}]}
    assert decode_cluster_queue(queue(admissionChecksStrategy=strategy)).api_version == "v1beta1"
    assert decode_cluster_queue(queue(admissionChecks=["prov"])).api_version == "v1beta1"
    assert decode_cluster_queue(v1beta2(queue(), admissionChecksStrategy=strategy)).api_version == "v1beta2"


@pytest.mark.parametrize("fields,message", [
    ({"resources": {"transformations": [{"input": "nvidia.com/mig-1g.5gb", "strategy": "Replace"}]}},
     "resources.transformations: Quotient does not apply Kueue's resource transformations"),
    ({"waitForPodsReady": "yes"}, "waitForPodsReady must be a mapping (config.kueue.x-k8s.io/v1beta2)"),
    ({"waitForPodsReady": {"timeout": "5m", "maxTimeoutOnWorkload": "2h"}},
     "waitForPodsReady may hold blockAdmission, recoveryTimeout, requeuingStrategy, timeout "
     "(config.kueue.x-k8s.io/v1beta2)"),
])
def test_what_quotient_cannot_honour_in_a_kueue_configuration_is_an_error(fields, message):
    with pytest.raises(ConfigError) as e:
        decode_configuration(kueue_config("v1beta2", **fields))
    assert message in str(e.value)


def test_fields_left_to_kueue_are_listed_including_manage_jobs_without_queue_name():
    """Kueue scopes manageJobsWithoutQueueName by managedJobsNamespaceSelector and its integrations; Quotient
    has neither, so it leaves the field to Kueue (and says so) instead of refusing every unlabelled pod."""
    cfg = decode_configuration(kueue_config("v1beta2", manageJobsWithoutQueueName=True,
                                            resources={"excludeResourcePrefixes": ["example.com/"],
                                                       "deviceClassMappings": []}))
    assert cfg.manage_jobs_without_queue_name is False and cfg.exclude_resource_prefixes == ("example.com/",)
    assert cfg.unused == ("integrations.frameworks[batch/job]", "manageJobsWithoutQueueName", "namespace",
                          "resources.deviceClassMappings")
