"""Issue 36, Kueue's TAS API read as Kueue reads it: a Topology (v1beta1 and v1beta2) validated as its CEL rules
do, a ResourceFlavor's topologyName, the pod-set annotations validated as Kueue's job webhooks do, a pod group
placed in one domain, and what is not placed yet refused with a reason, never ignored."""
from __future__ import annotations

import pytest

from app.objects.errors import InvalidObject
from app.objects.kueue import decode_resource_flavor
from app.objects.topology import HOSTNAME, TopologyRequest, decode_topology, pod_set_request
from builders import ClusterQueue, FlavorQuotas, Job, LocalQueue, Namespace, Node, Pod
from helpers import Verbs, apply, make_state, refused
from app.act.writer import SnapshotWriter
from app.scheduler.scheduler import Scheduler

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
K = "kueue.x-k8s.io/"


def topology(levels, version="v1beta2", name="default") -> dict:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def tas_flavor(topology_name="default") -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tas"},
            "spec": {"nodeLabels": {"tas": "yes"}, "topologyName": topology_name}}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_a_topology_is_read_in_either_version(version):
    assert decode_topology(topology([BLOCK, RACK, HOSTNAME], version)).levels == (BLOCK, RACK, HOSTNAME)


@pytest.mark.parametrize("levels, why", [
    ([], "must have 1 to 16 items"),
    ([f"example.com/l{i}" for i in range(17)], "must have 1 to 16 items"),
    ([RACK, RACK], "must be unique"),
    ([HOSTNAME, RACK], "can only be used at the lowest level"),
    (["not a label!"], "is not a valid label key"),
])
def test_a_topology_kueue_would_refuse_is_refused_with_its_reason(levels, why):
    with pytest.raises(InvalidObject, match=why):
        decode_topology(topology(levels))


def test_a_flavor_naming_a_topology_needs_node_labels_as_kueue_requires():
    flavor = tas_flavor()
    del flavor["spec"]["nodeLabels"]
    with pytest.raises(InvalidObject, match="at least one nodeLabel is required when topology is set"):
        decode_resource_flavor(flavor)


@pytest.mark.parametrize("annotations, want", [
    ({}, (None, "")),
    ({K + "podset-required-topology": RACK}, (TopologyRequest(RACK, required=True), "")),
    ({K + "podset-preferred-topology": BLOCK}, (TopologyRequest(BLOCK), "")),
    ({K + "podset-unconstrained-topology": "true"}, (TopologyRequest(unconstrained=True), "")),
    ({K + "podset-unconstrained-topology": "false"}, (None, "")),
    ({K + "podset-required-topology": BLOCK, K + "podset-slice-required-topology": HOSTNAME,
      K + "podset-slice-size": "2"},
     (TopologyRequest(BLOCK, required=True, slice_level=HOSTNAME, slice_size=2), "")),
    ({K + "podset-required-topology": RACK, K + "podset-preferred-topology": RACK},
     (None, "must not contain more than one topology annotation")),
    ({K + "podset-unconstrained-topology": "maybe"}, (None, "is not a boolean")),
    ({K + "podset-required-topology": BLOCK, K + "podset-slice-size": "2"}, (None, "is only allowed with")),
    ({K + "podset-slice-required-topology": RACK}, (None, "is required with")),
    ({K + "podset-slice-required-topology": RACK, K + "podset-slice-size": "0"}, (None, "at least 1")),
    ({K + "podset-slice-required-topology": RACK, K + "podset-slice-size": "5"}, (None, "must not exceed")),
])
def test_pod_set_annotations_are_validated_as_kueues_webhook_does(annotations, want):
    request, problem = pod_set_request(annotations, 4)
    assert request == want[0]
    assert (want[1] in problem) if want[1] else problem == ""


def cluster(*extra) -> list[dict]:
    nodes = [Node(name).cpu(cpu).labels({"tas": "yes", BLOCK: b, RACK: r}).obj()
             for name, b, r, cpu in (("b1-r1-n1", "b1", "r1", "1"), ("b1-r2-n1", "b1", "r2", "2"),
                                     ("b1-r2-n2", "b1", "r2", "1"), ("b2-r1-n1", "b2", "r1", "2"))]
    return [Namespace("team-a").obj(), topology([BLOCK, RACK]), tas_flavor(),
            ClusterQueue("cq").resource_group(FlavorQuotas("tas").resource("cpu", "100")).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj(), *nodes, *extra]


def extender(state) -> Scheduler:
    return Scheduler(state, SnapshotWriter(state))


