"""bind: the charge a binding takes, re-checked and committed before the Binding is written, taken back if the
write fails.

The pod is assumed bound (its charge taken) before the write, so two pods can never both hold the last unit of
quota. One bind per pod is in flight: a second call for the same pod waits for the first and then decides on
what it left. A write whose outcome is not known (OutcomeUnknown) keeps the charge until the API says
(settle_bindings, the watch, a retried bind).
"""
from __future__ import annotations

import asyncio
import logging

from ..act.writer import OutcomeUnknown, WriteError
from ..core import binding, members
from ..core.flavors import Charge
from ..core.rules import BOUND, OUTCOME_UNKNOWN, QUOTA_INVARIANT, REFUSED, WRITE_FAILED
from ..journal import BindRecord
from ..objects.pod import PodInfo
from ..sync import freshness
from .context import Context
from .outcome import Outcome
from .request import BindAsk

log = logging.getLogger("quotient.extender")


def check_binding(ctx: Context, pod: PodInfo, node: str) -> tuple[Charge | None, str]:
    """The charge a binding takes, re-checked now (core.binding); (None, reason) when it must be refused.
    A reservation that does not cover node is given back before admission is decided again."""
    state, commit = ctx.state, ctx.commit
    commit.expire()
    why = freshness.refusal(state, pod) or binding.room_refusal(state, pod, node)
    if why:
        return None, why
    why = binding.changed_refusal(state, pod)
    if why:              # filter decides on the pod as it is now: its group with it, all or nothing
        commit.release(members.released_at_bind(state, pod))
        return None, why
    kept = binding.reserved_charge(state, pod, node)
    if kept is not None:
        return kept, ""
    commit.drop_reservation(pod.uid)
    alone = members.alone_at_bind(pod, node)
    if alone:
        return None, alone
    gate = ctx.ready_gate(pod) if pod.queue_name else ""
    if gate:             # e.g. its workload timed out after filter passed it, and backs off now
        return None, gate
    return binding.charge_at_bind(state, pod, node)


def _answer(pod: PodInfo | None, error: str = "", *records) -> Outcome:
    return Outcome("bind", pod, list(records), error=error)


async def bind(ctx: Context, ask: BindAsk) -> Outcome:
    """Decide (check, then commit the charge: the pod is assumed bound), write the Binding, and take
    the decision back if the write was refused."""
    state, commit, node = ctx.state, ctx.commit, ask.node
    key = f"{ask.pod_namespace}/{ask.pod_name}"
    while True:
        pod = state.store.pod_by_key(key)
        busy = ctx.binding.get(pod.uid) if pod is not None else None
        if busy is None:
            break
        await busy.wait()
    if pod is None or (ask.pod_uid and pod.uid != ask.pod_uid):
        return _answer(pod, f"pod {key} (uid {ask.pod_uid}) is not known to Quotient; it must pass filter first")
    if pod.node_name:
        if pod.node_name != node:
            return _answer(pod, f"pod {pod.key} is already bound to {pod.node_name}")
        stale = freshness.refusal_if_stale(state, "Pod")
        if stale:               # the Pod list is being read again: it may have lost that binding
            return _answer(pod, stale)
        if pod.uid not in state.assumed:
            return _answer(pod)       # the API shows it bound there
        charge = state.admitted.get(pod.uid)   # Quotient's word only: the Binding is written again, and checked
    else:
        refusal = ctx.unseen(pod)
        if refusal:
            refusal += "; it is bound once the watch delivers it"
        else:
            charge, refusal = check_binding(ctx, pod, node)
        if refusal:
            return _answer(pod, refusal, BindRecord(pod=pod.key, outcome=REFUSED, reason=refusal))
        refusal = commit.bind(pod.uid, node, charge)
        if refusal:
            refusal = f"quota invariant: {refusal}; the pod waits until the quota is really free"
            return _answer(pod, refusal, BindRecord(pod=pod.key, outcome=QUOTA_INVARIANT, reason=refusal))
    return await _write(ctx, pod, node, charge)


