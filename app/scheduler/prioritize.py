"""prioritize: pack, scoring each offered node 0..10 by how full it would be (core.placement.pack_scores).

kube-scheduler sends prioritize only the nodes that passed filter, which are already the nodes of the pod's
flavors, so they are not checked again here."""
from __future__ import annotations

from ..core.placement import pack_scores
from .context import Context
from .outcome import Outcome
from .request import Offer


def prioritize(ctx: Context, offer: Offer) -> Outcome:
    pod = ctx.pod_of(offer.pod)
    table = ctx.state.ledger.node_table
    return Outcome("prioritize", pod, scores=pack_scores(table.fullness(offer.offered.rows(table), pod.requests)))
