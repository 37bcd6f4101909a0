"""The web view at /ui: every page shows the numbers of its /debug twin, the bars are drawn from them on one
scale per resource, hierarchical cohorts nest, names and reasons a user controls are escaped, the view is
read-only and self-contained, and --view-port serves it without client certificates (the browser itself is
driven in test_ui_browser.py).

The scenario is test_debug's: cohort co holds team-a-cq (on-demand cpu 6, borrowingLimit 2) and team-b-cq
(StrictFIFO, on-demand cpu 10, lendingLimit 4); team-a borrows once team-a/wait-1 (2 CPUs) is bound.
"""
from __future__ import annotations

import httpx
import pytest

from app.api.app import create_view_app
from app.objects.quantity import magnitude
from app.ui import bars
from builders import ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Namespace, Node, ResourceFlavor, snapshot_yaml
from helpers import FakeClock
from html_page import Page
from serving import served
from test_debug import NODES, SCENARIO, T0, bind_for, filter_for

FIELDS = ("usage", "subtreeQuota", "borrowed", "reserved", "lendable", "available", "borrowingLimit",
          "lendingLimit")


CLUSTER = SCENARIO         # the conftest's ext fixture builds it


async def borrow(c, ext) -> None:
    """team-a/wait-1 (2 CPUs) filtered and bound: team-a-cq uses 7 of its nominal 6 on-demand CPUs."""
    assert (await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))).json()["NodeNames"] == ["od-1", "od-2"]
    assert (await c.post("/bind", json=bind_for(ext, "team-a/wait-1", "od-1"))).json() == {"Error": ""}


async def page(c, path: str) -> Page:
    r = await c.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    return Page(r.text)


def shown(value) -> str:
    return "-" if value is None else str(value)


def resource_rows(p: Page) -> dict[tuple[str, str, str], dict[str, str]]:
    """(queue, flavor, resource) -> the numbers its row shows."""
    return {(r.attrs["data-queue"], r.attrs["data-flavor"], r.attrs["data-resource"]): {f: r.field(f) for f in FIELDS}
            for r in p.find("tr", {"class": "resource"})}


def twin_rows(view: dict) -> dict[tuple[str, str, str], dict[str, str]]:
    return {(q["name"], r["flavor"], r["resource"]): {f: shown(r[f]) for f in FIELDS}
            for kind in ("clusterQueues", "cohorts") for q in view[kind] for r in q["resources"]}