def member(name: str, count: int, annotations: dict) -> dict:
    """A member of pod group g (Kueue's plain-pod convention) of count pods, 1 CPU, with these annotations."""
    pod = Pod(name).queue("lq").cpu("1").label(K + "pod-group-name", "g").created(int(name.split("-")[-1])).obj()
    pod["metadata"].setdefault("annotations", {}).update({K + "pod-group-total-count": str(count), **annotations})
    return pod


NODES = ["b1-r1-n1", "b1-r2-n1", "b1-r2-n2", "b2-r1-n1"]


def test_a_group_asking_a_rack_runs_in_the_tightest_rack_that_holds_it():
    """3 x 1 CPU, rack required: only b1/r2 (3 CPUs on two nodes) holds it; without the annotation the group took
    the first nodes with room (b1-r1-n1 first)."""
    members = [member(f"g-{i}", 3, {K + "podset-required-topology": RACK}) for i in range(3)]
    ext = extender(make_state(*cluster(*members)))
    answers = [Verbs(ext).filter(m, NODES)["NodeNames"] for m in members]
    assert sorted(n for a in answers for n in a) == ["b1-r2-n1", "b1-r2-n1", "b1-r2-n2"], answers


def test_a_group_no_rack_holds_is_refused_with_kueues_words_and_holds_nothing():
    members = [member(f"g-{i}", 4, {K + "podset-required-topology": RACK}) for i in range(4)]
    state = make_state(*cluster(*members))
    answer = Verbs(extender(state)).filter(members[0], NODES)
    assert 'topology "default" allows to fit only 3 out of 4 pod(s)' in refused(answer, NODES)
    assert not state.holds and not state.reservations


@pytest.mark.parametrize("cpu, rack", [("1", ["b1-r1-n1"]), ("2", ["b1-r2-n1", "b1-r2-n2"])])
def test_a_lone_pod_asking_a_rack_gets_the_rack_kueues_best_fit_gives_a_pod_set_of_one(cpu, rack):
    """Kueue makes a plain pod a pod set of one: 1 CPU fits every rack and BestFit takes the tightest (b1/r1, room
    for one); 2 CPUs fit b1/r2 and b2/r1 alike, and the first in values order is taken. Without the annotation
    every offered node passes."""
    pod = Pod("p").queue("lq").cpu(cpu).obj()
    pod["metadata"]["annotations"] = {K + "podset-required-topology": RACK}
    state = make_state(*cluster(pod))
    assert Verbs(extender(state)).filter(pod, NODES)["NodeNames"] == rack
    plain = Pod("q").queue("lq").cpu(cpu).obj()
    apply(state, plain)
    assert Verbs(extender(state)).filter(plain, NODES)["NodeNames"] == NODES


def test_a_lone_pod_with_annotations_kueues_webhook_refuses_is_refused_with_its_reason():
    pod = Pod("p").queue("lq").cpu("1").obj()
    pod["metadata"]["annotations"] = {K + "podset-required-topology": RACK, K + "podset-preferred-topology": RACK}
    why = refused(Verbs(extender(make_state(*cluster(pod)))).filter(pod, NODES), NODES)
    assert "TopologyNotSupported" in why or "must not contain more than one topology annotation" in why, why


def tas_job(parallelism: int):
    job = Job("j").queue("lq").parallelism(parallelism)
    job.obj()["spec"]["template"]["metadata"] = {"annotations": {K + "podset-required-topology": RACK}}
    pods = []
    for i in range(parallelism):
        pod = Pod(f"j-{i}").of_job(job).cpu("1").created(i).obj()
        pod["metadata"]["annotations"] = {K + "podset-required-topology": RACK}
        pods.append(pod)
    return job, pods


def test_a_jobs_pods_asking_a_rack_run_in_the_tightest_rack_that_holds_them_all():
    """Kueue reads the annotation on the Job's pod template: 3 x 1 CPU go to b1/r2, the one rack holding three."""
    job, pods = tas_job(3)
    state = make_state(*cluster(job.obj(), *pods))
    answers = [Verbs(extender(state)).filter(p, NODES)["NodeNames"] for p in pods]
    assert sorted(n for a in answers for n in a) == ["b1-r2-n1", "b1-r2-n1", "b1-r2-n2"], answers


