"""The hand-over benchmark (issue 33 item 4): the time from the leader's SIGTERM to the first verb answered by the
new leader, through a client that reaches the replicas as Service `quotient` does.

    .venv/bin/python tests/bench/bench_handover.py [--runs 5] [--lease-seconds 15] [--sync 1.0] [--pods 2000] [--quick]

Not a pytest test (tests/bench/conftest.py keeps pytest out; tests/test_bench_handover_smoke.py runs it tiny).
A FakeApiServer (tests/fakeapi.py) in this process holds a cluster (--nodes nodes, --pods running pods, a
ClusterQueue with room and one real pending pod) and the Deployment's two pods, quotient-a and quotient-b; two
real `quotient serve --kubeconfig ... --leader-elect` processes run as those pods (POD_NAME, POD_NAMESPACE), so
the leader labels its pod quotient.dev/leader=true.

The client behaves like the Service: every --sync seconds it re-reads the two pods' labels from the API and sends
to the pod that carries the label (none: connection refused, as a Service with no endpoint). That is the
endpoints controller (an informer: it sees the label change within milliseconds and writes the EndpointSlice at
once, no batching by default) and kube-proxy (iptables/nftables mode: rules resynced at most every
minSyncPeriod, 1 s by default) folded into one poll of --sync seconds. Every --interval seconds it asks filter
for the pending pod on a new connection (kube-scheduler retries a pod its extender failed after a backoff; other
pods keep calling meanwhile); the hand-over ends at the first answer 200 that admits the pod onto nodes.

Each run: SIGTERM to the leader; the figures from the fake API's write log (arrival times): the Lease released,
the Lease taken by the standby, its pod labelled, the old pod's label removed; then the first verb answered. The
stopped replica is started again as the same pod (a restarted container: it removes the label its pod kept) and
waits as the standby for the next run.

The old design (--old, on by default): only the leader was Ready and a rollout replaced both pods, so after the
leader's SIGTERM a new process had to start, list the cluster and take the Lease before any verb was answered.
It is measured once per run count with both replicas stopped and one new process started at the SIGTERM; the
client polls its /readyz every --sync seconds (the kubelet's readiness probe, 2 s in the old manifest, and
kube-proxy folded into one poll) and sends to it once it is ready.

Prints each run and the median, min and max, and the old design's figure beside them. Exit status 0.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1]))

from builders import ClusterQueue, FlavorQuotas, LocalQueue, Namespace, Node, Pod, ResourceFlavor  # noqa: E402
from fakeapi import FakeApiServer  # noqa: E402
from serving import QUOTIENT_BIN, free_port  # noqa: E402

NS = "quotient-system"
LABEL = "quotient.dev/leader"
PODS = ("quotient-a", "quotient-b")
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/quotient"


def seed(api: FakeApiServer, nodes: int, pods: int) -> list[str]:
    """The cluster; returns the node names filter is offered."""
    names = [f"node-{i:03d}" for i in range(nodes)]
    for obj in (Namespace(NS).obj(), Namespace("team-a").obj(), Namespace("team-b").obj(),
                ResourceFlavor("default-flavor").obj(),
                ClusterQueue("cq").resource_group(FlavorQuotas("default-flavor").resource("cpu", "1000")).obj(),
                LocalQueue("q", "team-a").cluster_queue("cq").obj()):
        api.apply(obj)
    for n in names:
        api.apply(Node(n).cpu("64").obj())
    for i in range(pods):     # running pods outside any queue: what a replica must list before it can serve
        api.apply(Pod(f"run-{i:05d}", "team-b").cpu("100m").node(names[i % nodes]).phase("Running").obj())
    api.apply(Pod("pending").queue("q").cpu("1").obj())
    for name in PODS:
        api.apply({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": NS, "labels": {"app.kubernetes.io/name": "quotient"}},
                   "spec": {"nodeName": names[0], "containers": [{"name": "quotient", "image": "quotient"}]},
                   "status": {"phase": "Running"}})
    return names


class Replica:
    """One `quotient serve --leader-elect` as the pod `name`."""

    def __init__(self, api: FakeApiServer, workdir: str, name: str, lease_seconds: float):
        self.api, self.workdir, self.name, self.lease_seconds = api, workdir, name, lease_seconds
        self.port = 0
        self.proc = None

    async def start(self) -> None:
        self.port = free_port()
        env = {**os.environ, "POD_NAME": self.name, "POD_NAMESPACE": NS}
        with open(os.path.join(self.workdir, f"{self.name}.log"), "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                str(QUOTIENT_BIN), "serve", "--kubeconfig", self.api.kubeconfig_path(self.workdir), "--host",
                "127.0.0.1", "--port", str(self.port), "--leader-elect", "--lease", f"{NS}/quotient",
                "--lease-seconds", str(self.lease_seconds), "--log-level", "warning", env=env,
                stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)

    async def readyz(self, http: httpx.AsyncClient) -> str | None:
        try:
            r = await http.get(f"http://127.0.0.1:{self.port}/readyz")
        except httpx.TransportError:
            return None
        return r.text if r.status_code == 200 else None

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()


class Service:
    """Service quotient as kube-proxy routes it: the pods labelled quotient.dev/leader=true, as last read."""

    def __init__(self, api: FakeApiServer, replicas: dict[str, Replica], sync: float):
        self.api, self.replicas, self.sync = api, replicas, sync
        self.endpoints: list[Replica] = []
        self._task = None

    def read(self) -> None:
        pods = [self.api.get("Pod", NS, name) for name in self.replicas]
        self.endpoints = [self.replicas[p["metadata"]["name"]] for p in pods
                          if p and (p["metadata"].get("labels") or {}).get(LABEL) == "true"]

    async def _loop(self) -> None:
        while True:
            self.read()
            await asyncio.sleep(self.sync)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def first_verb(endpoint, body: dict, interval: float, deadline: float, old=None) -> float:
    """Ask filter every `interval` seconds (a new connection each time) of the endpoint endpoint() names, until
    an answer 200 from another replica than `old` admits the pod onto nodes; returns that answer's time
    (time.time()). The old leader may still answer for a moment after its SIGTERM (it leads until it has
    stopped serving and released the Lease): that is no hand-over."""
    async with httpx.AsyncClient(trust_env=False, timeout=5, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        while time.monotonic() < deadline:
            target = endpoint()
            if target is not None:
                try:
                    r = await http.post(f"http://127.0.0.1:{target.port}/filter", json=body)
                    if r.status_code == 200 and r.json().get("NodeNames") and target is not old:
                        return time.time()
                except httpx.TransportError:
                    pass
            await asyncio.sleep(interval)
    raise RuntimeError("no verb answered within the deadline")


def timeline(api: FakeApiServer, since: int, old: str, new: str, t0: float) -> dict[str, float | None]:
    """Seconds after t0 at which the fake API saw each step of the hand-over (None: not seen)."""
    out: dict[str, float | None] = {"released": None, "taken": None, "labelled": None, "unlabelled": None}
    for (method, path, body), at in zip(api.writes[since:], api.write_times[since:]):
        if path == LEASE_PATH and method == "PUT":
            holder = ((body or {}).get("spec") or {}).get("holderIdentity")
            if not holder and out["released"] is None:
                out["released"] = at - t0
            elif holder == new and out["taken"] is None:
                out["taken"] = at - t0
        elif method == "PATCH" and path.endswith(f"/pods/{new}") and out["labelled"] is None:
            if (((body or {}).get("metadata") or {}).get("labels") or {}).get(LABEL) == "true":
                out["labelled"] = at - t0
        elif method == "PATCH" and path.endswith(f"/pods/{old}") and out["unlabelled"] is None:
            if LABEL in (((body or {}).get("metadata") or {}).get("labels") or {}):
                out["unlabelled"] = at - t0
    return out


async def until_settled(replicas: dict[str, Replica], service: Service, timeout: float) -> Replica:
    """Both replicas Ready, one leading, its pod alone labelled; returns the leader."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        while True:
            states = {name: await r.readyz(http) for name, r in replicas.items()}
            service.read()
            leaders = [n for n, s in states.items() if s == "ok: leader"]
            if sorted(states.values(), key=str) == ["ok: leader", "ok: standby"] and \
                    [e.name for e in service.endpoints] == leaders:
                return replicas[leaders[0]]
            if time.monotonic() > deadline:
                raise RuntimeError(f"replicas did not settle: {states}, labelled {[e.name for e in service.endpoints]}")
            await asyncio.sleep(0.1)