# ---- the tree --------------------------------------------------------------------------------------------
async def test_the_tree_shows_every_number_of_debug_queues(ext, api):
    async with api(ext) as c:
        await borrow(c, ext)
        # team-a-cq's last free on-demand CPU, held by a reservation (filtered, not bound)
        held = {"metadata": {"name": "held-1", "namespace": "team-a", "uid": "uid-held-1",
                             "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
        assert (await c.post("/filter", json={"Pod": held, "Nodes": None, "NodeNames": NODES})).json()["NodeNames"]
        tree = await page(c, "/ui")
        view = (await c.get("/debug/queues")).json()
    assert resource_rows(tree) == twin_rows(view)
    a_cpu = resource_rows(tree)[("team-a-cq", "on-demand", "cpu")]
    assert (a_cpu["usage"], a_cpu["borrowed"], a_cpu["reserved"], a_cpu["available"]) == ("8", "2", "1", "0")
    segments, _ = bar_of(tree, "team-a-cq", "on-demand", "cpu")
    assert set(segments) == {"used", "borrowed", "reserved-borrowed"}       # the reservation is the borrowed tail
    for q in view["clusterQueues"]:
        node = tree.one("li", {"data-kind": "ClusterQueue", "data-name": q["name"]})
        head = {f: node.field(f) for f in ("status", "queueingStrategy", "share", "pending", "reserving", "admitted")}
        assert head == {"status": q["status"], "queueingStrategy": q["queueingStrategy"],
                        "share": str(q["fairSharing"]["share"]), "pending": str(q["pending"]),
                        "reserving": str(q["reserving"]), "admitted": str(q["admitted"])}
        # the queue sits under its cohort's node
        assert [a.attrs["data-name"] for a in node.ancestors() if a.tag == "li"] == [q["cohort"]]


def bar_of(p: Page, queue: str, flavor: str, resource: str):
    row = next(r for r in p.find("tr", {"class": "resource"})
               if (r.attrs["data-queue"], r.attrs["data-flavor"], r.attrs["data-resource"]) == (queue, flavor, resource))
    segments = {s.attrs["data-kind"]: (float(s.attrs["x"]), float(s.attrs["width"]))
                for s in row.find("rect", {"class": "seg"})}
    return segments, float(row.one("rect", {"class": "nominal"}).attrs["x"])


async def test_a_borrowing_queue_bar_shows_borrowed_usage_on_the_scale_every_queue_shares(ext, api):
    async with api(ext) as c:
        await borrow(c, ext)
        tree = await page(c, "/ui")
    # cpu scale over the ClusterQueues: team-b's nominal 10 (its usage 8 + available 1 is less)
    a, a_nominal = bar_of(tree, "team-a-cq", "on-demand", "cpu")
    b, b_nominal = bar_of(tree, "team-b-cq", "on-demand", "cpu")
    assert (a_nominal, b_nominal) == (60.0, 100.0)
    assert a["used"] == (0.0, 60.0) and a["borrowed"] == (60.0, 10.0) and a["left"] == (70.0, 10.0)
    assert b["used"] == (0.0, 80.0) and "borrowed" not in b


def row(**amounts) -> dict:
    base = {"resource": "cpu", "usage": "0", "reserved": "0", "subtreeQuota": "0", "borrowed": "0",
            "available": "0", "lendable": "0"}
    return {**base, **{k: str(v) for k, v in amounts.items()}}


def test_a_reservation_is_the_tail_of_the_usage_on_both_sides_of_the_nominal_quota():
    b = bars.bar(row(usage=8, reserved=3, subtreeQuota=6, borrowed=2, available=2, lendable=4), scale=10.0)
    assert [(s.kind, s.x, s.width) for s in b.segments] == [
        ("used", 0, 50), ("reserved", 50, 10), ("reserved-borrowed", 60, 20), ("left", 80, 20)]
    assert b.nominal == 60 and b.lends == (20, 40)
    # a Cohort's row has no reserved figure; memory is parsed as the row writes it
    m = bars.bar({**row(usage="1Gi", subtreeQuota="4Gi", available="3Gi"), "resource": "memory", "reserved": None},
                 scale=magnitude("8Gi"))
    assert [(s.kind, s.x, s.width) for s in m.segments] == [("used", 0, 12.5), ("left", 12.5, 37.5)]
    # what a bar cannot draw is left out, never an error: no quota at all, a figure that is not a quantity
    assert bars.bar(row(), scale=bars.scales([row()])["cpu"]).segments == []
    assert bars.bar(row(usage="lots", subtreeQuota="-3", available="2"), scale=4.0).segments == [
        bars.Segment("left", 0, 50)]


def test_quotas_whose_sum_is_beyond_what_one_queue_may_hold_still_draw(build_extender):
    """Each ClusterQueue's 3Ei of memory is valid; their cohort's 6Ei passes the parser's bound for one quantity."""
    flavor = ResourceFlavor("default-flavor").obj()
    queues = [ClusterQueue(name).cohort("big").resource_group(
        FlavorQuotas("default-flavor").resource("memory", "3Ei")).obj() for name in ("a", "b")]
    ext = build_extender(snapshot_yaml(Namespace("team-a").obj(), flavor, Node("n1").cpu("8").obj(), *queues))
    from app.api.app import create_app
    with httpx.Client(transport=_SyncASGI(create_app(ext)), base_url="http://test") as c:
        answers = [c.get(path) for path in ("/ui", "/ui/queues/big", "/ui/queues/a")]
    assert [r.status_code for r in answers] == [200, 200, 200]
    cohort = next(r for r in Page(answers[0].text).find("tr", {"class": "resource"}) if r.attrs["data-queue"] == "big")
    assert (cohort.field("subtreeQuota"), float(cohort.one("rect", {"class": "nominal"}).attrs["x"])) == ("6291456Ti", 100.0)


def test_hierarchical_cohorts_nest_and_an_implicit_cohort_is_named_so(build_extender):
    text = snapshot_yaml(
        Namespace("team-a").obj(), ResourceFlavor("default-flavor").obj(), Node("n1").cpu("64").obj(),
        Cohort("org").obj(), Cohort("dept").parent("org").obj(),
        ClusterQueue("leaf-cq").cohort("dept").resource_group(FlavorQuotas("default-flavor").resource("cpu", 8)).obj(),
        ClusterQueue("loose-cq").cohort("nobody").resource_group(
            FlavorQuotas("default-flavor").resource("cpu", 2)).obj(),
        ClusterQueue("alone-cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", 4)).obj(),
        LocalQueue("q", "team-a").cluster_queue("leaf-cq").obj())
    ext = build_extender(text)
    from app.api.app import create_app
    with httpx.Client(transport=_SyncASGI(create_app(ext)), base_url="http://test") as c:
        tree = Page(c.get("/ui").text)
    leaf = tree.one("li", {"data-name": "leaf-cq"})
    assert [a.attrs["data-name"] for a in leaf.ancestors() if a.tag == "li"] == ["dept", "org"]
    assert [a.attrs["data-name"] for a in tree.one("li", {"data-name": "alone-cq"}).ancestors() if a.tag == "li"] == []
    implicit = tree.one("li", {"data-name": "nobody"})
    assert "implicit" in implicit.find("h2")[0].text
    assert {li.attrs["data-name"] for li in tree.find("li", {"data-kind": "ClusterQueue"})} == {
        "leaf-cq", "loose-cq", "alone-cq"}


class _SyncASGI(httpx.BaseTransport):
    """httpx's ASGI transport for a synchronous test: each request on its own event loop."""

    def __init__(self, app):
        self.inner = httpx.ASGITransport(app=app)

    def handle_request(self, request):
        import asyncio

        async def send():
            answer = await self.inner.handle_async_request(request)
            body = await answer.aread()
            return httpx.Response(answer.status_code, headers=answer.headers, content=body)
        return asyncio.run(send())


# ---- one ClusterQueue ------------------------------------------------------------------------------------
async def test_a_queue_page_shows_its_pending_pods_in_order_with_the_rule_of_debug_queues(ext, api):
    async with api(ext) as c:
        p = await page(c, "/ui/queues/team-b-cq")
        view = (await c.get("/debug/queues/team-b-cq")).json()
    pending = [(r.attrs["data-pod"], r.field("rule"), r.field("why"))
               for r in p.one("table", {"class": "pending"}).find("tr") if "data-pod" in r.attrs]
    assert pending == [(x["pod"], x["rule"], " ".join(x["why"].split())) for x in view["pendingPods"]]
    assert [x[0] for x in pending] == ["team-b/big", "team-b/small"]
    assert pending[1][1] == "StrictFIFO"
    running = [r.attrs["data-pod"] for r in p.one("table", {"class": "running"}).find("tr") if "data-pod" in r.attrs]
    assert running == [a["pod"] for a in view["admittedPods"]] == ["team-b/run-b"]
    assert resource_rows(p) == twin_rows({"clusterQueues": [view], "cohorts": []})
    assert (p.field("pending"), p.field("reserving"), p.field("admitted")) == ("2", "0", "1")


async def test_a_queue_page_lists_the_preemptions_it_made_and_suffered(ext, api):
    urgent = {"metadata": {"name": "urgent", "namespace": "team-a", "uid": "uid-urgent",
                           "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "creationTimestamp": "2026-01-01T02:00:00Z"},
              "spec": {"priority": 100, "containers": [{"name": "c", "resources": {"requests": {"cpu": "6"}}}]}}
    async with api(ext) as c:
        await c.post("/filter", json={"Pod": urgent, "Nodes": None, "NodeNames": NODES})
        await ext.actions.settle()              # run-a evicted at once, for urgent (same ClusterQueue)
        p = await page(c, "/ui/queues/team-a-cq")
        view = (await c.get("/debug/queues/team-a-cq")).json()
    made, suffered = p.find("table", {"class": "preemptions"})
    assert [[td.text for td in r.find("td")] for r in made.find("tr")[1:]] == [
        [e["at"], e["verb"], e["pod"], e["queue"], "od-1team-a/run-a", " ".join(e["reason"].split())]
        for e in view["preemptions"]["made"]]
    assert [e["pod"] for e in view["preemptions"]["made"]] == ["team-a/urgent"]
    # within one ClusterQueue: made and suffered alike
    assert [(e["pod"], e["victimQueues"]) for e in view["preemptions"]["suffered"]] == [("team-a/urgent", ["team-a-cq"])]
    assert "team-a/run-a" in suffered.text


async def test_a_preemption_through_kube_schedulers_preempt_verb_is_suffered_by_the_victims_queue(
        build_extender, api):
    from builders import Pod
    from helpers import Verbs, one_queue
    from test_readiness import admit

    ext = build_extender(snapshot_yaml(*one_queue(4, preemption={"withinClusterQueue": "LowerPriority"})))
    low, high = Pod("low").queue("q").cpu("4").priority(1).wire(), Pod("high").queue("q").cpu("4").priority(100).wire()
    verbs = Verbs(ext)
    await admit(verbs, low)
    low_uid = ext.state.store.pod_by_key("team-a/low").uid
    node = ext.state.pods[low_uid].node_name
    answer = verbs.preempt(high, {node: [low_uid]})           # kube-scheduler's dry run named low
    assert answer["NodeNameToMetaVictims"][node]["Pods"] == [{"UID": low_uid}]
    async with api(ext) as c:
        view = (await c.get("/debug/queues/cq")).json()
        text = (await c.get("/debug/queues/cq?format=text")).text
        p = await page(c, "/ui/queues/cq")
    suffered_text = text.split("Preemptions suffered:\n", 1)[1]
    assert suffered_text.splitlines()[1].split()[1:4] == ["preempt", "team-a/high", "cq"]
    entries = [(e["verb"], e["pod"], e["victimQueues"]) for e in view["preemptions"]["suffered"]]
    assert entries == [("preempt", "team-a/high", ["cq"])]
    made, suffered = p.find("table", {"class": "preemptions"})
    assert "team-a/low" in suffered.text and "team-a/high" in made.text


async def test_a_queue_page_shows_waitforpodsready_holds_and_requeues(build_extender, api):
    from helpers import Verbs
    from test_readiness import START, admit, owned, snapshot, timed_out_and_recreated, watch, wfpr

    config = wfpr(timeout="60s", requeuingStrategy={"backoffLimitCount": 0})
    clock = FakeClock(START)
    x, y = owned("x", "x"), owned("y", "y", at=1)
    ext = build_extender(snapshot(pending=[]), config=config, clock=clock)
    watch(ext, x)
    await timed_out_and_recreated(ext, clock, x)      # x evicted, deactivated (backoffLimitCount 0), x-r1 pending
    watch(ext, y)
    await admit(Verbs(ext), y)                           # admitted, not Ready yet
    async with api(ext) as c:
        p = await page(c, "/ui/queues/cq")
        view = (await c.get("/debug/queues/cq")).json()
    ready = view["podsReady"]
    assert ready["enabled"] is True
    assert [w["workload"] for w in ready["waiting"]] == ["team-a/Job/y"]
    assert [(w["workload"], w["count"], w["deactivated"]) for w in ready["requeued"]] == [("team-a/Job/x", 1, True)]
    text = p.text
    assert "team-a/Job/y" in text and "reactivate with POST /debug/workloads/team-a/Job/x/reactivate" in text
    from app.observe.views import pods_ready_view
    cut = pods_ready_view(ext.state, "cq", limit=0)
    assert (cut["waiting"], cut["waitingNote"], cut["requeuedNote"]) == ([], "0 of 1 shown", "0 of 1 shown")


# ---- a pod, and the journal ------------------------------------------------------------------------------
async def test_a_pod_page_shows_its_status_rule_and_last_decisions_as_debug_pods(ext, api):
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-b/big"))
        p = await page(c, "/ui/pods/team-b/big")
        view = (await c.get("/debug/pods/team-b/big")).json()
    assert (p.field("status"), p.field("rule"), p.field("reason"), p.field("pendingAhead")) == (
        view["status"], view["now"]["rule"], " ".join(view["now"]["reason"].split()), str(view["now"]["pendingAhead"]))
    assert view["now"]["rule"] == "QuotaExceeded"
    decisions = p.one("table", {"class": "decisions"})
    assert [r.field("outcome") for r in decisions.find("tr")[1:]] == [e["outcome"] for e in view["decisions"]]
    assert " ".join(view["decisions"][0]["reason"].split()) in decisions.text


async def test_the_journal_page_and_its_rows_match_debug_decisions_with_the_same_filter(ext, api):
    async with api(ext) as c:
        await borrow(c, ext)
        await c.post("/filter", json=filter_for(ext, "team-b/big"))
        counts = []
        for query in ("", "?queue=team-a-cq", "?pod=team-b/big", "?queue=team-b-cq&pod=team-a/wait-1"):
            full = await page(c, "/ui/decisions" + query)
            rows = Page((await c.get("/ui/decisions/rows" + query)).text)
            view = (await c.get("/debug/decisions" + query)).json()
            body = full.one("tbody", {"id": "decision-rows"})
            expected = [(e["pod"], e["outcome"]) for e in view["decisions"]]
            assert [(r.attrs["data-pod"], r.field("outcome")) for r in body.find("tr") if "data-pod" in r.attrs] \
                == expected
            assert [(r.attrs["data-pod"], r.field("outcome")) for r in rows.find("tr") if "data-pod" in r.attrs] \
                == expected
            twin = full.one("span", {"class": "readonly"}).find("a")[0].attrs["href"]
            assert (await c.get(twin)).json() == view         # the page links the very view it shows
            counts.append(len(expected))
    assert counts == [3, 2, 1, 0]        # filter+bind of wait-1, then big's filter; the last filter matches nothing


async def test_the_journal_page_shows_as_many_decisions_as_its_twin_and_takes_its_limit(ext, api):
    for i in range(80):
        ext.journal.record({"time": T0 + i, "verb": "filter", "pod": f"team-a/p-{i}", "outcome": "QuotaExceeded",
                            "reason": "", "queue": "team-a-cq"})
    async with api(ext) as c:
        shown = {}
        for query in ("", "?limit=5", "?limit=5000"):
            p = await page(c, "/ui/decisions" + query)
            twin = (await c.get(p.one("span", {"class": "readonly"}).find("a")[0].attrs["href"])).json()
            shown[query] = [r.attrs["data-pod"] for r in p.one("tbody").find("tr") if "data-pod" in r.attrs]
            assert shown[query] == [e["pod"] for e in twin["decisions"]]
        bad = await c.get("/ui/decisions?limit=none")
        bad_rows = await c.get("/ui/decisions/rows?limit=0")
    assert [len(v) for v in shown.values()] == [50, 5, 80]            # /debug/decisions' default, asked, all held
    assert shown["?limit=5"][0] == "team-a/p-79"
    assert bad.status_code == 400 and "limit must be a whole number, got 'none'" in Page(bad.text).field("error")
    assert bad_rows.status_code == 400


# ---- safety ----------------------------------------------------------------------------------------------
HOSTILE = '<img src=x onerror="alert(1)">'


async def test_names_and_reasons_a_user_controls_are_escaped_everywhere(ext, api):
    pod = {"metadata": {"name": HOSTILE, "namespace": "team-a", "uid": "uid-hostile",
                        "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "64"}}}]}}
    async with api(ext) as c:
        assert (await c.post("/filter", json={"Pod": pod, "Nodes": None, "NodeNames": NODES})).status_code == 200
        ext.journal.record({"time": T0, "verb": "filter", "pod": "team-a/x", "outcome": "QuotaExceeded",
                            "reason": "</td><script>alert(2)</script>", "queue": "team-a-cq"})
        pages = [await c.get(path) for path in ("/ui/decisions", "/ui/decisions/rows", "/ui/queues/team-a-cq",
                                                "/ui/pods/team-a/" + httpx.URL(HOSTILE).raw_path.decode(),
                                                "/ui/pods/team-a/x")]
    for r in pages:
        assert r.status_code == 200, r.url
        assert "<img" not in r.text and "<script>" not in r.text, r.url
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in pages[0].text
    assert "&lt;/td&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in pages[0].text
    # the link to the pod's page names it as one path segment
    assert "/ui/pods/team-a/%3Cimg%20src%3Dx%20onerror%3D%22alert%281%29%22%3E" in pages[0].text


async def test_every_pod_link_in_the_journal_reaches_that_pods_page(ext, api):
    """A caller names the pods it asks about: one named a/b is still one path segment away."""
    for name in ("a/b", "x y", "ünï"):
        pod = {"metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                            "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
               "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "64"}}}]}}
        async with api(ext) as c:
            await c.post("/filter", json={"Pod": pod, "Nodes": None, "NodeNames": NODES})
    async with api(ext) as c:
        links = [a.attrs["href"] for a in (await page(c, "/ui/decisions")).find("a")
                 if a.attrs["href"].startswith("/ui/pods/")]
        pages = [await page(c, link) for link in links]
    assert [p.one("h1").text for p in pages] == ["Pod team-a/ünï", "Pod team-a/x y", "Pod team-a/a/b"]


async def test_the_view_is_read_only_and_loads_nothing_from_elsewhere(ext, api):
    paths = ["/ui", "/ui/queues/team-a-cq", "/ui/queues/co", "/ui/pods/team-b/big", "/ui/decisions",
             "/ui/decisions/rows", "/ui/queues/nope", "/ui/pods/team-a/nope"]
    async with api(ext) as c:
        await c.post("/filter", json=filter_for(ext, "team-b/big"))
        answers = {p: await c.get(p) for p in paths}
        posted = [await c.post(p) for p in paths]
        static = [await c.get(f"/ui/static/{name}") for name in ("ui.css", "ui.js", "../pages.py", "nope.js")]
    for path, r in answers.items():
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        p = Page(r.text)
        assert all(f.attrs.get("method", "get").lower() == "get" for f in p.find("form")), path
        for e in p.find():
            for attr in ("href", "src", "action"):
                if attr in e.attrs:
                    assert e.attrs[attr].startswith("/") and not e.attrs[attr].startswith("//"), (path, e.attrs)
        assert not p.find("script", None) or all(s.attrs.get("src") == "/ui/static/ui.js" and not s.text
                                                 for s in p.find("script"))
    assert all(r.status_code == 405 for r in posted)
    assert [r.status_code for r in static] == [200, 200, 404, 404]
    assert static[1].headers["content-type"].startswith("text/javascript")


async def test_an_unknown_queue_or_pod_is_a_404_page_saying_what_there_is(ext, api):
    async with api(ext) as c:
        q = await c.get("/ui/queues/nope")
        p = await c.get("/ui/pods/team-a/nope")
    assert q.status_code == p.status_code == 404
    assert Page(q.text).field("error") == "no ClusterQueue or Cohort named 'nope'"
    assert [a.text for a in Page(q.text).find("a") if a.attrs["href"].startswith("/ui/queues/")] == [
        "team-a-cq", "team-b-cq", "co"]
    assert "pod team-a/nope is not known to Quotient" in Page(p.text).field("error")


# ---- the view port ---------------------------------------------------------------------------------------
EXPLAIN = b"apiVersion: v1\nkind: Pod\nmetadata: {name: e, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}\n" \
          b"spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n"


async def test_the_view_app_serves_ui_and_debug_and_changes_nothing(ext):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_view_app(ext)),
                                 base_url="http://127.0.0.1:8081") as c:
        ui = await c.get("/ui")
        queues = await c.get("/debug/queues")
        explained = await c.post("/debug/explain", content=EXPLAIN)
        reactivate = await c.post("/debug/workloads/team-a/x/reactivate")
        verbs = [await c.post(f"/{v}", json={}) for v in ("filter", "bind", "preempt", "prioritize")]
        metrics = await c.get("/metrics")
        rebound = [await c.get(path, headers={"Host": "attacker.example:8081"}) for path in ("/ui", "/debug/queues")]
        named = [(await c.get("/ui", headers={"Host": host})).status_code for host in ("localhost:8081", "[::1]:8081")]
    assert ui.status_code == queues.status_code == explained.status_code == 200 and "team-a-cq" in ui.text
    assert reactivate.status_code == 403 and "not served on the view port" in reactivate.json()["error"]
    assert [r.status_code for r in verbs] == [404, 404, 404, 404] and metrics.status_code == 404
    assert [r.status_code for r in rebound] == [400, 400] and "team-a-cq" not in rebound[0].text
    assert named == [200, 200]


async def test_on_loopback_the_main_port_answers_only_requests_addressed_to_a_loopback_name(ext):
    """DNS rebinding: a page of attacker.example, its name pointed at 127.0.0.1, reaches the port but names itself."""
    from app.api.app import create_app

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(ext, loopback_only=True)),
                                 base_url="http://127.0.0.1:8888") as c:
        ours = [(await c.get(path, headers={"Host": host})).status_code
                for path in ("/ui", "/debug/queues") for host in ("127.0.0.1:8888", "localhost", "[::1]:8888")]
        filtered = await c.post("/filter", json=filter_for(ext, "team-a/wait-1"))
        theirs = [await c.request(method, path, headers={"Host": "attacker.example:8888"}, json=body)
                  for method, path, body in (("GET", "/ui", None), ("GET", "/debug/queues", None),
                                             ("POST", "/filter", filter_for(ext, "team-b/small")),
                                             ("POST", "/bind", bind_for(ext, "team-a/wait-1", "od-1")))]
    assert ours == [200] * 6 and filtered.json()["NodeNames"] == ["od-1", "od-2"]
    assert [r.status_code for r in theirs] == [400, 400, 400, 400]
    assert "not to 'attacker.example'" in theirs[0].json()["error"]
    assert ext.state.store.pod_by_key("team-a/wait-1").node_name in ("", None)      # the foreign bind did nothing
    assert "team-b/small" not in [e["pod"] for e in ext.journal.recent(10)]


async def test_off_loopback_the_view_port_explains_only_to_loopback_callers(ext):
    app = create_view_app(ext, loopback=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("10.1.2.3", 40000)),
                                 base_url="http://quotient.example") as c:
        ui = await c.get("/ui")
        explained = await c.post("/debug/explain", content=EXPLAIN)
    assert ui.status_code == 200
    assert explained.status_code == 403 and "served only to loopback callers" in explained.json()["error"]


