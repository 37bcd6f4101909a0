"""Kueue's API, honoured or refused, never ignored (issue 34): every v1beta2 spec field of deploy/crds/crds.yaml is
in app/objects/coverage.py's lists, README's table is those lists, and each refusal acts: a ClusterQueue that uses
a refused field is inactive with the reason (its Active condition, /debug, the view, the metric), a pod or Job that
carries a refused Kueue label or annotation is refused by the named rule. Before issue 34 each of these pods was
admitted, the field read as if absent."""
from __future__ import annotations

import pathlib

import httpx
import pytest
import yaml

from app.act.kube import KubeWriter
from app.api.app import create_app
from app.objects import coverage
from builders import ClusterQueue, FlavorQuotas, Job, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from helpers import Verbs, decide_pod, make_state, refused_by
from live import started, until

ROOT = pathlib.Path(__file__).resolve().parent.parent
KUEUE = "kueue.x-k8s.io/"


# ---- the lists against the schemas and the README -----------------------------------------------------------------

def v1beta2_schemas() -> dict[str, dict]:
    out = {}
    for doc in yaml.safe_load_all((ROOT / "deploy" / "crds" / "crds.yaml").read_text()):
        if doc and doc.get("kind") == "CustomResourceDefinition":
            (version,) = [v for v in doc["spec"]["versions"] if v["name"] == "v1beta2"]
            out[doc["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return out


def walk(schema: dict, fields: dict) -> list[tuple[str, bool]]:
    """(path, inside a whole field) for every field below the top level but apiVersion, kind, metadata and
    status: `spec.a.b`, `[]` for a list's items. Inside an honoured field marked whole (Kubernetes' own type) and
    inside a refused one (refused whole), fields need no entry of their own."""
    out: list[tuple[str, bool]] = []

    def down(node: dict, path: str, covered: bool) -> None:
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            node, path = node["items"], path + "[]"
        for name, sub in (node.get("properties") or {}).items():
            here = f"{path}.{name}" if path else name
            out.append((here, covered))
            entry = fields.get(here)
            down(sub, here, covered or (entry is not None and (entry.whole or entry.verdict == coverage.REFUSED)))

    top = {k: v for k, v in schema["properties"].items() if k not in ("apiVersion", "kind", "metadata", "status")}
    down({"properties": top}, "", False)
    return out


SCHEMAS = v1beta2_schemas()


@pytest.mark.parametrize("kind", ["ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass",
                                  "Topology"])
def test_every_v1beta2_field_is_honoured_or_refused(kind):
    """A field added to crds.yaml (from a newer Kueue) and to neither list fails here."""
    assert kind in SCHEMAS, f"deploy/crds/crds.yaml has no {kind}"
    fields = coverage.FIELDS[kind]
    found = walk(SCHEMAS[kind], fields)
    unaccounted = [p for p, covered in found if not covered and p not in fields]
    assert not unaccounted, f"{kind} fields neither honoured nor refused in app/objects/coverage.py: {unaccounted}"
    stale = sorted(set(fields) - {p for p, _ in found})
    assert not stale, f"{kind}: coverage.py names fields the v1beta2 schema does not have: {stale}"


def test_every_refused_pod_mark_names_its_rule_and_every_verdict_is_known():
    for (key, where), mark in coverage.MARKS.items():
        assert where in ("label", "annotation") and key.startswith(("kueue.x-k8s.io/", "provreq.kueue.x-k8s.io/"))
        assert mark.verdict in (coverage.HONOURED, coverage.REFUSED, coverage.KUEUE_WRITES), key
        assert (mark.verdict == coverage.REFUSED) <= bool(mark.rule), key
    for fields in coverage.FIELDS.values():
        assert all(e.verdict in (coverage.HONOURED, coverage.REFUSED) for e in fields.values())


def test_readme_has_the_table_as_the_lists_make_it():
    """The README table is coverage.table(): change a list and the README must follow (and the reverse)."""
    readme = (ROOT / "README.md").read_text()
    assert "## Kueue's API, field by field" in readme
    assert coverage.table() in readme


# ---- ClusterQueues: inactive with the reason ------------------------------------------------------------------------

def v1beta2_queue(name: str = "cq", **spec) -> dict:
    obj = ClusterQueue(name).resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")).spec(**spec).obj()
    obj["apiVersion"] = KUEUE + "v1beta2"
    return obj


def queue_world(cq: dict, flavor: dict | None = None) -> list[dict]:
    return [Namespace("team-a").obj(), flavor or ResourceFlavor("default-flavor").obj(), cq,
            LocalQueue("lq", "team-a").cluster_queue(cq["metadata"]["name"]).obj(), Node("n1").cpu("16").obj()]


def verdict(objects: list[dict], pod: dict):
    return decide_pod(make_state(*objects), pod)


POD = Pod("p").queue("lq").cpu("1")

REFUSED_QUEUES = [
    # (why, the ClusterQueue's spec, words of the reason)
    ("admissionScope UsageBasedAdmissionFairSharing",
     {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}}, ["spec.admissionScope",
                                                                                "UsageBasedAdmissionFairSharing"]),
    ("admissionChecksStrategy", {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]}},
     ["spec.admissionChecksStrategy", "prov"]),
    ("concurrentAdmissionPolicy", {"concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}}},
     ["spec.concurrentAdmissionPolicy"]),
]