async def test_a_jobs_replacement_pod_runs_in_the_rack_of_its_peers():
    """The Job's admitted workload keeps its rack: a pod replacing a failed one passes only onto b1/r2's nodes."""
    job, pods = tas_job(3)
    state = make_state(*cluster(job.obj(), *pods))
    verbs = Verbs(extender(state))
    nodes = {}
    for p in pods:
        nodes[p["metadata"]["name"]] = verbs.filter(p, NODES)["NodeNames"][0]
    for p in pods:
        assert (await verbs.bind(p, nodes[p["metadata"]["name"]]))["Error"] == ""
        apply(state, dict(p, spec=dict(p["spec"], nodeName=nodes[p["metadata"]["name"]]), status={"phase": "Running"}))
    apply(state, dict(pods[0], spec=dict(pods[0]["spec"], nodeName=nodes["j-0"]), status={"phase": "Failed"}))
    again = Pod("j-3").of_job(job).cpu("1").created(9).obj()
    again["metadata"]["annotations"] = {K + "podset-required-topology": RACK}
    apply(state, again)
    answer = verbs.filter(again, NODES)
    assert answer["NodeNames"] == ["b1-r2-n1", "b1-r2-n2"], answer


def test_a_cluster_queue_whose_flavor_names_a_missing_topology_is_inactive_until_it_exists():
    objects = [o for o in cluster() if o["kind"] != "Topology"]
    state = make_state(*objects)
    assert state.ledger.tree.codes["cq"] == "TopologyNotFound"
    assert "there is no Topology 'default' for TAS flavor 'tas'" in state.ledger.tree.inactive["cq"]
    apply(state, topology([BLOCK, RACK]))
    assert "cq" not in state.ledger.tree.inactive


def test_a_group_asking_a_topology_through_a_flavor_without_one_is_refused():
    objects = [o for o in cluster() if o["kind"] != "ResourceFlavor"]
    objects.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tas"},
                    "spec": {"nodeLabels": {"tas": "yes"}}})
    members = [member(f"g-{i}", 2, {K + "podset-required-topology": RACK}) for i in range(2)]
    answer = Verbs(extender(make_state(*objects, *members))).filter(members[0], NODES)
    assert "does not support TopologyAwareScheduling" in refused(answer, NODES)


async def test_live_the_topology_is_listed_and_watched_and_the_group_placed_as_in_the_simulator(tmp_path):
    """The same decision from `serve --kubeconfig` against tests/fakeapi.py: the Topology comes by list+watch (in
    the v1beta1 the fake API serves), the group goes to rack b1/r2, and a Topology deleted makes the ClusterQueue
    inactive (TopologyNotFound), as Kueue does."""
    from live import started, until

    members = [member(f"g-{i}", 3, {K + "podset-required-topology": RACK}) for i in range(3)]
    objects = [topology([BLOCK, RACK], "v1beta1") if o["kind"] == "Topology" else o for o in cluster()]
    async with started(tmp_path, objects + members) as kit:
        assert kit.state.store.topologies["default"].levels == (BLOCK, RACK)
        answers = [kit.filter(m, NODES)["NodeNames"] for m in members]
        assert sorted(n for a in answers for n in a) == ["b1-r2-n1", "b1-r2-n1", "b1-r2-n2"], answers
        kit.api.delete("Topology", None, "default")
        await until(lambda: kit.state.ledger.tree.codes.get("cq") == "TopologyNotFound", what="the deletion seen")


def test_unconstrained_false_asks_nothing_and_the_group_is_placed_as_any_other():
    from app.objects.topology import asked
    annotations = {K + "podset-unconstrained-topology": "false"}
    assert asked(annotations) == "" and pod_set_request(annotations, 2) == (None, "")
    members = [member(f"g-{i}", 2, annotations) for i in range(2)]
    answers = [Verbs(extender(make_state(*cluster(*members)))).filter(m, NODES)["NodeNames"] for m in members[:1]]
    assert answers[0], answers


def test_a_group_whose_size_is_no_whole_number_of_slices_is_refused_not_half_placed():
    """3 members in slices of 2 (Kueue's webhook does not require whole slices). Before the review: two members
    placed, the third with no node, and filter raised."""
    annotations = {K + "podset-required-topology": BLOCK, K + "podset-slice-required-topology": RACK,
                   K + "podset-slice-size": "2"}
    members = [member(f"g-{i}", 3, annotations) for i in range(3)]
    state = make_state(*cluster(*members))
    why = refused(Verbs(extender(state)).filter(members[0], NODES), NODES)
    assert "3 pods in slices of 2" in why and not state.holds


def test_a_replacement_member_goes_back_into_the_rack_of_its_peers():
    """Two of three members run in rack b1/r2; the third is pending (a replacement). Before the review it was
    placed as a group of one, in the tightest rack anywhere (b1/r1); Kueue keeps the workload's rack."""
    annotations = {K + "podset-required-topology": RACK}
    running = [member(f"g-{i}", 3, annotations) for i in range(2)]
    running[0]["spec"]["nodeName"], running[1]["spec"]["nodeName"] = "b1-r2-n1", "b1-r2-n1"
    for pod in running:
        pod["status"] = {"phase": "Running"}
    replacement = member("g-2", 3, annotations)
    answer = Verbs(extender(make_state(*cluster(*running, replacement)))).filter(replacement, NODES)
    assert answer["NodeNames"] == ["b1-r2-n2"], answer