async def _write(ctx: Context, pod: PodInfo, node: str, charge: Charge | None) -> Outcome:
    """Write the Binding; a refused write takes the charge back, an unknown outcome keeps it until the API says."""
    state = ctx.state
    done = ctx.binding[pod.uid] = asyncio.Event()
    try:
        await ctx.writer.bind(pod, node)
    except OutcomeUnknown as e:          # it may have landed: the charge stays until the API says
        if pod.uid in state.assumed:
            ctx.unsettled[pod.uid] = node
            reason = f"{e}; Quotient keeps its quota until the API shows whether the Binding landed"
            return _answer(pod, reason, BindRecord(pod=pod.key, outcome=OUTCOME_UNKNOWN, reason=reason, node=node))
        if state.pods.get(pod.uid, pod).node_name != node:      # the watch has spoken meanwhile
            return _answer(pod, f"binding {pod.key} to {node} failed: {e}",
                           BindRecord(pod=pod.key, outcome=WRITE_FAILED, reason=str(e)))
        log.info("binding %s to %s: the write's answer was lost, the watch shows it bound", pod.key, node)
    except Exception as e:      # WriteError, or anything a client library raised: the charge is taken back
        if not isinstance(e, WriteError):
            log.warning("binding %s to %s: %s: %s", pod.key, node, type(e).__name__, e)
        ctx.unsettled.pop(pod.uid, None)
        if ctx.commit.unbind(pod.uid, node) or state.pods.get(pod.uid, pod).node_name != node:
            return _answer(pod, f"binding {pod.key} to {node} failed: {e}",
                           BindRecord(pod=pod.key, outcome=WRITE_FAILED, reason=str(e)))
        log.info("binding %s to %s: the write's answer was lost, the watch shows it bound", pod.key, node)
    finally:
        del ctx.binding[pod.uid]
        done.set()
    ctx.unsettled.pop(pod.uid, None)
    return _answer(pod, "", BindRecord(pod=pod.key, outcome=BOUND, reason="", node=node,
                                       queue=charge.cluster_queue if charge else ""))


async def settle_bindings(ctx: Context) -> int:
    """Read back the bindings whose outcome was not known (OutcomeUnknown), until the API says whether each
    landed: bound to its node, its charge stays; not bound (or gone, or elsewhere), the charge is taken back.
    One read per binding per reconcile, all at once (each bounded by the writer's API timeout), while reads
    fail. Returns how many were taken back.

    So are the bindings no event has confirmed within ASSUMED_TTL, none held back either (the guard's expiry
    takes those): an API server restored from a backup that no watch noticed may have lost one, and no event of
    the pod may ever come again to say so."""
    read, state, undone = getattr(ctx.writer, "bound_node", None), ctx.state, 0
    if read is None:
        return 0
    for uid in state.bindings.past_guard():
        pod = state.pods.get(uid)
        if uid not in state.bindings.held_back and uid not in ctx.unsettled and uid not in ctx.binding \
                and pod is not None and pod.node_name:
            ctx.unsettled[uid] = pod.node_name
    if not ctx.unsettled:
        return 0
    asked = []
    for uid, node in list(ctx.unsettled.items()):
        pod = state.pods.get(uid)
        if pod is None or uid not in state.assumed or pod.node_name != node:
            del ctx.unsettled[uid]          # the watch has spoken (or the pod is gone)
        elif uid not in ctx.binding:        # (a retried bind in flight writes it again and settles it)
            asked.append((pod, node))
    answers = await asyncio.gather(*(read(pod) for pod, _ in asked), return_exceptions=True)
    for (pod, node), shown in zip(asked, answers):
        if isinstance(shown, BaseException):
            log.info("binding %s to %s: still not known (%s: %s)", pod.key, node, type(shown).__name__, shown)
            continue
        if ctx.unsettled.get(pod.uid) != node or pod.uid in ctx.binding:
            continue                         # settled meanwhile
        del ctx.unsettled[pod.uid]
        if shown == node:
            log.info("binding %s to %s: the API shows it landed", pod.key, node)
        elif ctx.commit.unbind(pod.uid, node):
            undone += 1
            where = "no such pod" if shown is None else f"bound to {shown}" if shown else "not bound"
            ctx.books.record(BindRecord(pod=pod.key, outcome=WRITE_FAILED, reason=(
                f"binding {pod.key} to {node}: its outcome was not known; read back: {where}; "
                "the charge is taken back")))
    return undone
