"""The decisions nobody asks for, between requests: preemptions for pending pods filter never sees, the
evictions preemption decided, waitForPodsReady's and stopPolicy HoldAndDrain's.

All of it is planned first, without awaiting, on one consistent state (plan: a list of evictions); then commit
hands the list to act/ to write.
"""
from __future__ import annotations

from dataclasses import replace

from ..core import gangs, readiness, reclaim
from ..core.admission import decide, may_reclaim
from ..core.stop_policy import drained
from ..core.decisions import Evict
from ..core.workload import Workload, group_of
from ..core.rules import GROUP_PREEMPTING, LOCAL_QUEUE_STOPPED
from ..objects.pod import PodInfo
from ..sync import freshness
from .bind import settle_bindings
from .context import Context
from .gates import RECLAIM_RETRY
from .self_preemption import admit_group, reclaim_for

STATUS_INTERVAL = 10.0       # seconds between ClusterQueue status writes


async def reconcile(ctx: Context) -> int:
    """Settle the bindings of unknown outcome, plan, write the plan's evictions, publish queue status (rate-
    limited). Returns how many pods were evicted."""
    await settle_bindings(ctx)
    evicted = await ctx.commit.evict(plan(ctx))
    publish = getattr(ctx.writer, "publish_status", None)
    if publish is not None and ctx.state.timer() - ctx.status_at >= STATUS_INTERVAL:
        ctx.status_at = ctx.state.timer()
        await publish()          # ClusterQueue .status, rate-limited
        publish_local = getattr(ctx.writer, "publish_local_queue_status", None)
        if publish_local is not None:
            await publish_local()          # LocalQueue .status, likewise
    return evicted


def plan(ctx: Context) -> list[Evict]:
    """Everything a reconcile decides, at once on one consistent state: the evictions to write."""
    ctx.commit.expire()
    ctx.commit.expire_assumed()
    ctx.actions.prune(ctx.state.pods)
    chosen: list[Evict] = []
    reclaim_for_heads(ctx, chosen)
    evictions = chosen + victims_to_evict(ctx) + timed_out_still_running(ctx) + pods_ready_timeouts(ctx) \
        + drains(ctx)
    ctx.commit.evict_jobs_of(e.pod.uid for e in evictions)     # the pods a Job makes again are a new workload
    return evictions


def reclaim_for_heads(ctx: Context, evictions: list[Evict]) -> int:
    """Self-driven reclaim for the head of each ClusterQueue's pending pods, its evictions added to evictions.
    When no node has room, kube-scheduler never calls filter, and its own dry run proposes only lower-priority
    victims: a pod that must reclaim from equal-priority pods (reclaimWithinCohort: Any, fair sharing) would
    wait for ever. A gated head shares the ungate pass's memo of a search that found no victims (gates.RECLAIM_RETRY).
    Returns how many preemptions were started."""
    state, started = ctx.state, 0
    if freshness.stale(state):
        return 0        # no eviction is decided on a stale state
    for head in reclaim.queue_heads(state, lambda p: ctx.unseen(p) or ctx.ready_gate(p)):
        key = group_of(head)
        if key:
            pending = gangs.waiting_members(state, key, head)
            if pending:
                admission = admit_group(ctx, head, key, pending, set())
                _commit(ctx, admission, evictions)
                started += getattr(admission.decision, "rule", "") == GROUP_PREEMPTING
            continue
        now = state.timer()
        if head.gated and not ctx.gates.may_reclaim(head.uid, now, RECLAIM_RETRY):
            continue        # a search for it found no victims less than RECLAIM_RETRY ago (the ungate pass's or ours)
        verdict = decide(state, Workload.of_pod(head))
        if may_reclaim(verdict):
            tried = reclaim_for(ctx, head, verdict)
            _commit(ctx, tried, evictions)
            started += bool(tried.started)
            if head.gated and not tried.started:
                ctx.gates.found_no_victims(head.uid, now)
    return started


def _commit(ctx: Context, decided, evictions: list[Evict]) -> None:
    for record in decided.records:
        ctx.books.record(record)
    evictions.extend(decided.evictions)


def victims_to_evict(ctx: Context) -> list[Evict]:
    """The safety net for self-driven preemption: victims whose eviction failed (act/ retries it once its
    backoff has passed) or was never issued."""
    return [e for holder, held in ctx.state.holds.items() for e in ctx.commit.victims_of(holder, held)]


def pods_ready_timeouts(ctx: Context) -> list[Evict]:
    """waitForPodsReady's timeouts (core.readiness.timeouts), committed: each workload's requeue is
    counted and its members' holds and reservations end before anything is written."""
    state, out = ctx.state, []
    for rq in readiness.timeouts(state, state.clock()):
        ctx.commit.requeue(rq)
        if rq.members:
            out.extend(rq.evictions)
    ctx.timed_out.update((e.pod.uid, e) for e in out)
    return out


def timed_out_still_running(ctx: Context) -> list[Evict]:
    """The safety net for waitForPodsReady: a timed-out member whose eviction failed (a PodDisruptionBudget,
    an API error) is evicted again, after act/'s backoff, until it is gone; the workload is requeued once."""
    state, out = ctx.state, []
    for uid, eviction in list(ctx.timed_out.items()):
        pod = state.pods.get(uid)
        if pod is None or pod.deleting or pod.terminal or not pod.node_name:
            del ctx.timed_out[uid]
            continue
        out.append(replace(eviction, pod=pod))
    return out


def drains(ctx: Context) -> list[Evict]:
    """stopPolicy HoldAndDrain: the admitted pods of a stopped LocalQueue or ClusterQueue are evicted."""
    def stopped(pod: PodInfo, cq: str, reason: str) -> str:
        queue = f"LocalQueue {pod.namespace}/{pod.queue_name}" if reason == LOCAL_QUEUE_STOPPED \
            else f"ClusterQueue {cq}"
        return f"{queue} has stopPolicy HoldAndDrain: its admitted pods are evicted"
    return [Evict(pod, reason, stopped(pod, cq, reason), "drain", record={"queue": cq})
            for pod, cq, reason in drained(ctx.state)]
