"""Intents: the evictions a decision calls for, written by act/ once the decision is complete.

A decision (filter, preempt, reconcile) runs to its end without awaiting and returns what must be
written; Actions writes it. So no decision is ever split by an await, and the state changes only
from decisions and from the watch. Every eviction is idempotent (a pod already gone or terminating
is a success), so an intent issued twice, or retried after a failure, is harmless. A failed
eviction (a PodDisruptionBudget's 429, an API error) is retried by the decision that still wants
it, no sooner than its backoff allows; /debug shows the failure and the next try.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable

from ..core.decisions import Evict
from ..journal import EvictionRecord
from .writer import WriteError

log = logging.getLogger("quotient.act")
BACKOFF_BASE = 1.0       # seconds before the first retry of a failed eviction, doubling
BACKOFF_MAX = 60.0
DONE_TTL = 60.0          # an eviction written is not issued again meanwhile (the watch shows it by then)


@dataclass
class Failure:
    attempts: int
    error: str
    retry_at: float
    reason: str


class Actions:
    """The single executor of evictions: at most one in flight per pod, failures backed off."""

    def __init__(self, writer: Callable[[], object], journal: Callable[[EvictionRecord], None],
                 clock: Callable[[], float]):
        self._writer = writer
        self._journal = journal
        self.clock = clock      # monotonic (ClusterState.timer): backoffs and DONE_TTL are durations
        self.in_flight: set[str] = set()
        self.failed: dict[str, Failure] = {}
        self.done: dict[str, float] = {}
        self._tasks: set[asyncio.Task] = set()

    def submit(self, intents: list[Evict]) -> None:
        """Write these evictions now, on the event loop, outside the decision that chose them (its answer to
        kube-scheduler does not wait for the API). They are in flight from this moment, so no reconcile issues
        them twice; without a running loop they are not, and the next reconcile writes them."""
        chosen = self._claim(intents)
        if not chosen:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._write(chosen))
        except RuntimeError:
            self.in_flight.difference_update(chosen)
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # A task cancelled before it ran never reaches _write's finally: out of flight here too.
        task.add_done_callback(lambda _, uids=tuple(chosen): self.in_flight.difference_update(uids))

    async def settle(self) -> None:
        """Wait until every eviction submitted so far is written or has failed (tests, the simulator)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def wanted(self, uid: str) -> bool:
        """May an eviction of this pod be issued now: none in flight, none just written, no backoff running."""
        now = self.clock()
        if uid in self.in_flight:
            return False
        written = self.done.get(uid)
        if written is not None:
            if now - written < DONE_TTL:
                return False
            del self.done[uid]
        failure = self.failed.get(uid)
        return failure is None or failure.retry_at <= now

    async def evict(self, intents: list[Evict]) -> int:
        """Write every eviction, concurrently; returns how many were written."""
        return await self._write(self._claim(intents))

    def _claim(self, intents: list[Evict]) -> dict[str, Evict]:
        """The evictions that may be issued now (one per pod), marked in flight."""
        chosen: dict[str, Evict] = {}
        for i in intents:
            if i.pod.uid not in chosen and self.wanted(i.pod.uid):
                chosen[i.pod.uid] = i
        self.in_flight.update(chosen)
        return chosen

    async def _write(self, chosen: dict[str, Evict]) -> int:
        try:
            return sum(await asyncio.gather(*(self._one(i) for i in chosen.values())))
        finally:                 # cancelled before a write began: not in flight, so the next decision issues it
            self.in_flight.difference_update(chosen)

    async def _one(self, intent: Evict) -> bool:
        pod = intent.pod
        try:
            await self._writer().evict(pod, intent.reason, intent.message)
        except Exception as e:      # WriteError, or a bug or a client error: backed off and tried again alike
            if not isinstance(e, WriteError):
                log.exception("evicting %s raised", pod.key)
            previous = self.failed.get(pod.uid)
            attempts = previous.attempts + 1 if previous else 1
            # The exponent is capped: an eviction a PodDisruptionBudget refuses for a day counts over 1,024
            # attempts, and 2.0 ** 1024 overflows (OverflowError, every reconcile from then on).
            delay = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** min(attempts - 1, 30))
            self.failed[pod.uid] = Failure(attempts, str(e), self.clock() + delay, intent.reason)
            log.warning("evicting %s failed (attempt %d, next in %gs): %s", pod.key, attempts, delay, e)
            return False
        finally:
            self.in_flight.discard(pod.uid)
        self.failed.pop(pod.uid, None)
        self.done[pod.uid] = self.clock()
        self._journal(EvictionRecord(verb=intent.verb, pod=pod.key, outcome=intent.outcome, reason=intent.message,
                                     reasons=[intent.reason], **intent.record))
        return True

    def prune(self, pods: dict) -> None:
        """Forget the pods that are gone: nothing about their evictions matters any more."""
        for book in (self.failed, self.done):
            for uid in [u for u in book if u not in pods]:
                del book[uid]

    def view(self, uid: str) -> dict | None:
        """For /debug/pods: an eviction of this pod being written, or failed and waiting to be retried."""
        failure = self.failed.get(uid)
        if uid not in self.in_flight and failure is None:
            return None
        view: dict = {"inFlight": uid in self.in_flight}
        if failure is not None:
            view.update({"reason": failure.reason, "attempts": failure.attempts, "lastError": failure.error,
                         "retryIn": round(max(0.0, failure.retry_at - self.clock()), 3)})
        return view
