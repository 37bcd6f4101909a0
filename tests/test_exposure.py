"""Issue 16 point 7: no unauthenticated caller changes state.

`quotient serve` on a non-loopback --host without client certificates refuses to start unless
--insecure-no-client-auth (which logs a warning); reactivate answers only loopback callers or a
server that verifies client certificates; a pod learned only from requests (a ghost a caller made
up) is forgotten learnedPodTimeout after it was first learned, however often it is asked about
and whatever its bind answered.
"""
from __future__ import annotations

import subprocess

import httpx
import pytest

from app.act.kube import KubeWriter
from app.api.app import create_app
from app.api.exposure import INSECURE_FLAG, ExposureError, check_exposure, is_loopback
from app.api.identity import Peer
from app.config import Configuration
from app.scheduler.scheduler import Scheduler
from app.state.cluster import ClusterState
from app.sync.dispatch import apply_object
from app.sync.apiserver import make_api_client
from fakeapi import FakeApiServer
from builders import (ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor, binding_args,
                      extender_args)
from helpers import FakeClock
from serving import QUOTIENT_BIN, free_port, served
from test_bad_input import NODES, SNAPSHOT


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_hosts_need_nothing(host):
    assert is_loopback(host)
    check_exposure(host, None, False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "quotient.example.com"])
def test_a_reachable_host_needs_client_certificates_or_the_insecure_flag(host, caplog):
    assert not is_loopback(host)
    with pytest.raises(ExposureError, match=f"--host {host} is not a loopback address.*{INSECURE_FLAG}"):
        check_exposure(host, None, False)
    check_exposure(host, "/etc/ca.crt", False)          # client certificates verified: fine, silently
    assert not caplog.records
    check_exposure(host, None, True)
    assert any(r.levelname == "WARNING" and INSECURE_FLAG in r.getMessage() for r in caplog.records)


def test_serve_on_all_addresses_without_client_certificates_refuses_to_start():
    done = subprocess.run([str(QUOTIENT_BIN), "serve", "--host", "0.0.0.0", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--host 0.0.0.0 is not a loopback address" in done.stderr and INSECURE_FLAG in done.stderr


def test_serve_with_the_insecure_flag_starts_and_warns():
    with served("--host", "0.0.0.0", "--insecure-no-client-auth") as server:      # the last --host wins
        assert httpx.get(server.url + "/livez", timeout=5).status_code == 200
        assert "without client certificates" in server.log()


# ---- reactivate: the one debug route that changes state ---------------------------------------------

def _presenting(app, subject: tuple[str, tuple[str, ...]] | None):
    """The app as a TLS port calls it for a connection whose verified client certificate has `subject` (CN, Os)."""
    async def call(scope, receive, send):
        if scope["type"] == "http" and subject is not None:
            scope["extensions"] = {**scope.get("extensions", {}), "quotient.client": Peer(*subject)}
        await app(scope, receive, send)
    return call


@pytest.mark.parametrize("client,verified,subject,status", [
    (("10.0.0.5", 4242), False, None, 403),        # another pod, no client certificates: refused
    (("127.0.0.1", 4242), False, None, 404),       # kubectl exec / port-forward: served (no such workload: 404)
    (("10.0.0.5", 4242), True, ("quotient-admin", ()), 404),      # a verified admin certificate: served
    (("10.0.0.5", 4242), True, ("quotient-viewer", ()), 403),     # verified, but role viewer: refused
    (("127.0.0.1", 4242), True, None, 403),        # certificates verified: loopback alone is no role
])
async def test_reactivate_answers_only_trusted_callers(load_extender, client, verified, subject, status):
    ext = load_extender(SNAPSHOT)
    app = create_app(ext, clients_verified=verified)
    transport = httpx.ASGITransport(app=_presenting(app, subject), client=client)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        r = await c.post("/debug/workloads/team-a/job-1/reactivate")
        assert r.status_code == status, r.text
        if status == 403 and not verified:
            assert "loopback" in r.json()["error"] and "--tls-client-ca" in r.json()["error"]
        elif status == 403:
            assert "role admin" in r.json()["error"]
        # reading stays open to every caller the server lets in (with certificates: viewer and admin)
        assert (await c.get("/debug/queues")).status_code == (403 if verified and subject is None else 200)


async def test_reactivate_forwarded_by_a_local_proxy_is_judged_by_the_original_caller(load_extender):
    """uvicorn serves without its proxy-header middleware (the verbs do not need it); the debug routes keep it,
    so a remote caller behind a reverse proxy on the same host is not taken for a loopback one."""
    app = create_app(load_extender(SNAPSHOT))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 4242))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        forwarded = await c.post("/debug/workloads/team-a/job-1/reactivate", headers={"X-Forwarded-For": "10.0.0.5"})
        assert forwarded.status_code == 403, forwarded.text
        assert (await c.post("/debug/workloads/team-a/job-1/reactivate")).status_code == 404


# ---- ghosts: pods learned from requests that the API never shows ------------------------------------

async def test_a_ghost_asked_about_for_ever_is_forgotten_after_learned_pod_timeout(build_extender, api):
    clock = FakeClock()
    ext = build_extender(SNAPSHOT, config=Configuration(learned_pod_timeout=600.0), clock=clock)
    ghost = Pod("ghost").queue("q").cpu("3").wire()
    async with api(ext) as client:
        for _ in range(11):                                   # asked about every 61 s for 10 minutes
            r = await client.post("/filter", json=extender_args(ghost, NODES))
            assert r.json()["NodeNames"] == NODES
            clock.advance(61)
        assert ext.state.skips["learned pod forgotten"] == 1  # forgotten at 610 s, then learned anew
        assert ext.state.learned[ghost["metadata"]["uid"]] == clock() - 61


async def test_a_ghost_whose_bind_the_api_refused_is_forgotten_and_frees_its_quota(tmp_path):
    """Before: a bind answered 404 cleared the 'learned' mark, so the ghost held its place for ever."""
    async with FakeApiServer() as fake:
        client = await make_api_client(fake.kubeconfig_path(tmp_path))
        try:
            clock = FakeClock()
            state = ClusterState(Configuration(learned_pod_timeout=600.0), clock=clock)
            for obj in (Namespace("team-a").obj(), Node("n1").cpu("8").obj(), ResourceFlavor("default-flavor").obj(),
                        ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "4")).obj(),
                        LocalQueue("q", "team-a").cluster_queue("cq").obj()):
                fake.apply(obj)
                apply_object(state, obj)                 # as the watch would deliver them
            ext = Scheduler(state, KubeWriter(client, state, timeout=2.0))
            ghost = Pod("ghost").queue("q").cpu("3").wire()
            app = create_app(ext)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
                assert (await c.post("/filter", json=extender_args(ghost, ["n1"]))).json()["NodeNames"] == ["n1"]
                r = (await c.post("/bind", json=binding_args(ghost, "n1"))).json()
                assert "has not shown" in r["Error"]                     # refused before any Binding (issue 31)
                assert not [p for _, p, _ in fake.writes if p.endswith("/binding")]
                uid = ghost["metadata"]["uid"]
                assert uid in state.learned                              # still only learned
                clock.advance(601)
                other = Pod("real").queue("q").cpu("1").wire()
                await c.post("/filter", json=extender_args(other, ["n1"]))
            assert uid not in state.pods and uid not in state.reservations
            assert sum(v for (f, r), v in state.tree.queues["cq"].usage.items() if r == "cpu") <= 1000
        finally:
            await client.close()
