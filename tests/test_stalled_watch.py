"""Issue 31, point 7: a watch that stalls silently (the connection open, no event, no bookmark, no error).

Before, it was noticed only at the read timeout (360 s; 30 s here) while /readyz answered 200: a deleted 4-CPU pod
stayed charged all that time, and with the ClusterQueue watch stalled and nominalQuota lowered from 8 to 2 on the
API, four binds of 2 CPU all succeeded (8,000m of 2,000m). Now a watch that shows neither an event nor a bookmark
within stall_timeout (watchStallTimeout, 2 minutes; a small one here) is relisted, /readyz says "stale" naming the
source until the relist is in, and filter and bind of a queued pod refuse with SourceStale meanwhile.
"""
from __future__ import annotations

import time

import httpx
import pytest

from app.api.app import create_app
from app.config import ConfigError, decode_configuration
from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor
from live import started, until
from test_control_plane_faults import api_cpu
from test_watch import cq_cpu

STALL = 1.5             # the stall timeout in these tests
SLOW_READ = 30.0        # the read timeout (360 s in production): what noticed a stall before


def objects(nominal: str):
    return (Namespace("team-a").obj(), Node("n1").cpu("64").obj(), ResourceFlavor("default-flavor").obj(),
            ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", nominal)).obj(),
            LocalQueue("lq", "team-a").cluster_queue("cq").obj())


def quickly(tmp_path, nominal: str):
    """Quotient live with bookmarks every 0.1 s, a STALL stall timeout and a read timeout that never fires."""
    return started(tmp_path, objects(nominal), bookmark_interval=0.1, stall_timeout=STALL, read_timeout=SLOW_READ)


async def stall(live, plural: str) -> None:
    """The next watch of plural stalls; every watch is cut so that it is the one open now."""
    live.api.fault("stall", resource=plural, verb="watch")
    live.api.drop_watches()
    await until(lambda: not live.api.faults, what=f"the {plural} watch to stall")


def readyz(live):
    app = create_app(live.ext, ready=lambda: live.source.health.ready, readiness=lambda: live.source.health.readiness)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_a_deleted_pod_stays_charged_at_most_the_stall_timeout(tmp_path):
    async with quickly(tmp_path, "8") as live, readyz(live) as http:
        big = Pod("big").queue("lq").cpu("4").node("n1").phase("Running").obj()
        live.api.apply(big)
        p = Pod("p").queue("lq").cpu("1").obj()
        live.api.apply(p)
        await until(lambda: cq_cpu(live.state, "cq") == 4000 and live.knows(p), what="the running pod charged")
        await stall(live, "pods")
        live.api.fault("pause", resource="pods", verb="list")       # hold the relist to look at /readyz
        deleted = time.monotonic()
        live.api.delete("Pod", "team-a", "big")
        assert (await http.get("/readyz")).status_code == 200      # within the stall timeout: fresh enough
        await live.api.paused_request(timeout=STALL + 5)           # the stall noticed: relisting
        assert time.monotonic() - deleted < STALL + 2, "relisted within the stall timeout (read timeout: 30 s)"
        r = await http.get("/readyz")
        assert r.status_code == 503 and r.json()["reason"].startswith("stale: the Pod ") and "Pod" in r.json()["reason"]
        answer = live.filter(p)
        assert "SourceStale" in answer["Error"] and "Pod" in answer["Error"]     # tried again after its backoff
        live.api.resume()
        await until(lambda: live.source.health.ready, what="the relist")
        # At least one relist for the stall (a loaded machine may notice a second one after it).
        assert cq_cpu(live.state, "cq") == 0 and live.source.kinds["Pod"].relist_reasons["stalled"] >= 1
        assert (await http.get("/readyz")).text == "ok"
        assert live.filter(p)["NodeNames"] == ["n1"] and await live.bind(p) == ""
        await live.equal_to_a_fresh_list()


async def test_with_the_cluster_queue_watch_stalled_a_lowered_quota_holds_once_the_stall_is_noticed(tmp_path):
    async with quickly(tmp_path, "8") as live, readyz(live) as http:
        pods = [Pod(f"p{i}").queue("lq").cpu("2").obj() for i in range(4)]
        for p in pods:
            live.api.apply(p)
        await until(lambda: all(live.knows(p) for p in pods), what="the pods")
        await stall(live, "clusterqueues")
        live.api.apply(ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "2")).obj())
        live.api.fault("pause", resource="clusterqueues", verb="list")
        await live.api.paused_request(timeout=STALL + 5)           # the stall noticed; its relist held
        answers = [await live.bind(p) for p in pods]
        assert all(a.startswith("SourceStale: ") and "the ClusterQueue " in a for a in answers), answers
        assert api_cpu(live.api, {"team-a/lq": "cq"}) == {}
        r = await http.get("/readyz")
        assert r.status_code == 503 and "ClusterQueue" in r.json()["reason"]
        live.api.resume()
        await until(lambda: live.source.health.ready, what="the relist")
        assert live.source.kinds["ClusterQueue"].relist_reasons["stalled"] >= 1     # one or more, as above
        bound = 0
        for p in pods:                              # kube-scheduler's retries: filter, then bind what passed
            if live.filter(p)["NodeNames"] == ["n1"]:
                bound += await live.bind(p) == ""
        assert bound == 1 and api_cpu(live.api, {"team-a/lq": "cq"}) == {"cq": 2000}     # quota 2 holds
        assert (await http.get("/readyz")).status_code == 200
        await live.equal_to_a_fresh_list()


def test_the_stall_timeout_is_a_positive_duration():
    doc = {"apiVersion": "quotient.dev/v1alpha1", "kind": "Configuration"}
    assert decode_configuration(doc).watch_stall_timeout == 120.0
    assert decode_configuration({**doc, "watchStallTimeout": "90s"}).watch_stall_timeout == 90.0
    with pytest.raises(ConfigError, match="watchStallTimeout"):
        decode_configuration({**doc, "watchStallTimeout": "0s"})


async def test_a_watch_whose_connection_broke_admits_nothing_until_it_is_answered_again(tmp_path):
    """An API server that restarts (restored from a backup, say) may take binds before Quotient's watch hears from
    it again: while a watch reconnects after a broken connection, filter and bind of a queued pod refuse with
    SourceStale naming it; /readyz stays 200 (a reconnect is routine, no reason to take the replica out)."""
    async with quickly(tmp_path, "8") as live, readyz(live) as http:
        p = Pod("p").queue("lq").cpu("1").obj()
        live.api.apply(p)
        await until(lambda: live.knows(p), what="the pod")
        live.api.fault("pause", resource="pods", verb="watch")      # the reconnect is held at the server
        live.api.drop_watches()
        await live.api.paused_request()
        await until(lambda: live.source.kinds["Pod"].reconnecting, what="the broken connection noticed")
        answer = live.filter(p)
        assert answer["NodeNames"] == [] and "SourceStale" in answer["Error"], answer
        assert "the Pod watch is reconnecting" in answer["Error"]
        assert "SourceStale" in await live.bind(p)
        assert (await http.get("/readyz")).status_code == 200
        live.api.resume()
        await until(lambda: not live.source.kinds["Pod"].reconnecting, what="the watch answered again")
        assert live.filter(p)["NodeNames"] == ["n1"] and await live.bind(p) == ""
        assert api_cpu(live.api, {"team-a/lq": "cq"}) == {"cq": 1000}
