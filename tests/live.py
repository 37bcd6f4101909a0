"""Quotient's live source (app/sync/watch.py) in a test: a WatchSource running against tests/fakeapi.py,
waiting for a condition, and what a fresh list must reproduce of a state."""
from __future__ import annotations

import asyncio
import time

from app.state.cluster import ClusterState
from app.sync.watch import WatchSource
from helpers import all_usage

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
        "extra": {k: sorted(v) for k, v in state.extra.items() if v},
        "usage": all_usage(state),
        "admitted": {uid: (c.cluster_queue, tuple(sorted(c.usage.items()))) for uid, c in state.admitted.items()},
        "node_requested": {n: {r: v for r, v in used.items() if v} for n, used in state.node_requested.items()
                           if n in state.nodes and any(used.values())},
        "pending": {q: [uid for _, uid in items] for q, items in state.pending.items() if items},
    }


async def fresh_state(client) -> ClusterState:
    state = ClusterState()
    async with Running(client, state) as source:
        await until(lambda: source.ready, what="fresh list")
    return state
