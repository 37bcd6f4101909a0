"""Quotient live in a test: a WatchSource running against tests/fakeapi.py, waiting for a condition, what a
fresh list must reproduce of a state, and Live: the watch, the state and the KubeWriter together."""
from __future__ import annotations

import asyncio
import contextlib
import time


from app.act.kube import KubeWriter
from app.config import Configuration
from app.scheduler.scheduler import Scheduler
from app.objects.pod import decode_pod
from app.state.cluster import ClusterState
from app.sync.apiserver import make_api_client
from app.sync.watch import WatchSource
from builders import Namespace
from fakeapi import FakeApiServer
from helpers import FakeClock, Verbs, all_usage

FAST = dict(page_size=3, request_timeout=2.0, watch_timeout=5, read_timeout=1.0, backoff_base=0.005,
            backoff_max=0.05, absent_retry=0.2, heartbeat=0.05)


async def until(cond, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class Running:
    """A WatchSource running in the background for one test."""

    def __init__(self, client, state=None, **kw):
        self.state = state or ClusterState()
        self.source = WatchSource(client, self.state, **{**FAST, **kw})
        self.task = None

    async def __aenter__(self):
        self.task = self.source.start()
        return self.source

    async def __aexit__(self, *exc):
        await self.source.stop()


def fingerprint(state: ClusterState) -> dict:
    """What a fresh list must reproduce: objects, charges, per-node requests, queue order."""
    return {
        "pods": {uid: (p.key, p.node_name, p.phase, tuple(sorted(p.requests.items())), tuple(sorted(p.labels.items())))
                 for uid, p in state.pods.items()},
        "nodes": {n: (tuple(sorted(v.labels.items())), tuple(sorted(v.allocatable.items())))
                  for n, v in state.nodes.items()},
        "namespaces": state.namespaces,
        "priority_classes": state.priority_classes,
        "flavors": state.flavors, "cluster_queues": state.cluster_queues, "cohorts": state.cohorts,
        "local_queues": state.local_queues,
        "budgets": {k: sorted(v) for k, v in state.budgets.covered.items()},
        "pod_groups": state.pod_groups,
        "usage": all_usage(state),
        "admitted": {uid: (c.cluster_queue, tuple(sorted(c.usage.items())), c.admitted_at, c.admitted_from)
                     for uid, c in state.admitted.items()},
        "node_requested": {n: {r: v for r, v in used.items() if v} for n, used in state.node_requested.items()
                           if n in state.nodes and any(used.values())},
        "pending": {q: [uid for _, uid in items] for q, items in state.pending.items() if items},
    }


async def fresh_state(client) -> ClusterState:
    state = ClusterState()
    async with Running(client, state) as source:
        await until(lambda: source.health.ready, what="fresh list")
    return state


def api_cpu(api: FakeApiServer) -> int:
    """The API's own word on quota: millicores of the pods it shows bound and not finished."""
    return sum(decode_pod(p).requests.get("cpu", 0) for p in api.objects("Pod")
               if (p.get("spec") or {}).get("nodeName")
               and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


class Live:
    """Quotient as `serve --kubeconfig` runs it: the watch feeding a ClusterState, the KubeWriter writing."""

    def __init__(self, api: FakeApiServer, client, config: Configuration):
        self.api, self.client = api, client
        self.clock = FakeClock()
        self.state = ClusterState(config, clock=self.clock, timer=self.clock.timer)
        self.ext = Scheduler(self.state, KubeWriter(client, self.state))
        self.verbs = Verbs(self.ext)
        self.source = None          # the WatchSource, once started() runs it

    def filter(self, obj: dict, nodes=("n1",)) -> dict:
        return self.verbs.filter(obj, nodes)

    async def bind(self, obj: dict, node_name: str = "n1") -> str:
        return (await self.verbs.bind(obj, node_name))["Error"]

    def knows(self, obj: dict, **fields) -> bool:
        """The watch has delivered this pod with these PodInfo fields."""
        p = self.state.pods.get(obj["metadata"]["uid"])
        return p is not None and all(getattr(p, k) == v for k, v in fields.items())

    async def deliver(self, obj: dict) -> None:
        """The API server takes obj (created or replaced) and the watch delivers it to the state."""
        self.api.apply(obj)
        await until(lambda: self.knows(obj), what=f"the watch to deliver {obj['metadata']['name']}")

    def restore_past(self, backup: tuple[int, dict]) -> None:
        """The API server restored from backup (what came after it is lost, every watch is cut), then written to
        with no await until its versions climb past every one seen before any watch reconnects: none is answered
        504 "Too large resource version"."""
        newest = self.api.rv
        self.api.restore(backup)
        self.write_until(newest + 2)

    def write_until(self, rv: int) -> None:
        """Other writes (namespaces) until the API server's resourceVersion reaches rv."""
        while self.api.rv < rv:
            self.api.apply(Namespace(f"filler-{self.api.rv}").obj())

    async def equal_to_a_fresh_list(self) -> None:
        """The state equals what a fresh list builds (admission times included), and nothing is left only
        assumed: every binding Quotient made has been confirmed or taken back by the watch."""
        fresh = fingerprint(await fresh_state(self.client))
        await until(lambda: fingerprint(self.state) == fresh and not self.state.assumed and not self.state.bindings.held_back,
                    what="state equal to a fresh list")


@contextlib.asynccontextmanager
async def started(directory, objects, config: Configuration | None = None, bookmark_interval: float = 0.3,
                  **source):
    """A fake API server holding objects, and Quotient live against it once its watch has listed them;
    source: WatchSource settings over FAST's (kit.source is the running WatchSource)."""
    async with FakeApiServer(bookmark_interval=bookmark_interval) as api:
        for obj in objects:
            api.apply(obj)
        client = await make_api_client(api.kubeconfig_path(directory))
        kit = Live(api, client, config or Configuration())
        try:
            async with Running(client, kit.state, **source) as kit.source:
                await until(lambda: kit.source.health.ready, what="initial list")
                yield kit
        finally:
            await client.close()