@pytest.mark.parametrize("why, spec, words", REFUSED_QUEUES, ids=[r[0] for r in REFUSED_QUEUES])
def test_a_cluster_queue_using_a_refused_field_admits_nothing_and_says_why(why, spec, words):
    """Before: the pod was admitted, the field read as if absent."""
    refused_by(verdict(queue_world(v1beta2_queue(**spec)), POD.obj()), "ClusterQueueInactive", "is inactive", *words)


def test_v1beta1_admission_checks_are_refused_too():
    """v1beta1 names its checks in spec.admissionChecks (apis/kueue/v1beta1 clusterqueue_types.go)."""
    cq = ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "8")) \
        .spec(admissionChecks=["multikueue"]).obj()
    refused_by(verdict(queue_world(cq), POD.obj()), "ClusterQueueInactive", "multikueue", "admission checks")


@pytest.mark.parametrize("spec", [{"admissionScope": {"admissionMode": "NoAdmissionFairSharing"}},
                                  {"admissionChecksStrategy": {"admissionChecks": []}}])
def test_what_asks_for_nothing_kueue_does_not_do_is_honoured(spec):
    """NoAdmissionFairSharing is Kueue's default; an empty admission check list runs none."""
    v = verdict(queue_world(v1beta2_queue(**spec)), POD.obj())
    assert v.admit, v


def test_a_flavor_naming_a_topology_that_does_not_exist_makes_its_cluster_queues_inactive():
    """Kueue's TopologyNotFound (pkg/cache/scheduler/clusterqueue.go); with the Topology, it admits (issue 36)."""
    flavor = ResourceFlavor("default-flavor").obj()
    flavor["spec"].update(topologyName="default", nodeLabels={"tas": "yes"})
    refused_by(verdict(queue_world(v1beta2_queue(), flavor), POD.obj()), "ClusterQueueInactive",
               "there is no Topology 'default' for TAS flavor 'default-flavor'")


# ---- pods and Jobs: refused by the named rule -----------------------------------------------------------------------

def plain_world() -> list[dict]:
    return queue_world(v1beta2_queue())


@pytest.mark.parametrize("key", [KUEUE + "podset-required-topology", KUEUE + "podset-preferred-topology"])
def test_a_pod_asking_for_a_topology_through_a_flavor_without_one_is_not_admitted(key):
    """Kueue's TAS annotations (apis/kueue/v1beta2/topology_types.go), on a lone pod: its flavor must name a
    Topology (Kueue's checkPodSetAndFlavorMatchForTAS). Before issue 36: admitted, placed anywhere."""
    v = verdict(plain_world(), POD.clone().annotation(key, "cloud.com/rack").obj())
    assert not v.admit and "Flavor 'default-flavor' does not support TopologyAwareScheduling" in v.reason, v


def test_a_pod_whose_topology_annotations_kueues_webhook_refuses_is_refused_with_its_reason():
    refused_by(verdict(plain_world(), POD.clone().annotation(KUEUE + "podset-slice-required-topology",
                                                              "cloud.com/rack").obj()),
               coverage.TOPOLOGY_RULE, "podset-slice-size is required with")


def test_the_pods_of_a_job_whose_template_asks_for_a_topology_need_a_flavor_with_one():
    """The annotation on a Job's pod template reaches each pod the Job makes."""
    job = Job("train").queue("lq").parallelism(2)
    objects = [*plain_world(), job.obj()]
    pod = Pod("train-0").cpu("1").of_job(job).annotation(KUEUE + "podset-required-topology", "rack").obj()
    v = verdict(objects, pod)
    assert not v.admit and "does not support TopologyAwareScheduling" in v.reason, v