def test_unschedulable_nodes_give_a_domain_no_room():
    """Rack b2/r1's one node (2 CPUs) is cordoned: a group of 2 asking a rack goes to b1/r2, not into b2/r1 (where
    Kueue's tree has no such node) and not refused for want of room node by node."""
    members = [member(f"g-{i}", 2, {K + "podset-required-topology": RACK}) for i in range(2)]
    objects = cluster(*members)
    for obj in objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "b2-r1-n1":
            obj.setdefault("spec", {})["unschedulable"] = True
    state = make_state(*objects)
    first = Verbs(extender(state)).filter(members[0], NODES)["NodeNames"]
    assert first and first[0].startswith("b1-r2-"), first


def test_flavors_are_chosen_by_topology_as_kueue_does():
    """Kueue's checkPodSetAndFlavorMatchForTAS: a group asking a topology skips a flavor without one; a group
    asking none skips a flavor with one when the ClusterQueue also has others."""
    plain = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "plain"},
             "spec": {"nodeLabels": {"plain": "yes"}}}
    def world(*order: str) -> list[dict]:
        cq = ClusterQueue("cq").resource_group(*(FlavorQuotas(f).resource("cpu", "100") for f in order)).obj()
        return [o for o in cluster() if o["kind"] != "ClusterQueue"] + [
            plain, cq, Node("plain-1").cpu("8").labels({"plain": "yes"}).obj()]
    asking = [member(f"g-{i}", 2, {K + "podset-required-topology": RACK}) for i in range(2)]
    answer = Verbs(extender(make_state(*world("plain", "tas"), *asking))).filter(asking[0], NODES + ["plain-1"])
    assert answer["NodeNames"] and answer["NodeNames"][0].startswith("b"), answer
    lone = Pod("p").queue("lq").cpu("1").obj()
    answer = Verbs(extender(make_state(*world("tas", "plain"), lone))).filter(lone, NODES + ["plain-1"])
    assert answer["NodeNames"] == ["plain-1"], answer


def test_colocated_means_one_domain_of_the_topology_not_one_label_value():
    """Rack r1 of block b1 and rack r1 of block b2 are two racks: `colocated` on the rack level compares the block
    too when a Topology lists both (found in review: racks repeat their names across blocks in Kueue's cases)."""
    from types import SimpleNamespace

    from app.sim.run import SimResult, differences
    from app.sim.scenario import Expectation

    labels = {"n1": {BLOCK: "b1", RACK: "r1"}, "n2": {BLOCK: "b2", RACK: "r1"}, "n3": {BLOCK: "b1", RACK: "r1"}}
    scenario = SimpleNamespace(expectation=Expectation(colocated=[(RACK, ["ns/a", "ns/b"])]))
    apart = SimResult(admitted={"ns/a": "n1", "ns/b": "n2"}, node_labels=labels, domain_levels={RACK: (BLOCK, RACK)})
    assert differences(scenario, apart) and "in one" in differences(scenario, apart)[0]
    together = SimResult(admitted={"ns/a": "n1", "ns/b": "n3"}, node_labels=labels, domain_levels={RACK: (BLOCK, RACK)})
    assert differences(scenario, together) == []
    pending = SimResult(admitted={"ns/a": "n1"}, pending={"ns/b"}, node_labels=labels)
    assert "ns/b pending" in differences(scenario, pending)[0]


def test_a_topology_flavors_nodes_are_only_those_carrying_every_level_of_it():
    """Kueue's NodeMatchesFlavor (pkg/util/tas/node.go): a flavor naming a Topology has only the nodes with its
    nodeLabels and every level's label, for every workload, one asking no topology too (Kueue's implied TAS in a
    ClusterQueue of TAS flavors only). A node with tas=yes and no rack label is none of the flavor's."""
    pod = Pod("p").queue("lq").cpu("1").obj()
    bare = Node("bare").cpu("8").labels({"tas": "yes"}).obj()
    state = make_state(*cluster(bare, pod))
    assert Verbs(extender(state)).filter(pod, NODES + ["bare"])["NodeNames"] == NODES
    apply(state, topology([BLOCK]))          # the Topology's levels change: the flavor's nodes are read again
    assert "bare" not in Verbs(extender(state)).filter(pod, NODES + ["bare"])["NodeNames"]
    apply(state, Node("bare").cpu("8").labels({"tas": "yes", BLOCK: "b3"}).obj())
    assert "bare" in Verbs(extender(state)).filter(pod, NODES + ["bare"])["NodeNames"]