async def old_design(api: FakeApiServer, workdir: str, args, body: dict) -> float:
    """A leader SIGTERMed while no synced standby exists: a new process starts at the SIGTERM, lists the cluster,
    takes the Lease; the client sends to it once a readiness poll (every --sync s) has seen it ready."""
    replica = Replica(api, workdir, "quotient-old", args.lease_seconds)
    t0 = time.time()
    await replica.start()
    ready = {"seen": False}

    async def probe() -> None:
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
            while not ready["seen"]:
                ready["seen"] = await replica.readyz(http) == "ok: leader"
                if not ready["seen"]:
                    await asyncio.sleep(args.sync)

    prober = asyncio.create_task(probe())
    try:
        done = await first_verb(lambda: replica if ready["seen"] else None, body, args.interval,
                                time.monotonic() + args.timeout)
    finally:
        prober.cancel()
        await asyncio.gather(prober, return_exceptions=True)
        await replica.stop()
    return done - t0


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s, min {min(values):.2f} s, max {max(values):.2f} s"


async def bench(args) -> int:
    workdir = tempfile.mkdtemp(prefix="bench-handover-")
    async with FakeApiServer(bookmark_interval=30.0, history=max(1000, 4 * args.pods)) as api:
        nodes = seed(api, args.nodes, args.pods)
        body = {"Pod": api.get("Pod", "team-a", "pending"), "Nodes": None, "NodeNames": nodes}
        replicas = {name: Replica(api, workdir, name, args.lease_seconds) for name in PODS}
        service = Service(api, replicas, args.sync)
        print(f"cluster: {args.nodes} nodes, {args.pods} running pods; lease {args.lease_seconds:g} s (renew "
              f"{args.lease_seconds * 2 / 3:.2f} s, retry {max(0.2, args.lease_seconds / 7):.2f} s +-20%); Service "
              f"re-read every {args.sync:g} s; filter every {args.interval:g} s; logs in {workdir}")
        handovers: list[float] = []
        taken: list[float] = []         # SIGTERM -> the Lease taken by the standby
        routed: list[float] = []        # the new pod labelled -> the first verb it answered (the Service's re-read)
        try:
            for r in replicas.values():
                await r.start()
            service.start()
            for run in range(1, args.runs + 1):
                leader = await until_settled(replicas, service, args.timeout)
                standby = next(r for r in replicas.values() if r is not leader)
                since = len(api.writes)
                t0 = time.time()
                leader.proc.terminate()
                done = await first_verb(lambda: random.choice(service.endpoints) if service.endpoints else None,
                                        body, args.interval, time.monotonic() + args.timeout, old=leader)
                await leader.proc.wait()
                steps = timeline(api, since, leader.name, standby.name, t0)
                handovers.append(done - t0)
                if steps["taken"] is not None and steps["labelled"] is not None:
                    taken.append(steps["taken"])
                    routed.append(done - t0 - steps["labelled"])
                shown = ", ".join(f"{k} +{v:.2f} s" if v is not None else f"{k} not seen" for k, v in steps.items())
                print(f"run {run}: hand-over {done - t0:.2f} s ({leader.name} -> {standby.name}: {shown}; "
                      f"first verb +{done - t0:.2f} s; old process exited {leader.proc.returncode})", flush=True)
                await leader.start()       # the same pod's container restarted: it clears its label, waits as standby
            await service.stop()
            print(f"hand-over (label and select, a synced standby): {summary(handovers)} over {len(handovers)} runs")
            if taken:
                print(f"  of which SIGTERM -> Lease taken (the standby's retry period): {summary(taken)}; new pod "
                      f"labelled -> first verb (the Service's re-read): {summary(routed)}")
            if args.old:
                for r in replicas.values():
                    await r.stop()
                api.delete("Lease", NS, "quotient", "coordination.k8s.io/v1")
                olds = [await old_design(api, workdir, args, body) for _ in range(args.old_runs)]
                print(f"old design (only the leader Ready, its replacement lists {args.pods} pods first): "
                      f"{summary(olds)} over {len(olds)} runs; {statistics.median(olds) / statistics.median(handovers):.1f}x "
                      "the hand-over")
        finally:
            for r in replicas.values():
                await r.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--lease-seconds", type=float, default=15.0, help="as deployed (kube-scheduler's is 15 s too)")
    p.add_argument("--sync", type=float, default=1.0, help="seconds between two reads of the labels (kube-proxy's "
                   "minSyncPeriod)")
    p.add_argument("--interval", type=float, default=0.05, help="seconds between two filter calls")
    p.add_argument("--nodes", type=int, default=50)
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--no-old", dest="old", action="store_false", help="skip the old design's figure")
    p.add_argument("--old-runs", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="1 run, 20 pods, lease 2 s, sync 0.2 s, 1 old run")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.pods, args.nodes, args.lease_seconds, args.sync, args.old_runs = 1, 20, 5, 2.0, 0.2, 1
    return asyncio.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