def test_a_pod_claiming_devices_is_refused_as_kueue_does_without_its_dra_integration():
    """Kueue's KueueDRARejectWorkloadsWhenDRADisabled (pkg/controller/core/workload_controller.go): a pod with
    spec.resourceClaims. Before: admitted, its devices charged nothing."""
    pod = POD.obj()
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    refused_by(verdict(plain_world(), pod), coverage.DRA_RULE, "spec.resourceClaims (gpu)", "cannot charge")


@pytest.mark.parametrize("key, value", [(KUEUE + "pod-group-fast-admission", "true"),
                                        (KUEUE + "retriable-in-group", "false"),
                                        (KUEUE + "safe-to-forcefully-delete", "true")])
def test_a_pod_asking_for_a_kueue_feature_quotient_lacks_is_refused(key, value):
    refused_by(verdict(plain_world(), POD.clone().annotation(key, value).obj()), coverage.FEATURE_RULE, key)


@pytest.mark.parametrize("key, value", [(KUEUE + "pod-group-fast-admission", "false"),
                                        (KUEUE + "retriable-in-group", "true")])
def test_a_value_that_does_nothing_in_kueue_is_not_refused(key, value):
    assert verdict(plain_world(), POD.clone().annotation(key, value).obj()).admit


def test_a_pod_with_a_maximum_execution_time_is_refused():
    """Kueue's max-exec-time-seconds label (pkg/controller/constants) on the pod."""
    pod = POD.clone().label(KUEUE + "max-exec-time-seconds", "600").obj()
    refused_by(verdict(plain_world(), pod), coverage.FEATURE_RULE, "max-exec-time-seconds")


def test_the_pods_of_a_job_with_a_maximum_execution_time_are_refused():
    job = Job("train").queue("lq").label(KUEUE + "max-exec-time-seconds", "600")
    pod = Pod("train-0").cpu("1").of_job(job).obj()
    refused_by(verdict([*plain_world(), job.obj()], pod), coverage.FEATURE_RULE, "Job team-a/train",
               "max-exec-time-seconds")


def test_a_job_gated_by_another_controller_admits_nothing_until_the_gate_is_gone():
    """Kueue's admission-gated-by (pkg/constants/constants.go): nothing is admitted while it is present."""
    job = Job("train").queue("lq").annotation(KUEUE + "admission-gated-by", "example.com/ctl")
    pod = Pod("train-0").cpu("1").of_job(job).obj()
    refused_by(verdict([*plain_world(), job.obj()], pod), coverage.GATED_RULE, "example.com/ctl")
    ungated = Job("train").queue("lq")
    assert verdict([*plain_world(), ungated.obj()], Pod("train-0").cpu("1").of_job(ungated).obj()).admit


def test_a_pod_without_a_queue_is_not_kueues_and_passes_whatever_it_carries():
    pod = Pod("free").cpu("1").annotation(KUEUE + "podset-required-topology", "rack").obj()
    v = verdict(plain_world(), pod)
    assert v.admit and not v.managed


# ---- what an admin sees: the Active condition, /debug, the view, the metric -----------------------------------------

