"""Issue 12, point 1 on a (fake) cluster: `quotient serve --kubeconfig` against tests/fakeapi.py picks the same
victims as `quotient simulate` when the running pods share one creationTimestamp second and differ only in
their PodScheduled time, and a fresh list (a restart) rebuilds the admission times the server holds.

The scenario's objects are loaded into the fake API server as a cluster holds them: creationTimestamp and
UIDs are the server's (the clock set to each pod's creation second), running pods carry the PodScheduled
condition the scenario gives and are started by start_pod, as a kubelet would. The test then plays
kube-scheduler over HTTP: pending pods by priority and creation time, the in-tree resource fit, filter with
NodeNames (nodeCacheCapable), bind; Quotient's own reconcile loop evicts what its reclaim decided. Kueue
sources followed: pkg/scheduler/preemption/common/ordering.go (CandidatesOrdering: most recently admitted
first, by quotaReservationTime) and common/preemption_policy.go (LowerOrNewerEqualPriority: the preemptor's
queue-order timestamp strictly Before the candidate's).
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from app.core.preemption.candidates import find_candidates
from app.core.preemption.targets import Preemptor
from app.core.admission import assign
from app.core.workload import Workload
from app.objects.quantity import parse_quantity
from app.objects.meta import parse_time
from app.sim.scenario import load_scenario
from app.state.cluster import ClusterState
from app.sync.dispatch import apply_object
from fakeapi import FakeApiServer
from serving import QUOTIENT_BIN, free_port, stop

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _key(obj: dict) -> str:
    return f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"


def load_into(api: FakeApiServer, clock: Clock, path: Path):
    """The scenario's objects in the fake API, stamped by the server; returns the scenario."""
    scenario = load_scenario(str(path))
    for doc in scenario.cluster:
        api.apply(doc.obj)
    for plan in scenario.pods:
        obj = {k: v for k, v in plan.obj.items()}
        meta = dict(obj["metadata"])
        clock.now = parse_time(meta.pop("creationTimestamp"))
        meta.pop("uid", None)                 # the server draws its own, at random
        meta.pop("resourceVersion", None)
        obj["metadata"] = meta
        running = bool((obj.get("spec") or {}).get("nodeName"))
        obj["status"] = dict(obj.get("status") or {}, phase="Running" if running else "Pending")
        api.apply(obj)
        if running:
            scheduled = next((c for c in obj["status"].get("conditions") or [] if c.get("type") == "PodScheduled"),
                             None)
            if scheduled:
                clock.now = parse_time(scheduled["lastTransitionTime"])
            api.start_pod(meta.get("namespace", "default"), meta["name"])   # the kubelet starts it
    return scenario


def feasible(api: FakeApiServer, pod: dict) -> list[str]:
    """kube-scheduler's NodeResourcesFit on cpu, terminating pods included."""
    want = _cpu(pod)
    used: dict[str, int] = {}
    for p in api.objects("Pod"):
        node = (p.get("spec") or {}).get("nodeName")
        if node and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, 0) + _cpu(p)
    return [n["metadata"]["name"] for n in api.objects("Node")
            if parse_quantity(n["status"]["allocatable"]["cpu"], "cpu") - used.get(n["metadata"]["name"], 0) >= want]


def _cpu(pod: dict) -> int:
    return sum(parse_quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"), "cpu")
               for c in pod["spec"]["containers"])


def evicted(api: FakeApiServer) -> set[str]:
    parts = [p.split("/") for m, p, _ in api.writes if m == "POST" and p.endswith("/eviction")]
    return {f"{x[4]}/{x[6]}" for x in parts}


