"""Leader election on a coordination.k8s.io/v1 Lease: several replicas keep their state in sync,
exactly one answers the verbs. A leader that cannot renew before its lease would expire stops
leading at once (it may no longer be the only one).

Every judgement is made on this replica's monotonic clock (`timer`), never by comparing wall
clocks, as client-go's leaderelection does: another replica's lease has expired once
leaseDurationSeconds have passed since this replica last saw its record (holder, renewTime, ...)
change, whatever the renewTime in it says, so a wall clock stepped or skewed on either side
changes nothing. The wall clock (`clock`) only writes the times a Lease shows.

As client-go does it, a renewal counts from the moment it was sent, not from when its answer
came back: another replica sees the record change no earlier than that, so it waits at least
lease_seconds after it, while leading ends renew_seconds after the send. Each attempt is bounded
by renew_seconds, so a hanging API server cannot hold one open. Stepping down writes a Lease
with no holder (and leaseDurationSeconds 1, as client-go's release), which another replica takes
at once."""
from __future__ import annotations

import asyncio
import logging
import random
import time
from datetime import datetime, timezone
from typing import Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .act.writer import UNREACHABLE

log = logging.getLogger("quotient.leader")


class LeaderElector:
    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str,
                 lease_seconds: float = 15.0, renew_seconds: float = 10.0, retry_seconds: float = 2.0,
                 clock: Callable[[], float] = time.time, timer: Callable[[], float] = time.monotonic):
        self.api = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_seconds, self.renew_seconds, self.retry_seconds = lease_seconds, renew_seconds, retry_seconds
        self.clock, self.timer = clock, timer
        self._renewed: float | None = None      # timer instant our last successful renewal was sent
        self._observed: tuple | None = None     # the lease record as last read or written
        self._observed_at = 0.0                 # timer instant it was first seen as it is
        self._stop = asyncio.Event()
        self.on_change: Callable[[], None] | None = None   # told after each attempt and the release (app.leader_label)

    @property
    def leading(self) -> bool:
        """True only while a renewal succeeded within renew_seconds (checked at every call)."""
        return self._renewed is not None and self.timer() - self._renewed < self.renew_seconds

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._try_acquire_or_renew(), self.renew_seconds)
            except (ApiException, *UNREACHABLE) as e:
                log.warning("lease %s/%s: %s", self.namespace, self.name, getattr(e, "reason", e))
            self._changed()
            wait = self.retry_seconds * (0.8 + 0.4 * random.random())
            try:
                await asyncio.wait_for(self._stop.wait(), wait)
            except asyncio.TimeoutError:
                pass
        if self.leading:                           # step down for a quick hand-over
            await self._release()
        self._changed()

    def stop(self) -> None:
        self._stop.set()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _now(self) -> datetime:
        """The wall time written into the Lease (for people and other tools; no replica judges by it)."""
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    def _spec(self, transitions: int, acquired: datetime | None) -> client.V1LeaseSpec:
        now = self._now()
        return client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=int(self.lease_seconds),
                                  acquire_time=acquired or now, renew_time=now, lease_transitions=transitions)

    def _observe(self, spec: client.V1LeaseSpec) -> None:
        """client-go's observedRecord/observedTime: the instant the record was first seen as it is now."""
        record = (spec.holder_identity, spec.renew_time, spec.acquire_time, spec.lease_duration_seconds,
                  spec.lease_transitions)
        if record != self._observed:
            self._observed, self._observed_at = record, self.timer()

    def _expired(self, spec: client.V1LeaseSpec) -> bool:
        """A lease with no holder (released) is free; another's expires leaseDurationSeconds after
        this replica last saw its record change, on this replica's monotonic clock."""
        if not spec.holder_identity:
            return True
        return self.timer() - self._observed_at > (spec.lease_duration_seconds or 0)

    async def _try_acquire_or_renew(self) -> None:
        sent = self.timer()     # every write this attempt makes is sent at or after this instant
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                                  spec=self._spec(0, None))
            await self.api.create_namespaced_lease(self.namespace, body)
            self._observe(body.spec)
            self._became_leader(sent)
            return
        spec = lease.spec or client.V1LeaseSpec()
        self._observe(spec)
        mine = spec.holder_identity == self.identity
        if not mine and not self._expired(spec):
            if self._renewed is not None:
                log.warning("lost the lease to %s", spec.holder_identity)
            self._renewed = None
            return
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        lease.spec = self._spec(transitions, spec.acquire_time if mine else None)
        await self.api.replace_namespaced_lease(self.name, self.namespace, lease)   # 409 if someone won first
        self._observe(lease.spec)
        if not mine:
            self._became_leader(sent)
        self._renewed = sent

    def _became_leader(self, sent: float) -> None:
        log.info("%s now leads (lease %s/%s)", self.identity, self.namespace, self.name)
        self._renewed = sent

    async def _release(self) -> None:
        """Step down: the Lease is left with no holder, which another replica takes at once."""
        self._renewed = None
        try:
            lease = await asyncio.wait_for(self.api.read_namespaced_lease(self.name, self.namespace),
                                           self.renew_seconds)
            if lease.spec and lease.spec.holder_identity == self.identity:
                now = self._now()
                lease.spec = client.V1LeaseSpec(lease_duration_seconds=1, acquire_time=now, renew_time=now,
                                                lease_transitions=lease.spec.lease_transitions)
                await asyncio.wait_for(self.api.replace_namespaced_lease(self.name, self.namespace, lease),
                                       self.renew_seconds)
        except (ApiException, *UNREACHABLE):
            pass