async def test_an_inactive_cluster_queue_says_why_in_its_status_debug_view_and_metric(tmp_path):
    """Kueue's Active condition (pkg/cache/scheduler/clusterqueue.go, inactiveReason): False with the reason.
    Before: no condition was written and the queue showed active while ignoring admissionScope."""
    cq = v1beta2_queue(admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
    ok = v1beta2_queue("ok")
    async with started(tmp_path, [*queue_world(cq), ok]) as kit:
        p = POD.clone().uid("u-p").obj()
        kit.api.apply(p)
        answer = kit.filter(p)
        assert answer["NodeNames"] == [] and "spec.admissionScope" in str(answer), answer
        await KubeWriter(kit.client, kit.state).publish_status()
        (cond,) = kit.api.get("ClusterQueue", None, "cq")["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Active", "False", "NotSupportedByQuotient")
        assert "spec.admissionScope" in cond["message"] and cond["lastTransitionTime"]
        (good,) = kit.api.get("ClusterQueue", None, "ok")["status"]["conditions"]
        assert (good["status"], good["reason"]) == ("True", "Ready")
        await until(lambda: all(kit.state.cluster_queues[n].status.get("conditions") for n in ("cq", "ok")),
                    what="the watch delivers the written status")
        writes = len(kit.api.writes)
        await KubeWriter(kit.client, kit.state).publish_status()
        assert len(kit.api.writes) == writes            # unchanged: not written again
        app = create_app(kit.ext)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            shown = next(q for q in (await c.get("/debug/queues")).json()["clusterQueues"] if q["name"] == "cq")
            assert shown["status"] == "inactive" and "spec.admissionScope" in shown["statusReason"], shown
            assert "spec.admissionScope" in (await c.get("/ui/queues/cq")).text
            metrics = (await c.get("/metrics")).text
            assert 'quotient_cluster_queue_status{cluster_queue="cq",status="inactive"} 1.0' in metrics


def test_removing_the_refused_field_makes_the_queue_active_again():
    """The watch's update of a ClusterQueue (admissionScope removed) or a ResourceFlavor (topologyName removed, its
    Topology missing) reaches the quota tree: the queue admits again."""
    from helpers import apply
    flavor = ResourceFlavor("default-flavor").obj()
    flavor["spec"].update(topologyName="default", nodeLabels={"tas": "yes"})
    state = make_state(*queue_world(v1beta2_queue(admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"}),
                                    flavor))
    assert "cq" in state.tree.inactive
    apply(state, v1beta2_queue())
    assert "no Topology" in state.tree.inactive["cq"] and "admissionScope" not in state.tree.inactive["cq"]
    apply(state, ResourceFlavor("default-flavor").obj())
    assert "cq" not in state.tree.inactive
    assert decide_pod(state, POD.obj()).admit


def test_a_gate_removed_from_the_job_lets_its_pods_in():
    """The Job's update (its admission-gated-by annotation removed, as the gating controller does) is read: the
    pod refused while it stood is admitted next time."""
    from helpers import apply
    gated = Job("train").queue("lq").annotation(KUEUE + "admission-gated-by", "example.com/ctl")
    state = make_state(*plain_world(), gated.obj())
    pod = Pod("train-0").cpu("1").of_job(gated).obj()
    assert decide_pod(state, pod).rule == coverage.GATED_RULE
    apply(state, Job("train").queue("lq").obj())
    assert decide_pod(state, pod).admit


def test_a_pod_group_named_only_by_annotation_is_refused_not_split_into_lone_pods():
    """Kueue's GetPodGroupName (pkg/util/pod/pod.go) reads the pod-group-name annotation first. Before: Quotient
    read only the label, so each member was admitted alone, the group's all-or-nothing lost."""
    annotated = POD.clone().annotation(KUEUE + "pod-group-name", "g").annotation(KUEUE + "pod-group-total-count", "2")
    refused_by(verdict(plain_world(), annotated.obj()), coverage.FEATURE_RULE, "pod-group-name", "label")
    both = annotated.clone().label(KUEUE + "pod-group-name", "g")
    assert verdict(plain_world(), both.obj()).rule != coverage.FEATURE_RULE      # the label is read: a group



async def test_a_pod_group_whose_later_member_claims_devices_is_refused_whole(load_extender):
    """Found in review: a group is decided as one workload made from its first member (Workload.of_group), so a
    refused field on any other member was never looked at and the whole group bound, the devices charged nothing.
    Kueue makes one Workload of the group's pod sets, and its DRA check covers every pod set."""
    from test_gangs import ALL, gang, snapshot
    pods = gang(3, "2")
    pods[2]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    ext = load_extender(snapshot(pending=pods))
    verbs = Verbs(ext)
    for p in pods:
        answer = verbs.filter(p, ALL)
        why = str(answer["FailedAndUnresolvableNodes"])      # parked: only a change to the group clears it
        assert not answer["NodeNames"] and "member team-a/g-2" in why and "spec.resourceClaims (gpu)" in why, answer
    assert ext.journal.of_pod("team-a/g-0")[0]["outcome"] == coverage.DRA_RULE
    assert not ext.state.holds and not ext.state.reservations and not ext.state.admitted


@pytest.mark.parametrize("raw, read", [(5e-324, 0.0), ("1m", 0.001), (0.0015, 0.002), (0.99, 0.99), ("0.99", 0.99), (2, 2.0)])
def test_a_fair_sharing_weight_is_read_in_thousandths_as_kueue_reads_it(raw, read):
    """Found in review: weight 5e-324 made a borrowing queue's share inf, and math.floor(inf) raised in filter.
    Kueue reads the weight as a Quantity's MilliValue (rounded up); a float's own rounding error is not a
    thousandth, so 5e-324 reads 0 (the weight-0 rules), not 0.001."""
    cq = v1beta2_queue(fairSharing={"weight": raw})
    state = make_state(*queue_world(cq))
    assert state.cluster_queues["cq"].fair_weight == read


@pytest.mark.parametrize("raw", [float("inf"), float("nan")])
def test_a_weight_that_is_no_finite_number_is_refused_with_a_reason(raw):
    from app.objects.kueue import InvalidObject, decode_cluster_queue
    with pytest.raises(InvalidObject, match="not a finite number"):
        decode_cluster_queue(v1beta2_queue(fairSharing={"weight": raw}))
