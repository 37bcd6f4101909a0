"""Issue 36, part 4: explain and view. /debug/topologies (and /ui/topologies) shows each Topology's domains per level
with their free room; a pod asking a topology shows, in /debug/pods and its /ui page, its request, the domain its
workload runs or is held in, and per domain of its level why that domain does not hold it."""
from __future__ import annotations

from app.act.writer import SnapshotWriter
from app.scheduler.scheduler import Scheduler
from helpers import Verbs, make_state
from test_topology_api import BLOCK, NODES, RACK, K, cluster, member


def scheduler(*extra):
    state = make_state(*cluster(*extra))
    return state, Scheduler(state, SnapshotWriter(state))


async def test_topologies_show_each_levels_domains_with_their_free_room(api):
    _, ext = scheduler()
    async with api(ext) as c:
        view = (await c.get("/debug/topologies")).json()
        text = (await c.get("/debug/topologies", params={"format": "text"})).text
        page = await c.get("/ui/topologies")
    t = view["topologies"][0]
    assert (t["name"], t["levels"], t["flavors"], t["nodes"]) == ("default", [BLOCK, RACK], ["tas"], 4)
    assert [(d["domain"], d["nodes"], d["free"]["cpu"]) for d in t["domains"][BLOCK]["shown"]] == [
        ("b1", 3, "4"), ("b2", 1, "2")]
    racks = {d["domain"]: d["free"]["cpu"] for d in t["domains"][RACK]["shown"]}
    assert racks == {"b1/r1": "1", "b1/r2": "3", "b2/r1": "2"}
    assert "b1/r2" in text and f"{RACK}: 3 domain(s)" in text
    assert page.status_code == 200 and "b1/r2" in page.text and "Topology default" in page.text


async def test_a_held_group_shows_its_domain_and_why_the_others_do_not_hold_it(api):
    """3 x 1 CPU, rack required: held in b1/r2; b2/r1 lacks 1 CPU, b1/r1 lacks 2."""
    members = [member(f"g-{i}", 3, {K + "podset-required-topology": RACK}) for i in range(3)]
    state, ext = scheduler(*members)
    Verbs(ext).filter(members[0], NODES)
    async with api(ext) as c:
        view = (await c.get("/debug/pods/team-a/g-1")).json()["topology"]
        text = (await c.get("/debug/pods/team-a/g-1", params={"format": "text"})).text
        page = (await c.get("/ui/pods/team-a/g-1")).text
    assert view["domain"] == ["b1/r2"] and view["request"]["mode"] == "required" and view["request"]["pods"] == 3
    why = {d["domain"]: d["why"] for d in view["domains"]}
    assert why["b1/r2"] == "its workload runs or is held here"
    assert why["b2/r1"] == "holds 2 of 3 pod(s): lacks 1 cpu"
    assert why["b1/r1"] == "holds 1 of 3 pod(s): lacks 2 cpu"
    assert "Domains at" in text and "lacks 2 cpu" in text and "b1/r2" in text
    assert "lacks 1 cpu" in page and 'data-field="domain">b1/r2' in page


async def test_a_group_no_rack_holds_shows_what_each_rack_lacks(api):
    members = [member(f"g-{i}", 4, {K + "podset-required-topology": RACK}) for i in range(4)]
    _, ext = scheduler(*members)
    async with api(ext) as c:
        view = (await c.get("/debug/pods/team-a/g-0")).json()["topology"]
    assert view["domain"] is None
    assert {d["domain"]: d["holds"] for d in view["domains"]} == {"b1/r2": 3, "b2/r1": 2, "b1/r1": 1}
    assert all("lacks" in d["why"] for d in view["domains"])


async def test_a_pod_whose_annotations_kueue_refuses_shows_the_problem(api):
    bad = member("g-0", 1, {K + "podset-required-topology": RACK, K + "podset-preferred-topology": RACK})
    _, ext = scheduler(bad)
    async with api(ext) as c:
        view = (await c.get("/debug/pods/team-a/g-0")).json()["topology"]
    assert "must not contain more than one topology annotation" in view["problem"]


async def test_a_pod_asking_no_topology_has_no_topology_section(api):
    plain = member("g-0", 1, {})
    _, ext = scheduler(plain)
    async with api(ext) as c:
        assert (await c.get("/debug/pods/team-a/g-0")).json()["topology"] is None


async def test_a_held_group_members_pod_view_renders_as_text(api):
    """A member whose node is held, with no preemption attempt of its own: its preemption section is the hold
    alone (the text render used to fail on it with a 500)."""
    members = [member(f"g-{i}", 2, {}) for i in range(2)]
    _, ext = scheduler(*members)
    Verbs(ext).filter(members[0], NODES)
    async with api(ext) as c:
        r = await c.get("/debug/pods/team-a/g-1", params={"format": "text"})
    assert r.status_code == 200 and "Hold: node" in r.text, r.text


async def test_a_pending_pods_view_shows_the_topology_of_its_own_cluster_queues_flavors(api):
    """Another flavor, of no ClusterQueue of the pod's, names Topology "aaa": the pod's view still shows "default"."""
    other = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "other"},
             "spec": {"nodeLabels": {"other": "yes"}, "topologyName": "aaa"}}
    aaa = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "aaa"},
           "spec": {"levels": [{"nodeLabel": RACK}]}}
    pod = member("g-0", 4, {K + "podset-required-topology": RACK})
    _, ext = scheduler(aaa, other, pod)
    async with api(ext) as c:
        assert (await c.get("/debug/pods/team-a/g-0")).json()["topology"]["topology"] == "default"
