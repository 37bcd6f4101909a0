"""The /debug endpoints on a scenario state: the quota tree, one queue, one pod, recent decisions, explain.

Scenario (SCENARIO below): cohort co holds team-a-cq (on-demand cpu 6 with borrowingLimit 2,
memory 36Gi; spot cpu 4, memory 16Gi; withinClusterQueue LowerPriority) and team-b-cq
(StrictFIFO, on-demand cpu 10 with lendingLimit 4). Running: team-a/run-a (5 CPUs, 4Gi on
od-1), team-b/run-b (8 CPUs on od-2). Pending: team-b/big (12 CPUs, oldest), team-b/small
(1 CPU) and team-a/wait-1 (2 CPUs, 1Gi). So team-a may take 3 more on-demand CPUs (1 of its
own + 2 borrowed, the cohort having 10 - 7 = 3 unused), and team-b 3.
"""
from __future__ import annotations

import asyncio
import copy

import orjson
import pytest

from builders import (ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor,
                      snapshot_yaml)
from helpers import FakeClock, all_usage

def _pod(name: str, namespace: str, *requests: str) -> Pod:
    """A pod of LocalQueue lq in namespace, uid uid-<name>, requesting cpu (and memory)."""
    return Pod(name, namespace).uid(f"uid-{name}").queue("lq").requests(dict(zip(("cpu", "memory"), requests)))


def _node(name: str, instance_type: str) -> dict:
    return Node(name).cpu("16").memory("64Gi").labels({"instance-type": instance_type}).obj()


SCENARIO = snapshot_yaml(
    Namespace("team-a").obj(), Namespace("team-b").obj(),
    ResourceFlavor("on-demand").node_labels({"instance-type": "on-demand"}).obj(),
    ResourceFlavor("spot").node_labels({"instance-type": "spot"}).obj(),
    Cohort("co").obj(),
    ClusterQueue("team-a-cq").cohort("co").preemption({"withinClusterQueue": "LowerPriority"})
    .resource_group(FlavorQuotas("on-demand").resource("cpu", 6, borrowing=2).resource("memory", "36Gi"),
                    FlavorQuotas("spot").resource("cpu", 4).resource("memory", "16Gi")).obj(),
    ClusterQueue("team-b-cq").cohort("co").queueing_strategy("StrictFIFO")
    .resource_group(FlavorQuotas("on-demand").resource("cpu", 10, lending=4)).obj(),
    LocalQueue("lq", "team-a").cluster_queue("team-a-cq").obj(),
    LocalQueue("lq", "team-b").cluster_queue("team-b-cq").obj(),
    _node("od-1", "on-demand"), _node("od-2", "on-demand"), _node("spot-1", "spot"),
    _pod("run-a", "team-a", "5", "4Gi").node("od-1").obj(),
    _pod("run-b", "team-b", "8").node("od-2").obj(),
    _pod("big", "team-b", "12").created(3600).obj(),            # 01:00:00, the oldest pending
    _pod("small", "team-b", "1").created(3610).obj(),
    _pod("wait-1", "team-a", "2", "1Gi").created(3600).obj())

NODES = ["od-1", "od-2", "spot-1"]
T0 = 1_800_000_000.0


CLUSTER = SCENARIO         # the conftest's ext fixture builds it


def filter_for(ext, key: str, names=NODES) -> dict:
    pod = ext.state.store.pod_by_key(key)
    ns, name = key.split("/")
    return {"Pod": {"metadata": {"name": name, "namespace": ns, "uid": pod.uid}}, "Nodes": None, "NodeNames": names}


def bind_for(ext, key: str, node: str) -> dict:
    ns, name = key.split("/")
    return {"PodName": name, "PodNamespace": ns, "PodUID": ext.state.store.pod_by_key(key).uid, "Node": node}


def rows_of(view: dict, name: str) -> dict:
    """(flavor, resource) -> row of one queue in /debug/queues."""
    for kind in ("clusterQueues", "cohorts"):
        for q in view[kind]:
            if q["name"] == name:
                return {(r["flavor"], r["resource"]): r for r in q["resources"]}
    raise KeyError(name)


