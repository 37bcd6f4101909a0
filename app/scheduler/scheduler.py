"""The Scheduler: the entry points api/, the simulator and the loops call, each ending its request's Outcome.

filter, prioritize and preempt decide without awaiting; bind awaits only another bind of the same pod, and its
write after committing. A request's evictions are handed to act/ and its records journaled once it is decided.
"""
from __future__ import annotations

from ..core.decisions import Evict
from . import bind, filter, preempt, prioritize, reconcile, refusals_cleared, ungate
from .context import Context
from .outcome import Outcome
from .request import BindAsk, Offer, PreemptAsk


class Scheduler(Context):
    """The Context with its entry points: each runs its verb module on itself (the verbs take a Context, so none
    sees these entry points) and closes the request's Outcome. A subclass, not a holder of a Context: it adds no
    state of its own, and what api/, ui/, observe/ and the simulator read of it (its state, journal, refusals,
    actions; observe wraps its writer) is the Context's, with no second object to reach through."""

    def _close(self, out: Outcome) -> Outcome:
        self.commit.submit(out.evictions)
        return self.books.close(out)

    def filter(self, offer: Offer) -> Outcome:
        out = filter.filter_pod(self, offer)
        out.offered = len(offer.offered.names)
        return self._close(out)

    def prioritize(self, offer: Offer) -> Outcome:
        return prioritize.prioritize(self, offer)

    def preempt(self, ask: PreemptAsk) -> Outcome:
        return self._close(preempt.preempt(self, ask))

    async def bind(self, ask: BindAsk) -> Outcome:
        return self._close(await bind.bind(self, ask))

    async def settle_bindings(self) -> int:
        return await bind.settle_bindings(self)

    async def reconcile(self) -> int:
        return await reconcile.reconcile(self)

    def plan(self) -> list[Evict]:
        return reconcile.plan(self)

    def reclaim_for_heads(self) -> int:
        """reconcile's reclaim for the queues' heads alone, its evictions written at once."""
        evictions: list[Evict] = []
        started = reconcile.reclaim_for_heads(self, evictions)
        self.commit.submit(evictions)
        return started

    def ungate(self) -> int:
        """Remove the admission gate of the gated pods admitted now (scheduler.ungate)."""
        return ungate.ungate(self)

    def note_cleared(self) -> int:
        return refusals_cleared.note_cleared(self)

    def reactivate(self, key: str) -> bool:
        """Clear a workload's PodsReadyTimeout record (deactivation and backoff), as an admin asks."""
        return self.commit.reactivate(key)