def test_quotient_serve_view_port_answers_on_loopback_beside_the_main_port():
    from serving import free_port

    view = free_port()
    with served("--view-port", str(view)) as server:
        ui = httpx.get(f"http://127.0.0.1:{view}/ui", timeout=5, trust_env=False)
        main = httpx.get(f"{server.url}/ui", timeout=5, trust_env=False)
        filtered = httpx.post(f"http://127.0.0.1:{view}/filter", json={}, timeout=5, trust_env=False)
        log = server.log()
    assert ui.status_code == main.status_code == 200 and Page(ui.text).find("li", {"data-name": "team-a-cq"})
    assert filtered.status_code == 404
    assert f"serving /ui and /debug without client certificates on 127.0.0.1:{view}" in log


@pytest.mark.parametrize("args, message", [
    (["--view-port", "9100", "--view-host", "0.0.0.0"], "--view-port on --view-host 0.0.0.0 needs --tls-cert"),
    (["--view-port", "8888"], "--view-port 8888 is already taken"),
])
def test_a_view_port_that_would_expose_or_collide_stops_the_command(args, message):
    import subprocess

    from serving import QUOTIENT_BIN

    done = subprocess.run([str(QUOTIENT_BIN), "serve", "--port", "8888", *args], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and message in done.stderr