def snapshot(state) -> dict:
    """Everything explain and the views must leave as it was."""
    return {"pods": {uid: copy.copy(p) for uid, p in state.pods.items()}, "reservations": dict(state.reservations),
            "admitted": dict(state.admitted), "usage": all_usage(state), "learned": dict(state.learned),
            "pending": {k: list(v) for k, v in state.pending.items()}, "generation": state.generation,
            "holds": dict(state.holds)}


# ---- /debug/queues -----------------------------------------------------------------------------
async def test_queues_show_limits_usage_borrowed_lendable_available_and_counts(ext, api):
    async with api(ext) as c:
        r = await c.get("/debug/queues")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    view = r.json()
    a = rows_of(view, "team-a-cq")
    assert a[("on-demand", "cpu")] == {
        "flavor": "on-demand", "resource": "cpu", "nominal": "6", "borrowingLimit": "2", "lendingLimit": None,
        "subtreeQuota": "6", "usage": "5", "running": "5", "reserved": "0", "borrowed": "0", "lendable": "6", "available": "3"}
    assert (a[("on-demand", "memory")]["nominal"], a[("on-demand", "memory")]["usage"],
            a[("on-demand", "memory")]["available"]) == ("36Gi", "4Gi", "32Gi")
    assert a[("spot", "cpu")]["available"] == "4"
    b = rows_of(view, "team-b-cq")[("on-demand", "cpu")]
    # lendingLimit 4: team-b keeps 6 for itself and offers the cohort 4; it may still use 3 (the cohort's unused)
    assert (b["nominal"], b["lendingLimit"], b["usage"], b["lendable"], b["available"]) == ("10", "4", "8", "4", "3")
    co = rows_of(view, "co")[("on-demand", "cpu")]
    assert (co["subtreeQuota"], co["usage"], co["available"]) == ("10", "7", "3")
    queues = {q["name"]: q for q in view["clusterQueues"]}
    assert (queues["team-a-cq"]["pending"], queues["team-a-cq"]["admitted"]) == (1, 1)
    assert (queues["team-b-cq"]["pending"], queues["team-b-cq"]["admitted"]) == (2, 1)
    assert queues["team-b-cq"]["queueingStrategy"] == "StrictFIFO"
    assert queues["team-a-cq"]["fairSharing"] == {"weight": 1.0, "share": 0, "dominantResource": None}
    assert view["cohorts"][0]["clusterQueues"] == ["team-a-cq", "team-b-cq"]


async def test_queues_share_and_borrowed_after_team_a_borrows(ext, api):
    async with api(ext) as c:
        assert (await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))).json()["NodeNames"] == ["od-1", "od-2"]
        assert (await c.post("/bind", json=bind_for(ext, "team-a/wait-1", "od-1"))).json() == {"Error": ""}
        view = (await c.get("/debug/queues")).json()
    row = rows_of(view, "team-a-cq")[("on-demand", "cpu")]
    assert (row["usage"], row["borrowed"], row["available"]) == ("7", "1", "1")
    a = next(q for q in view["clusterQueues"] if q["name"] == "team-a-cq")
    # 1 CPU borrowed of the 14 the cohort can lend (10 on-demand + 4 spot): 71 per mille
    assert a["fairSharing"] == {"weight": 1.0, "share": 71, "dominantResource": "cpu"}
    assert (a["pending"], a["admitted"]) == (0, 2)


