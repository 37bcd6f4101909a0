"""Writers carry out committed decisions; every write is idempotent.

The live writer (API calls) comes with the watch source. Without a cluster,
SnapshotWriter applies writes straight to the state, as an API server that
accepted them would, so `quotient serve` on a snapshot behaves end to end.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Protocol

from aiohttp import ClientError

from ..objects.pod import ADMISSION_GATE, PodInfo

# What a request to the API server raises when no whole answer came: a timeout, a socket error, a connection the
# server closed or cut, or an answer cut short (aiohttp's ClientError: ServerDisconnectedError and
# ClientPayloadError are no OSError; a server shutting down ends connections so).
UNREACHABLE = (asyncio.TimeoutError, OSError, ClientError)


class WriteError(RuntimeError):
    """A write the cluster refused; the message is shown to kube-scheduler."""


class OutcomeUnknown(WriteError):
    """A write whose outcome is not known: its answer was lost (a 5xx, a timeout, a cut connection) and no read
    since said whether it landed. Nothing is taken back on it: a read, the watch or a relist settles it."""


class Writer(Protocol):
    # speaks_for_learned (a class attribute, True when absent): are the pods known only from requests
    # (ClusterState.learned) the cluster's, so that they may be bound and may preempt? KubeWriter says False: a pod
    # the API has not shown is never bound and never causes an eviction (app/scheduler/context.py, Context.unseen).
    async def bind(self, pod: PodInfo, node: str) -> None: ...

    async def evict(self, pod: PodInfo, reason: str, message: str) -> None: ...

    async def ungate(self, pod: PodInfo) -> None: ...      # remove Kueue's admission gate (scheduler.ungate)


class SnapshotWriter:
    """No API server: a binding is already recorded in the state; an eviction deletes the pod."""

    speaks_for_learned = True    # no API to show pods: those of the requests are the cluster's (the README's demo)

    def __init__(self, state):
        self.state = state
        self.bindings = 0
        self.evictions = 0

    async def bind(self, pod: PodInfo, node: str) -> None:
        self.bindings += 1
        self.state.learned_pods.spoken_for(pod.uid)       # no API to confirm it: the binding stands as made

    async def ungate(self, pod: PodInfo) -> None:
        current = self.state.pods.get(pod.uid)
        if current is not None and current.gated:
            self.state.upsert_pod(replace(current, gates=tuple(g for g in current.gates if g != ADMISSION_GATE)),
                                  force=True)

    async def evict(self, pod: PodInfo, reason: str, message: str) -> None:
        if pod.uid in self.state.pods:
            self.state.remove_pod(pod.uid)
            self.evictions += 1
