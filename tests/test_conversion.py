"""app/objects/conversion.py: Kueue's conversion between kueue.x-k8s.io/v1beta1 and v1beta2, the one the
conversion webhook of deploy/crds/crds.yaml answers with (and the fake API server serves with).

Each case names the Kueue file it follows (apis/kueue/v1beta1/...); then round trips, and shapes no Kueue
object has, which pass through or fail with a message naming the field, never with a traceback.
"""
from __future__ import annotations

import copy

import pytest

from app.objects.conversion import ConversionError, convert
from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, ResourceFlavor

V1, V2 = "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"


def obj(kind: str, api: str = V1, spec=None, status=None, **top) -> dict:
    out = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, **top}
    if spec is not None:
        out["spec"] = spec
    if status is not None:
        out["status"] = status
    return out


# (Kueue file, kind, v1beta1 spec/status, v1beta2 spec/status, directions): v1beta1 -> v1beta2 gives the
# v1beta2 side; where both directions hold ("both"), v1beta2 -> v1beta1 gives the v1beta1 side back.
CASES = [
    ("clusterqueue_conversion.go", "ClusterQueue", {"spec": {"cohort": "co", "queueingStrategy": "StrictFIFO"}},
     {"spec": {"cohortName": "co", "queueingStrategy": "StrictFIFO"}}, "both"),
    ("clusterqueue_conversion.go (omitempty)", "ClusterQueue", {"spec": {"cohort": ""}}, {"spec": {}}, "up"),
    ("clusterqueue_conversion.go", "ClusterQueue",
     {"spec": {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}},
     {"spec": {"flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}}}, "up"),
    ("clusterqueue_conversion.go", "ClusterQueue",
     {"spec": {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch",
                                     "preference": "PreemptionOverBorrowing"}}},
     {"spec": {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch",
                                     "preference": "PreemptionOverBorrowing"}}}, "both"),
    ("clusterqueue_conversion.go", "ClusterQueue", {"spec": {"admissionChecks": ["a", "b"]}},
     {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "b"}]}}}, "up"),
    ("clusterqueue_conversion.go (len == 0)", "ClusterQueue", {"spec": {"admissionChecks": []}}, {"spec": {}}, "up"),
    ("clusterqueue_conversion.go (replaces the strategy)", "ClusterQueue",
     {"spec": {"admissionChecks": ["a"], "admissionChecksStrategy": {"admissionChecks": [{"name": "z"}]}}},
     {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "a"}]}}}, "up"),
    ("v1beta1 has admissionChecksStrategy too", "ClusterQueue",
     {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "a", "onFlavors": ["f"]}]}}},
     {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "a", "onFlavors": ["f"]}]}}}, "both"),
    ("zz_generated.conversion.go (ClusterQueueStatus)", "ClusterQueue",
     {"status": {"pendingWorkloads": 2, "pendingWorkloadsStatus": {"clusterQueuePendingWorkload": []},
                 "fairSharing": {"weightedShare": 5, "admissionFairSharingStatus": {"consumedResources": {}}}}},
     {"status": {"pendingWorkloads": 2, "fairSharing": {"weightedShare": 5}}}, "up"),
    ("cohort_conversion.go", "Cohort",
     {"spec": {"parentName": "root", "fairSharing": {"weight": "2"}},
      "status": {"fairSharing": {"weightedShare": 1, "admissionFairSharingStatus": {"consumedResources": {}}}}},
     {"spec": {"parentName": "root", "fairSharing": {"weight": "2"}},
      "status": {"fairSharing": {"weightedShare": 1}}}, "up"),
    ("cohort_conversion.go", "Cohort",
     {"spec": {"parentName": "root"}, "status": {"fairSharing": {"weightedShare": 1}}},
     {"spec": {"parentName": "root"}, "status": {"fairSharing": {"weightedShare": 1}}}, "both"),
    ("localqueue_conversion.go", "LocalQueue",
     {"spec": {"clusterQueue": "cq"}, "status": {"pendingWorkloads": 1, "flavorUsage": [
         {"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]}},
     {"spec": {"clusterQueue": "cq"}, "status": {"pendingWorkloads": 1, "flavorsUsage": [
         {"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]}}, "both"),
    ("zz_generated.conversion.go (LocalQueueStatus)", "LocalQueue",
     {"status": {"flavors": [{"name": "f", "resources": ["cpu"]}]}}, {"status": {}}, "up"),
    ("same in both (resourceflavor_types.go)", "ResourceFlavor",
     {"spec": {"nodeLabels": {"a": "b"}, "nodeTaints": [{"key": "k", "effect": "NoSchedule"}]}},
     {"spec": {"nodeLabels": {"a": "b"}, "nodeTaints": [{"key": "k", "effect": "NoSchedule"}]}}, "both"),
    ("same in both (workloadpriorityclass_types.go)", "WorkloadPriorityClass", {"value": 100, "description": "d"},
     {"value": 100, "description": "d"}, "both"),
]


@pytest.mark.parametrize("source, kind, old, new, directions", CASES, ids=[f"{c[1]}: {c[0]}" for c in CASES])
def test_conversion_follows_kueue(source, kind, old, new, directions):
    v1, v2 = obj(kind, V1, **old), obj(kind, V2, **new)
    before = copy.deepcopy(v1)
    assert convert(v1, "v1beta2") == v2
    assert v1 == before, "the input was changed"
    if directions == "both":
        assert convert(v2, "v1beta1") == v1


def test_v1beta2_to_v1beta1_renames_cohort_name_and_flavors_usage_and_keeps_the_rest():
    cq = obj("ClusterQueue", V2, spec={"cohortName": "co", "admissionChecksStrategy": {"admissionChecks": [
        {"name": "a"}]}, "flavorFungibility": {"whenCanBorrow": "MayStopSearch"}})
    assert convert(cq, "v1beta1")["spec"] == {"cohort": "co", "admissionChecksStrategy": {"admissionChecks": [
        {"name": "a"}]}, "flavorFungibility": {"whenCanBorrow": "MayStopSearch"}}
    lq = obj("LocalQueue", V2, status={"flavorsUsage": [{"name": "f", "resources": []}]})
    assert convert(lq, "v1beta1")["status"] == {"flavorUsage": [{"name": "f", "resources": []}]}


@pytest.mark.parametrize("built", [
    ClusterQueue("cq").cohort("co").resource_group(FlavorQuotas("f").resource("cpu", "4")).obj(),
    ClusterQueue("cq").resource_group(FlavorQuotas("f").resource("cpu", "4")).obj(),
    Cohort("co").parent("root").obj(),
    LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
    ResourceFlavor("f").obj(),
], ids=["ClusterQueue with cohort", "ClusterQueue alone", "Cohort", "LocalQueue", "ResourceFlavor"])
def test_round_trip_v1beta1_v1beta2_v1beta1_keeps_the_object(built):
    there = convert(built, "v1beta2")
    assert there["apiVersion"] == V2
    assert convert(there, "v1beta1") == built
    if built.get("spec", {}).get("cohort"):
        assert there["spec"]["cohortName"] == built["spec"]["cohort"] and "cohort" not in there["spec"]


def test_the_same_version_and_other_groups_come_back_equal_and_unshared():
    for same in (obj("ClusterQueue", V1, spec={"cohort": "co"}), obj("ClusterQueue", V2, spec={"cohortName": "co"}),
                 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"cohort": "co"}},
                 {"kind": "ClusterQueue"}):
        version = same.get("apiVersion", "").rpartition("/")[2] or "v1beta2"
        out = convert(same, version if version in ("v1beta1", "v1beta2") else "v1beta2")
        assert out == same and out is not same
        out.setdefault("spec", {})["cohort"] = "changed"
        assert same.get("spec", {}).get("cohort") != "changed"


def test_unknown_fields_pass_through():
    cq = obj("ClusterQueue", V1, spec={"cohort": "co", "admissionScope": {"admissionMode": "X"}, "future": [1]},
             status={"conditions": [{"type": "Active"}]}, extra={"a": 1})
    out = convert(cq, "v1beta2")
    assert out["spec"] == {"cohortName": "co", "admissionScope": {"admissionMode": "X"}, "future": [1]}
    assert out["status"] == cq["status"] and out["extra"] == {"a": 1}


@pytest.mark.parametrize("hostile", [
    obj("ClusterQueue", V1, spec="not a dict"),
    obj("ClusterQueue", V1, spec=None),
    obj("ClusterQueue", V1, spec=[1, 2]),
    obj("ClusterQueue", V1, spec={"flavorFungibility": "Borrow"}),
    obj("ClusterQueue", V1, spec={"cohort": 7}),
    obj("ClusterQueue", V1, status=None),
    {**obj("ClusterQueue", V1), "status": None},
    obj("ClusterQueue", V1, status={"fairSharing": None, "pendingWorkloadsStatus": None}),
    obj("Cohort", V1, status={"fairSharing": "x"}),
    obj("LocalQueue", V1, status="x"),
    {"apiVersion": V1, "kind": 7, "spec": {"cohort": "co"}},
    {"apiVersion": V1},
    {"apiVersion": 42, "kind": "ClusterQueue", "spec": {"cohort": "co"}},
], ids=lambda o: repr(o)[:60])
def test_hostile_shapes_pass_through_without_raising(hostile):
    before = copy.deepcopy(hostile)
    for version in ("v1beta1", "v1beta2"):
        out = convert(hostile, version)
        assert isinstance(out, dict)
    assert hostile == before


@pytest.mark.parametrize("checks", ["a", {"a": 1}, 3, [1, "b"], [None]])
def test_admission_checks_that_are_not_a_list_of_names_fail_naming_the_field(checks):
    with pytest.raises(ConversionError, match=r"spec\.admissionChecks must be a list of AdmissionCheck names"):
        convert(obj("ClusterQueue", V1, spec={"admissionChecks": checks}), "v1beta2")


@pytest.mark.parametrize("bad, version, message", [
    (obj("ClusterQueue"), "v1", r"cannot convert to kueue\.x-k8s\.io/v1: the versions are v1beta1, v1beta2"),
    ("a string", "v1beta2", "not an object: str"),
    ([obj("ClusterQueue")], "v1beta2", "not an object: list"),
    ({"apiVersion": V1, "kind": "ClusterQueue", "spec": {1: "int key"}}, "v1beta2", "not a JSON object"),
])
def test_what_cannot_be_converted_fails_with_a_message(bad, version, message):
    with pytest.raises(ConversionError, match=message):
        convert(bad, version)
