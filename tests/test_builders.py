"""The test vocabulary (builders.py) says what the cluster and kube-scheduler really send: its bodies have the
captured wire's keys (../shared/wire/), and every object it builds decodes as the watch would decode it."""
from __future__ import annotations

import json
from pathlib import Path

from app.objects.meta import parse_time
from app.sync.snapshot import read_snapshot
from builders import (BASE_TIME, ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Namespace, Node, Pod, PodGroup,
                      ResourceFlavor, binding_args, extender_args, snapshot_yaml)
from helpers import make_state

WIRE_DIR = Path(__file__).resolve().parents[2] / "shared" / "wire"


def captured(name: str) -> dict:
    return json.loads((WIRE_DIR / f"{name}.request.json").read_text())


def test_filter_and_bind_bodies_have_the_captured_keys():
    real = captured("filter-nodecache-true")
    built = extender_args(Pod("p").queue("q").cpu("1").wire(), ["n1"])
    assert list(built) == list(real)
    assert set(built["Pod"]) == set(real["Pod"]) == {"metadata", "spec", "status"}
    assert built["Pod"]["status"] == real["Pod"]["status"]
    assert built["Pod"]["spec"]["schedulerName"] == real["Pod"]["spec"]["schedulerName"]
    assert set(built["Pod"]["metadata"]) <= set(real["Pod"]["metadata"])
    assert list(binding_args(built["Pod"], "n1")) == list(captured("bind"))


def test_a_pod_is_pending_unless_bound_and_created_in_whole_seconds():
    pending = Pod("p").created(2.7).obj()
    assert "status" not in pending and parse_time(pending["metadata"]["creationTimestamp"]) == BASE_TIME + 2
    running = Pod("r").node("n1").obj()
    assert (running["spec"]["nodeName"], running["status"]["phase"]) == ("n1", "Running")
    assert Pod("s").phase("Succeeded").node("n1").obj()["status"]["phase"] == "Succeeded"
    assert Pod("t").node("n1").ready(False).obj()["status"]["conditions"] == [{"type": "Ready", "status": "False"}]


def test_one_builder_makes_independent_objects():
    base = Pod("p").queue("lq")
    first = base.obj()
    first["metadata"]["labels"]["x"] = "y"
    assert "x" not in base.obj()["metadata"]["labels"]
    assert base.clone().cpu("2").obj() != base.obj()


def test_quotas_cover_the_first_flavors_resources_in_order():
    a = FlavorQuotas("a").resource("cpu", "4", borrowing="2").resource("memory", "8Gi")
    b = FlavorQuotas("b").resources_from({"cpu": "4", "memory": ("8Gi", None, "1Gi")})
    cq = ClusterQueue("cq").resource_group(a, b)
    group = cq.obj()["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"][0]["resources"][0] == {"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}
    assert group["flavors"][1]["resources"][1] == {"name": "memory", "nominalQuota": "8Gi", "lendingLimit": "1Gi"}


def test_every_built_object_is_accepted_by_the_decoders_and_a_snapshot_round_trips(tmp_path):
    objects = [Namespace("team-a").labels({"tier": "gold"}).obj(),
               ResourceFlavor("spot").node_labels({"tier": "spot"}).obj(),
               Cohort("org").obj(),
               Cohort("co").parent("org").resource_group(FlavorQuotas("spot").resource("cpu", 2)).obj(),
               ClusterQueue("cq").cohort("co").resource_group(FlavorQuotas("spot").resource("cpu", 4))
               .preemption({"withinClusterQueue": "LowerPriority"}).obj(),
               LocalQueue("lq", "team-a").cluster_queue("cq").obj(),
               Node("n1").labels({"tier": "spot"}).obj(), PodGroup("pg").min_member(2).obj(),
               Pod("p").queue("lq").cpu("1").priority(5).obj()]
    state = make_state(*objects)
    assert state.tree.queues["cq"].parent.name == "co" and state.tree.cohorts["co"].parent.name == "org"
    assert state.flavor_nodes["spot"] == {"n1"}
    assert state.store.pod_by_key("team-a/p").priority == 5
    path = tmp_path / "s.yaml"
    path.write_text(snapshot_yaml(*objects[:-1], Pod("w").queue("lq").cpu("1").wire()))
    cluster, own = read_snapshot(str(path))                # checks every reference (queue, flavor, parent)
    assert [d.kind for d in cluster][-2:] == ["PodGroup", "Pod"] and not own
    assert cluster[-1].obj["metadata"]["uid"] == "uid-team-a-w"
