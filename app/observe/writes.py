"""A Writer wrapper that counts the evictions Quotient carries out, and those that fail, for /metrics.

It forwards everything else to the writer it wraps (attributes too), so code and
tests that look at the real writer see it unchanged.
"""
from __future__ import annotations


class ObservedWriter:
    __slots__ = ("_inner", "_state", "_metrics", "speaks_for_learned")

    def __init__(self, inner, state, metrics):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_metrics", metrics)
        # the writer's (app/act/writer.py), read by every filter: a copy here, not a forwarded read each time;
        # __setattr__ keeps it equal to the writer's
        object.__setattr__(self, "speaks_for_learned", getattr(inner, "speaks_for_learned", True))

    async def bind(self, pod, node: str) -> None:
        await self._inner.bind(pod, node)

    async def evict(self, pod, reason: str, message: str) -> None:
        cluster_queue = self._cluster_queue(pod)   # before: a snapshot eviction deletes the pod
        try:
            await self._inner.evict(pod, reason, message)
        except Exception:
            self._metrics.eviction_failed(cluster_queue, reason)
            raise
        self._metrics.evicted_pod(pod, cluster_queue, reason)

    def _cluster_queue(self, pod) -> str:
        charge = self._state.admitted.get(pod.uid)
        if charge is not None:
            return charge.cluster_queue
        _, cq = self._state.store.queue_of(pod)
        return cq.name if cq is not None else ""

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._inner, name, value)
        if name == "speaks_for_learned":
            object.__setattr__(self, name, value)
