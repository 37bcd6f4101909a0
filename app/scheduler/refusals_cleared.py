"""The refusals that no longer hold in Quotient's own state, noted (for /debug/pods and
quotient_refusals_cleared_total); nothing is written: a pod answered as a retry is tried again by kube-scheduler
by itself, and no write would move a parked one (app/refusals.py)."""
from __future__ import annotations

import itertools

from ..core.cleared import cleared_cause
from ..core.workload import group_of
from ..state.blocked import REMEMBERED
from .context import Context

CLEARED_CHECKS = 500          # refusals judged per note_cleared call at most


def note_cleared(ctx: Context) -> int:
    """At most CLEARED_CHECKS refusals per call, the oldest first, then the others. A quota or queue-order
    refusal is judged once per ClusterQueue and pod shape, in queue order: once one still stands, so do those of
    its shape behind it (state.blocked), so a backlog of thousands costs a few decisions a call. Returns how many
    cleared in this call."""
    ctx.journal.flush()           # the refusal book's notes of requests answered just now (outcome.book_later)
    state, refusals, now, cleared = ctx.state, ctx.refusals, ctx.state.clock(), 0
    ctx.commit.expire()           # a hold or reservation past its time clears refusals too
    batch: dict[tuple, list] = {}
    for uid in list(itertools.islice(refusals, CLEARED_CHECKS)):
        r, pod = refusals.pop(uid), state.pods.get(uid)
        if pod is None or pod.node_name or pod.terminal or pod.deleting:
            continue                                 # bound or gone: out of the book
        refusals[uid] = r                            # judged again after the others
        if r.cleared_at is not None:
            continue                                 # once per refusal; filter's next answer books anew
        alike = (pod.shape, r.rule) if r.rule in REMEMBERED and not group_of(pod) else (uid,)
        batch.setdefault(alike, []).append((pod, r))
    for refused in batch.values():
        refused.sort(key=lambda pr: state.queues.queue_key(pr[0]))
        for pod, r in refused:
            if pod.uid not in state.holds:
                ctx.commit.forget_stale_requeue(pod)      # a controller's new owner: its old requeues are gone
            cause = cleared_cause(state, pod, r.rule, r.reason, r.holds)
            if not cause:
                break                                # it stands: so do those of its shape behind it
            r.cleared_at, r.cause = now, cause
            refusals.cleared[cause] += 1
            cleared += 1
    return cleared