async def schedule(api: FakeApiServer, http: httpx.AsyncClient, within: float = 30.0) -> None:
    """Play kube-scheduler until no pod is pending: filter with the nodes that fit, bind where it passes."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pending = [p for p in api.objects("Pod") if not p["spec"].get("nodeName")
                   and not p["metadata"].get("deletionTimestamp")]
        if not pending:
            return
        pending.sort(key=lambda p: (-(p["spec"].get("priority") or 0), p["metadata"]["creationTimestamp"],
                                    p["metadata"]["name"]))
        for pod in pending:
            nodes = feasible(api, pod)
            if not nodes:
                continue          # kube-scheduler's own preemption: equal priorities, no victim
            answer = (await http.post("/filter", json={"Pod": pod, "Nodes": None, "NodeNames": nodes})).json()
            if answer.get("NodeNames"):
                meta = pod["metadata"]
                r = await http.post("/bind", json={"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                                   "PodUID": meta["uid"], "Node": sorted(answer["NodeNames"])[0]})
                if r.status_code == 200 and not r.json().get("Error"):
                    api.start_pod(meta["namespace"], meta["name"])
                break             # the cluster changed: take the queue again from its head
        await asyncio.sleep(0.05)
    raise AssertionError("pods still pending: " + ", ".join(_key(p) for p in api.objects("Pod")
                                                          if not p["spec"].get("nodeName")))


async def served(api: FakeApiServer, tmp_path: Path, fair_sharing: bool = False):
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: quotient.dev/v1alpha1\nkind: Configuration\nreconcileInterval: 0.1s\n"
                      + ("fairSharing: {enable: true}\n" if fair_sharing else ""))
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    proc = await asyncio.create_subprocess_exec(
        str(QUOTIENT_BIN), "serve", "--kubeconfig", api.kubeconfig_path(tmp_path), "--config", str(config),
        "--host", "127.0.0.1", "--port", str(port), stdout=log, stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL)
    log.close()
    return proc, f"http://127.0.0.1:{port}"


def fresh_state(api: FakeApiServer) -> ClusterState:
    """A restarted Quotient: a new ClusterState from a list of the same objects."""
    state = ClusterState()
    state.begin_bulk()
    for kind in ("Namespace", "Node", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Pod"):
        for obj in api.objects(kind):
            apply_object(state, {"kind": kind, **obj})
    state.end_bulk()
    return state


@pytest.mark.parametrize("name, tied", [
    ("admission-time-reclaim", [f"team-a/a{i}" for i in range(1, 8)]),
    ("admission-time-lower-or-newer", ["team-a/a1", "team-a/a2", "team-a/a3", "team-a/a4"]),
    ("admission-time-fair-sharing", [f"team-b/b{i}" for i in range(1, 8)] + [f"team-c/c{i}" for i in range(1, 6)])])
async def test_serve_kubeconfig_picks_the_simulators_victims(name, tied, tmp_path):
    """The victims `quotient simulate` picks for the file, through `quotient serve --kubeconfig`; then each running
    pod's admission time in the server's /debug equals what a fresh list rebuilds (a restart keeps the order)."""
    clock = Clock(0.0)
    async with FakeApiServer(clock=clock, bookmark_interval=0.3) as api:
        scenario = load_into(api, clock, SCENARIOS / f"{name}.yaml")
        created = {api.get("Pod", *key.split("/"))["metadata"]["creationTimestamp"] for key in tied}
        assert len(created) == 1          # the candidates share one creation second: PodScheduled decides
        clock.now = scenario.start + 600
        proc, url = await served(api, tmp_path, scenario.config.fair_sharing)
        try:
            async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=5) as http:
                deadline = time.monotonic() + 20
                while True:
                    try:
                        if (await http.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.returncode is None and time.monotonic() < deadline, \
                        (tmp_path / "serve.log").read_text()
                    await asyncio.sleep(0.1)
                await schedule(api, http)
                exp = scenario.expectation
                gone = evicted(api)
                assert set(exp.lists["preempted"]) <= gone, gone
                assert not gone & set(exp.lists["notPreempted"]), gone
                assert len(gone) <= exp.max_evictions
                bound = {_key(p) for p in api.objects("Pod") if p["spec"].get("nodeName")}
                assert set(exp.lists["admitted"]) <= bound

                fresh = fresh_state(api)
                for key in sorted(bound):
                    ns, pod_name = key.split("/")
                    want = fresh.admitted[fresh.store.uid_by_key[key]]
                    for _ in range(100):        # Quotient's own binds: the API's PodScheduled once watched
                        charge = (await http.get(f"/debug/pods/{ns}/{pod_name}")).json()["charge"]
                        if charge["admittedAtSource"] == want.admitted_from:
                            break
                        await asyncio.sleep(0.05)
                    assert (charge["admittedAtSource"], parse_time(charge["admittedAt"])) == \
                        (want.admitted_from, want.admitted_at), key
        finally:
            await stop(proc)


async def test_a_fresh_list_orders_candidates_as_the_simulated_file_says(tmp_path):
    """Restart: a ClusterState listing the fake API's objects (random UIDs, one creation second) orders the
    candidates of the LowerOrNewerEqualPriority file by PodScheduled: a1, a3, a4, a2 (a5 is not newer)."""
    clock = Clock(0.0)
    async with FakeApiServer(clock=clock) as api:
        load_into(api, clock, SCENARIOS / "admission-time-lower-or-newer.yaml")
        orders = []
        for _ in range(2):
            state = fresh_state(api)
            p = Workload.of_pod(state.store.pod_by_key("team-a/p"))
            _, cq = state.store.queue_of(p.template)
            a = assign(state, p, cq)
            pre = Preemptor(p, cq, state.ledger.quota_node(cq.name), a.usage, set(a.flavors.values()))
            orders.append([c.pod.key for c in find_candidates(state, pre, pre.relevant, set())])
        assert orders[0] == orders[1] == ["team-a/a1", "team-a/a3", "team-a/a4", "team-a/a2"]
