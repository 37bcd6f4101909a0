"""Leader election on a coordination.k8s.io/v1 Lease: several replicas keep their state in sync,
exactly one answers the verbs. A leader that cannot renew before its lease would expire stops
leading at once (it may no longer be the only one).

As client-go does it, a renewal counts from the moment it was sent, not from when its answer
came back: the lease it wrote expires lease_seconds after a time no later than that, so leading
ends renew_seconds after the send, before any other replica can see the lease expired. Each
attempt is bounded by renew_seconds, so a hanging API server cannot hold one open."""
from __future__ import annotations

import asyncio
import logging
import random
from datetime import datetime, timedelta, timezone

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger("quotient.leader")


def _now() -> datetime:
    return datetime.now(timezone.utc)


class LeaderElector:
    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str,
                 lease_seconds: float = 15.0, renew_seconds: float = 10.0, retry_seconds: float = 2.0):
        self.api = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_seconds, self.renew_seconds, self.retry_seconds = lease_seconds, renew_seconds, retry_seconds
        self._renewed: datetime | None = None     # when we last held the lease for sure
        self._stop = asyncio.Event()

    @property
    def leading(self) -> bool:
        """True only while a renewal succeeded within renew_seconds (checked at every call)."""
        return self._renewed is not None and (_now() - self._renewed).total_seconds() < self.renew_seconds

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._try_acquire_or_renew(), self.renew_seconds)
            except (ApiException, asyncio.TimeoutError, OSError) as e:
                log.warning("lease %s/%s: %s", self.namespace, self.name, getattr(e, "reason", e))
            wait = self.retry_seconds * (0.8 + 0.4 * random.random())
            try:
                await asyncio.wait_for(self._stop.wait(), wait)
            except asyncio.TimeoutError:
                pass
        if self.leading:                           # step down for a quick hand-over
            await self._release()

    def stop(self) -> None:
        self._stop.set()

    def _spec(self, transitions: int, acquired: datetime | None) -> client.V1LeaseSpec:
        now = _now()
        return client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=int(self.lease_seconds),
                                  acquire_time=acquired or now, renew_time=now, lease_transitions=transitions)

    async def _try_acquire_or_renew(self) -> None:
        sent = _now()           # every renew_time this attempt writes is at or after this instant
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                                  spec=self._spec(0, None))
            await self.api.create_namespaced_lease(self.namespace, body)
            self._became_leader(sent)
            return
        spec = lease.spec or client.V1LeaseSpec()
        mine = spec.holder_identity == self.identity
        renewed = spec.renew_time
        expired = renewed is None or (_now() - renewed).total_seconds() > (spec.lease_duration_seconds or 0)
        if not mine and not expired:
            if self._renewed is not None:
                log.warning("lost the lease to %s", spec.holder_identity)
            self._renewed = None
            return
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        lease.spec = self._spec(transitions, spec.acquire_time if mine else None)
        await self.api.replace_namespaced_lease(self.name, self.namespace, lease)   # 409 if someone won first
        if not mine:
            self._became_leader(sent)
        self._renewed = sent

    def _became_leader(self, sent: datetime) -> None:
        log.info("%s now leads (lease %s/%s)", self.identity, self.namespace, self.name)
        self._renewed = sent

    async def _release(self) -> None:
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec and lease.spec.holder_identity == self.identity:
                lease.spec.renew_time = _now() - timedelta(seconds=self.lease_seconds + 1)
                await self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except (ApiException, asyncio.TimeoutError, OSError):
            pass
        self._renewed = None