async def test_queues_as_text_is_an_aligned_table_in_human_units(ext, api):
    async with api(ext) as c:
        r = await c.get("/debug/queues", params={"format": "text"})
        by_accept = await c.get("/debug/queues", headers={"Accept": "text/plain"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert by_accept.text == r.text
    lines = r.text.splitlines()
    header = next(line for line in lines if line.startswith("QUEUE"))
    row = next(line for line in lines if line.startswith("team-a-cq") and " memory " in line and "on-demand" in line)
    assert row.split() == ["team-a-cq", "on-demand", "memory", "36Gi", "-", "-", "4Gi", "0", "0", "36Gi", "32Gi"]
    for column in ("NOMINAL", "USAGE", "AVAILABLE"):     # columns line up under their headers
        at = header.index(column)
        assert row[at - 1] == " " and row[at] != " "
    summary = next(line for line in lines if line.startswith("team-b-cq") and "StrictFIFO" in line)
    assert summary.split() == ["team-b-cq", "co", "active", "StrictFIFO", "2", "0", "1", "1", "0"]


async def test_unknown_format_is_refused(ext, api):
    async with api(ext) as c:
        r = await c.get("/debug/queues", params={"format": "xml"})
    assert r.status_code == 400 and r.json()["error"] == "format 'xml' is not one of json, text"


# ---- /debug/queues/{name} ------------------------------------------------------------------------
async def test_queue_lists_pending_pods_in_queue_order_with_why_each_waits(ext, api):
    async with api(ext) as c:
        b = (await c.get("/debug/queues/team-b-cq")).json()
        a = (await c.get("/debug/queues/team-a-cq")).json()
    assert [(p["position"], p["pod"], p["rule"]) for p in b["pendingPods"]] == [
        (1, "team-b/big", "QuotaExceeded"), (2, "team-b/small", "StrictFIFO")]
    big, small = b["pendingPods"]
    assert big["why"] == ("ClusterQueue team-b-cq flavor on-demand: cpu request 12 > 3 available "
                          "(team-b-cq uses 8 of its nominal 10; cohort co has 3 unused)")
    assert small["why"].startswith("StrictFIFO: team-b/big is ahead in ClusterQueue team-b-cq and does not fit")
    assert small["requests"] == {"cpu": "1", "pods": "1"}
    assert [p["pod"] for p in b["admittedPods"]] == ["team-b/run-b"] and b["admittedPods"][0]["node"] == "od-2"
    [wait] = a["pendingPods"]
    assert (wait["pod"], wait["rule"]) == ("team-a/wait-1", "Admitted")
    assert wait["why"] == "fits now (flavor on-demand, borrowing); waits for kube-scheduler to call filter"


async def test_queue_limit_and_the_verbs_run_between_its_decisions(ext, api, monkeypatch):
    """Each pending pod's row is a decision; the route yields to the event loop between rows,
    so a long BestEffortFIFO queue cannot hold the verbs up."""
    from app.observe import view_query

    seen: list[str] = []
    real = view_query.pending_rows

    def rows(*args):
        for row in real(*args):
            seen.append(row["pod"])
            yield row
    monkeypatch.setattr(view_query, "pending_rows", rows)
    done = False

    async def ticker():
        while not done:
            seen.append("tick")
            await asyncio.sleep(0)
    async with api(ext) as c:
        task = asyncio.create_task(ticker())
        view = (await c.get("/debug/queues/team-b-cq")).json()
        done = True
        await task
        one = (await c.get("/debug/queues/team-b-cq?limit=1")).json()
    assert [p["pod"] for p in view["pendingPods"]] == ["team-b/big", "team-b/small"]
    between = seen[seen.index("team-b/big") + 1:seen.index("team-b/small")]
    assert "tick" in between
    assert [p["pod"] for p in one["pendingPods"]] == ["team-b/big"]
    assert one["pendingNote"] == "1 of 2 pending pods shown (at most 1; maxQueueScan 200)"


async def test_queue_shows_reservations_and_the_last_decision(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        await c.post("/filter", json=filter_for(ext, "team-b/small"))
        ext.state.clock.advance(10)
        a = (await c.get("/debug/queues/team-a-cq")).json()
        b = (await c.get("/debug/queues/team-b-cq")).json()
    assert a["pendingPods"] == [] and (a["pending"], a["reserving"]) == (0, 1)
    assert a["reservations"] == [{"pod": "team-a/wait-1", "flavors": {"cpu": "on-demand", "memory": "on-demand"},
                                  "usage": {"on-demand": {"cpu": "2", "memory": "1Gi"}}, "expiresIn": 20.0}]
    row = next(r for r in a["resources"] if (r["flavor"], r["resource"]) == ("on-demand", "cpu"))
    assert (row["usage"], row["reserved"], row["borrowed"]) == ("7", "2", "1")
    small = b["pendingPods"][1]
    assert small["lastDecision"] == {"verb": "filter", "outcome": "StrictFIFO", "at": "2027-01-15T08:00:00.000Z"}


async def test_queue_as_text_names_pods_rules_and_reasons(ext, api):
    async with api(ext) as c:
        text = (await c.get("/debug/queues/team-b-cq?format=text")).text
    assert "ClusterQueue: team-b-cq" in text and "Strategy:     StrictFIFO" in text
    assert "Pods:         2 pending, 0 reserving, 1 admitted" in text
    line = next(line for line in text.splitlines() if "team-b/small" in line)
    assert line.split()[:4] == ["2", "team-b/small", "0", "cpu=1,pods=1"] and "StrictFIFO: team-b/big is ahead" in line


async def test_cohort_by_name(ext, api):
    async with api(ext) as c:
        view = (await c.get("/debug/queues/co")).json()
    assert view["kind"] == "Cohort" and view["clusterQueues"] == ["team-a-cq", "team-b-cq"] and view["pending"] == 3
    assert {(r["flavor"], r["resource"]): r["lendable"] for r in view["resources"]}[("on-demand", "cpu")] == "10"


async def test_unknown_queue_is_404_naming_what_was_looked_up(ext, api):
    async with api(ext) as c:
        r = await c.get("/debug/queues/team-z-cq")
        t = await c.get("/debug/queues/team-z-cq?format=text")
    assert r.status_code == 404
    assert r.json() == {"error": "no ClusterQueue or Cohort named 'team-z-cq'", "lookedUp": "team-z-cq",
                        "known": ["team-a-cq", "team-b-cq", "co"]}
    assert t.status_code == 404 and t.text.startswith("error: no ClusterQueue or Cohort named 'team-z-cq'")


# ---- /debug/pods/{namespace}/{name} ----------------------------------------------------------------
async def test_pod_admitted_by_filter_shows_flavor_nodes_rejected_and_reservation(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        view = (await c.get("/debug/pods/team-a/wait-1")).json()
    assert view["status"] == "reserved"
    f = view["filter"]
    assert (f["outcome"], f["answer"], f["offered"], f["passing"], f["borrowing"]) == ("Admitted", "NodeNames", 3, 2, True)
    assert f["flavorChosen"] == {"cpu": "on-demand", "memory": "on-demand"}
    assert f["nodesRejected"] == [{"reason": "not in the pod's flavor(s) on-demand (left out of NodeNames)", "nodes": 1}]
    assert view["reservation"]["flavors"] == {"cpu": "on-demand", "memory": "on-demand"}
    assert view["reservation"]["expiresIn"] == 30.0
    assert (view["gang"], view["backoff"]) == ("none", "none")
    assert view["preemption"] == {"considered": False, "note": "no preemption was tried for this pod"}


async def test_pod_bound_shows_its_charge_and_bind(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        await c.post("/bind", json=bind_for(ext, "team-a/wait-1", "od-2"))
        view = (await c.get("/debug/pods/team-a/wait-1")).json()
        text = (await c.get("/debug/pods/team-a/wait-1?format=text")).text
    assert (view["status"], view["node"]) == ("admitted", "od-2")
    assert view["charge"] == {"clusterQueue": "team-a-cq", "flavors": {"cpu": "on-demand", "memory": "on-demand"},
                              "usage": {"on-demand": {"cpu": "2", "memory": "1Gi"}}, "inferred": False,
                              "admittedAt": "2027-01-15T08:00:00.000Z", "admittedAtSource": "bind",
                              "admittedAtNote": "Quotient bound it then (its own clock, to the second)"}
    assert "Admitted:     2027-01-15T08:00:00.000Z (from bind)" in text
    assert view["bind"]["outcome"] == "Bound" and view["bind"]["node"] == "od-2"
    assert [d["verb"] for d in view["decisions"]] == ["bind", "filter"]
    assert "Status:       admitted: running on od-2, charged to team-a-cq" in text
    assert "Flavor chosen: cpu=on-demand,memory=on-demand" in text


async def test_pod_refused_shows_the_rule_and_nodes_rejected_by_reason(ext, api):
    async with api(ext) as c:
        answer = (await c.post("/filter", json=filter_for(ext, "team-b/small"))).json()
        view = (await c.get("/debug/pods/team-b/small")).json()
    reason = answer["Error"]          # queue order clears once quota frees: a retry (app/refusals.py)
    assert view["status"] == "pending"
    f = view["filter"]
    assert (f["outcome"], f["answer"], f["passing"]) == ("StrictFIFO", "Error (retry: QuotaInUse)", 0)
    assert reason.startswith(f["nodesRejected"][0]["reason"]) and f["nodesRejected"][0]["nodes"] == 3
    assert view["now"]["rule"] == "StrictFIFO" and view["now"]["pendingAhead"] == 1
    assert "team-b/big is ahead" in view["now"]["reason"]


async def test_pod_quota_exceeded_lists_flavors_tried(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-b/big"))
        view = (await c.get("/debug/pods/team-b/big")).json()
    f = view["filter"]
    assert f["outcome"] == "QuotaExceeded"
    assert f["flavorsTried"] == ["ClusterQueue team-b-cq flavor on-demand: cpu request 12 > 3 available "
                                 "(team-b-cq uses 8 of its nominal 10; cohort co has 3 unused)"]


async def test_pod_preemption_shows_victims_per_node_and_the_hold_then_the_victim_its_preemptor(ext, api):
    urgent = {"metadata": {"name": "urgent", "namespace": "team-a", "uid": "uid-urgent",
                           "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "creationTimestamp": "2026-01-01T02:00:00Z"},
              "spec": {"priority": 100, "containers": [{"name": "c", "resources": {"requests": {"cpu": "6"}}}]}}
    async with api(ext) as c:
        await c.post("/filter", json={"Pod": urgent, "Nodes": None, "NodeNames": NODES})
        before = (await c.get("/debug/pods/team-a/urgent")).json()
        text = (await c.get("/debug/pods/team-a/urgent?format=text")).text
        await ext.actions.settle()              # evicted at once, by the filter's decision
        assert await ext.reconcile() == 0
        victim = (await c.get("/debug/pods/team-a/run-a")).json()
    p = before["preemption"]
    assert (p["considered"], p["outcome"], p["node"]) == (True, "Preempting", "od-1")
    assert p["victims"] == {"od-1": ["team-a/run-a"]} and p["reasons"] == ["InClusterQueue"]
    assert p["hold"]["node"] == "od-1" and p["hold"]["victims"] == ["team-a/run-a"]
    assert "Victims per node:" in text and "od-1   team-a/run-a" in text
    assert victim["status"] == "gone"
    assert victim["preemptedBy"]["preemptor"] == "team-a/urgent" and victim["preemptedBy"]["reason"] == "InClusterQueue"
    assert victim["preemptedBy"]["evicted"] is True


async def test_pod_preempt_entry_keys_are_shown_as_recorded(ext, api):
    """Whatever the preempt verb records (candidates, victim groups, why other nodes lost) is shown."""
    ext.journal.record({"time": T0, "verb": "preempt", "pod": "team-b/big", "outcome": "NoPreemption",
                        "reason": "no node frees enough", "queue": "team-b-cq", "candidates": ["od-1", "od-2"],
                        "victims": {}, "why_not": {"od-1": "victims would still leave 2 CPUs short"}})
    async with api(ext) as c:
        view = (await c.get("/debug/pods/team-b/big")).json()
        text = (await c.get("/debug/pods/team-b/big?format=text")).text
    p = view["preemption"]
    assert (p["verb"], p["outcome"], p["candidates"]) == ("preempt", "NoPreemption", ["od-1", "od-2"])
    assert p["whyNot"] == {"od-1": "victims would still leave 2 CPUs short"}
    assert "Why other nodes lost:" in text and "od-1   victims would still leave 2 CPUs short" in text


async def test_unknown_pod_is_404_naming_what_was_looked_up(ext, api):
    async with api(ext) as c:
        r = await c.get("/debug/pods/team-a/nope")
    assert r.status_code == 404
    assert r.json() == {"error": "pod team-a/nope is not known to Quotient: no such pod in its state and no "
                                 "decision recorded about it", "lookedUp": "team-a/nope"}


# ---- /debug/decisions ----------------------------------------------------------------------------
async def test_decisions_newest_first_filtered_by_queue_and_pod(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        await c.post("/filter", json=filter_for(ext, "team-b/small"))
        await c.post("/bind", json=bind_for(ext, "team-a/wait-1", "od-1"))
        recent = (await c.get("/debug/decisions?limit=2")).json()
        team_b = (await c.get("/debug/decisions", params={"queue": "team-b-cq"})).json()
        wait = (await c.get("/debug/decisions", params={"pod": "team-a/wait-1"})).json()
        text = (await c.get("/debug/decisions?format=text")).text
    assert [(d["verb"], d["pod"], d["outcome"]) for d in recent["decisions"]] == [
        ("bind", "team-a/wait-1", "Bound"), ("filter", "team-b/small", "StrictFIFO")]
    assert (recent["limit"], recent["count"], recent["buffer"]) == (2, 2, 1000)
    assert [d["pod"] for d in team_b["decisions"]] == ["team-b/small"]
    assert team_b["decisions"][0]["reason"].startswith("StrictFIFO: team-b/big is ahead")
    assert [(d["verb"], d.get("node")) for d in wait["decisions"]] == [("bind", "od-1"), ("filter", None)]
    assert wait["decisions"][1]["outsideFlavor"] == 1 and wait["decisions"][1]["flavors"]["cpu"] == "on-demand"
    assert "3 decision(s), newest first (limit 50, ring of 1000)" in text
    assert any(line.split()[1:5] == ["bind", "team-a/wait-1", "team-a-cq", "Bound"] for line in text.splitlines())


async def test_decisions_limit_is_clamped_to_the_ring_and_checked(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        big = (await c.get("/debug/decisions?limit=50000")).json()
        bad = await c.get("/debug/decisions?limit=lots")
        zero = await c.get("/debug/decisions?limit=0")
    assert (big["limit"], big["count"]) == (1000, 1)
    assert big["clamped"] == "limit 50000 is beyond the ring of 1000 decisions; clamped to 1000"
    assert bad.status_code == 400 and bad.json()["error"] == "limit must be a whole number, got 'lots'"
    assert zero.status_code == 400 and zero.json()["error"] == "limit must be at least 1, got 0"


# ---- POST /debug/explain ---------------------------------------------------------------------------
def pod_yaml(name: str, cpu: str, namespace: str = "team-a", extra: str = "") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{kueue.x-k8s.io/queue-name: lq}}
spec:
  containers:
  - name: c
    resources: {{requests: {{cpu: "{cpu}"}}}}
{extra}"""


async def test_explain_admits_with_flavor_and_nodes_and_changes_nothing(ext, api):
    """team-a/wait-1 (2 CPUs) is ahead in queue order and takes its quota first: 1 on-demand CPU is left."""
    before = snapshot(ext.state)
    async with api(ext) as c:
        r = await c.post("/debug/explain", content=pod_yaml("what-if", "1"))
        text = (await c.post("/debug/explain?format=text", content=pod_yaml("what-if", "1"))).text
    assert r.status_code == 200
    view = r.json()
    d = view["decision"]
    assert (d["rule"], d["admit"], d["answer"], d["borrowing"]) == ("Admitted", True, "NodeNames", True)
    assert d["flavors"] == {"cpu": "on-demand"}
    assert view["nodes"] == {"offered": 3, "passing": 2, "outsideFlavor": 1, "names": ["od-1", "od-2"],
                             "offeredFrom": "every node"}
    assert (view["clusterQueue"], view["priority"], view["pendingAhead"]) == ("team-a-cq", 0, 1)
    assert "Rule:          Admitted" in text and "Nodes:         2 of 3 (every node) pass: od-1, od-2" in text
    after = snapshot(ext.state)
    assert after == before
    assert ext.state.store.pod_by_key("team-a/what-if") is None and "team-a/what-if" not in ext.journal.by_pod


async def test_explain_tries_the_next_flavor_and_says_why(ext, api):
    """The numbers count team-a/wait-1, ahead in queue order: 5 running + 2 ahead of the nominal 6."""
    async with api(ext) as c:
        view = (await c.post("/debug/explain", content=pod_yaml("three", "3"))).json()
    d = view["decision"]
    assert d["rule"] == "Admitted" and d["flavors"] == {"cpu": "spot"} and d["borrowing"] is False
    assert d["flavorsTried"] == ["ClusterQueue team-a-cq flavor on-demand: cpu request 3 > 1 available (team-a-cq "
                                 "uses 7 of its nominal 6; borrowing limit 2; cohort co has 1 unused)"]
    assert view["nodes"]["names"] == ["spot-1"]


async def test_explain_refusal_names_rule_and_numbers(ext, api):
    before = snapshot(ext.state)
    async with api(ext) as c:
        view = (await c.post("/debug/explain", json={"metadata": {"name": "huge", "namespace": "team-a",
                                                                  "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                                                     "spec": {"containers": [{"name": "c", "resources": {
                                                         "requests": {"cpu": "20"}}}]}})).json()
        strict = (await c.post("/debug/explain", content=pod_yaml("after-big", "1", "team-b"))).json()
    d = view["decision"]
    assert (d["rule"], d["admit"], d["answer"]) == ("QuotaExceeded", False, "FailedAndUnresolvableNodes")
    assert "cpu request 20 > 8 at most (nominal 6 + borrowing limit 2)" in d["reason"]
    assert strict["decision"]["rule"] == "StrictFIFO" and strict["pendingAhead"] == 2
    assert snapshot(ext.state) == before


async def test_explain_an_extender_args_body_uses_its_node_names(ext, api):
    body = {"Pod": {"metadata": {"name": "spot-only", "namespace": "team-a",
                                 "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
            "Nodes": None, "NodeNames": ["spot-1"]}
    async with api(ext) as c:
        view = (await c.post("/debug/explain", content=orjson.dumps(body),
                             headers={"Content-Type": "application/json"})).json()
    d = view["decision"]
    assert d["flavors"] == {"cpu": "spot"}
    assert any("flavor on-demand: none of the nodes kube-scheduler offered" in t for t in d["flavorsTried"])
    assert view["nodes"]["offeredFrom"] == "NodeNames" and view["nodes"]["names"] == ["spot-1"]


async def test_explain_a_known_pod_does_not_count_itself_ahead(ext, api):
    async with api(ext) as c:
        view = (await c.post("/debug/explain", content=pod_yaml("wait-1", "2"))).json()
    assert view["known"] == "pending" and view["pendingAhead"] == 0 and view["decision"]["admit"] is True


@pytest.mark.parametrize("body, content_type, error", [
    (b"", "", "explain: empty body: send a Pod manifest (JSON or YAML)"),
    (b"{\"metadata\": ", "application/json", "explain: body is not valid JSON: "),
    (b"metadata: [unclosed", "application/yaml", "explain: body is neither JSON nor YAML: "),
    (b"- a\n- b\n", "", "explain: expected a Pod manifest (a mapping), got list"),
    (b"kind: Deployment\nmetadata: {name: d}\n", "", "explain: expected kind Pod, got kind 'Deployment'"),
    (b"kind: Pod\nmetadata: {namespace: team-a}\n", "", "explain: Pod ?: metadata.name is required"),
    (b"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n", "",
     "explain: Pod default/p: container c: cpu: 'lots' is not a Kubernetes quantity"),
    (b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "od-1"}', "", 'explain: "NodeNames" must be a list'),
])
async def test_explain_bad_body_is_400_naming_the_problem(ext, api, body, content_type, error):
    before = snapshot(ext.state)
    async with api(ext) as c:
        r = await c.post("/debug/explain", content=body, headers={"Content-Type": content_type} if content_type else {})
    assert r.status_code == 400
    assert r.json()["error"].startswith(error), r.json()
    assert snapshot(ext.state) == before
