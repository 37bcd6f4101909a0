"""Kueue's admission gate for plain pods: a gated pod waits outside kube-scheduler's queue, costing nothing, until
its ClusterQueue admits it; then its quota is reserved and the gate removed, and kube-scheduler places it.

Kueue gates the pods of its plain-pod integration at creation (its webhook; Quotient's: app/api/pod_gate.py) and
ungates a workload once it is admitted (pkg/controller/jobs/pod). Without the gate, kube-scheduler asks about
every waiting pod again after each backoff (up to 10 s), so a backlog of thousands costs requests every second
and a pod whose quota frees waits for its backoff to end (issue 32). With it, a pass here decides each
ClusterQueue's heads in queue order, one pod of each shape (state.blocked remembers a refusal per shape), as the
filter verb would decide them (core.admission.decide, the same reservation); a head that must reclaim starts its
preemption here (self_preemption), keeping the gate until its victims are gone. A pod group is ungated whole
once every member holds a node (core.gang_admission). Ungating admits nothing by itself: kube-scheduler's
filter and bind still decide on the state as it is then, so the quota invariant never rests on this pass.

Gated pods not Quotient's to hold (no queue label, a batch/v1 Job's pods, which filter admits by their Job's
workload) are ungated at once. A pod whose LocalQueue does not exist stays gated, as Kueue keeps it. /debug/pods
says what each gated pod waits for (state.queues.gate_waiting).
"""
from __future__ import annotations

import asyncio
import logging

from ..core import gang_admission, gangs, members, reclaim
from ..core.admission import decide, may_reclaim
from ..core.decisions import Refuse
from ..core.filtering import reservation
from ..core.rules import PODS_READY_GATE, PREEMPTING, WAITING_FOR_VICTIMS
from ..core.workload import Workload, WorkloadKey, group_of
from ..objects.offered_nodes import OfferedNodes
from ..objects.pod import PodInfo
from ..sync import freshness
from .context import Context
from .filter import gate_admission
from .gates import RECLAIM_RETRY
from .self_preemption import admit_group, reclaim_for

log = logging.getLogger("quotient.ungate")
UNGATE_INTERVAL = 0.2      # seconds between two passes (a pass is skipped while nothing changed: QUIET_PASS)
GROUP_RETRY = 1.0          # seconds between two decisions for one waiting pod group (none is remembered per shape)
QUIET_PASS = 1.0           # seconds a pass is skipped for while nothing in the state changed


def ungate(ctx: Context) -> int:
    """One pass: issue the gate removals of every gated pod admitted now; returns how many were issued."""
    state, gates = ctx.state, ctx.gates
    queues = state.queues
    if not queues.gated and not queues.not_held:
        return 0
    now = state.timer()
    if gates.quiet(state.generation, now, QUIET_PASS):
        return 0                       # nothing changed since the last pass: it would decide the same
    gates.forget_shown(state.pods, now)
    chosen = [state.pods[u] for u in queues.not_held if u in state.pods and gates.due(u, now)]
    if not freshness.stale(state):     # no admission on a stale state (the filter verb refuses SourceStale too)
        ctx.commit.expire()
        offered = gates.offered(state)
        for cq_name, shapes in _kueue_order(state, list(queues.gated.items())):
            for shape, entries in sorted(shapes.items(), key=lambda kv: kv[1][0]):
                held = _shape_heads(ctx, cq_name, shape, list(entries), offered, now)
                chosen.extend(held)
    for pod in chosen:
        _issue(ctx, pod, now)
    return len(chosen)


def _kueue_order(state, gated: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The ClusterQueues in the order of their heads, as Kueue's scheduler orders a cycle's heads: those that fit
    within their ClusterQueue's nominal quota first, then by the queue's own order (priority, then age). A
    borrower decided after the heads within nominal finds them admitted, not pending ahead of it in the cohort
    (NominalQuotaFirst, which any freed quota clears), and between two borrowers the elder gets the room left,
    whichever ClusterQueue it is in. Only the order of the decisions comes from here; each is core's."""
    def key(item) -> tuple:
        cq_name, shapes = item
        place, uid = min(entries[0] for entries in shapes.values())
        node, head = state.ledger.quota_node(cq_name), state.pods.get(uid)
        return (node is not None and head is not None and _borrows(node, head), place)
    return sorted(gated, key=key)


def _borrows(node, pod: PodInfo) -> bool:
    """Whether the pod's requests exceed what its ClusterQueue's nominal quota has left, over every flavor of each
    resource it covers (an estimate for the order only: the flavors are core.flavors' to choose)."""
    left: dict[str, int] = {}
    for (flavor, resource), nominal in node.subtree.items():
        left[resource] = left.get(resource, 0) + max(0, nominal - node.usage.get((flavor, resource), 0))
    return any(amount > left[r] for r, amount in pod.requests.items() if r in left)


def _shape_heads(ctx: Context, cq_name: str, shape, entries: list[tuple], offered: OfferedNodes,
                 now: float) -> list[PodInfo]:
    """The pods of one gated shape of a ClusterQueue to ungate now, in queue order, up to the first that must wait."""
    state, gates, out = ctx.state, ctx.gates, []
    if not isinstance(shape, WorkloadKey):      # (a pod's shape is a tuple too)
        for _, uid in entries:
            if not gates.due(uid, now):
                continue                    # its removal is on its way (its reservation keeps its quota), or failed
            pod = state.pods[uid]
            why = _lone_pod(ctx, pod, offered)
            if why is not None and why[0] == PODS_READY_GATE and not _blocks_admission(state):
                continue                    # this workload backs off (waitForPodsReady); those behind it do not
            if why is not None:
                state.queues.gate_waiting[(cq_name, shape)] = (pod.key, *why)
                return out
            out.append(pod)
        state.queues.gate_waiting.pop((cq_name, shape), None)
        return out
    group = _group(ctx, shape, state.pods[entries[0][1]], now)
    if group is None:
        return out                          # decided within GROUP_RETRY: its waiting reason stands
    if isinstance(group, tuple):
        state.queues.gate_waiting[(cq_name, shape)] = (str(shape), *group)
        return out
    state.queues.gate_waiting.pop((cq_name, shape), None)
    return [m for m in group if m.gated and gates.due(m.uid, now)]


def _lone_pod(ctx: Context, pod: PodInfo, offered: OfferedNodes) -> tuple[str, str] | None:
    """None when the pod is admitted now (its quota reserved, or its preemption's victims gone), else (rule,
    reason) it waits for, as filter would refuse it."""
    state, commit = ctx.state, ctx.commit
    if gate_admission(state, pod) is not None:
        return None                         # admitted by an earlier pass, its removal not shown yet: written again
    held = state.holds.get(pod.uid)
    if held is not None:
        left = reclaim.victims_left(state, held)
        if left:
            return WAITING_FOR_VICTIMS, left
        commit.admitted_at_gate(pod.uid)    # the quota its preemption freed is its admission, as filter's would be
        return None
    gate = ctx.ready_gate(pod)
    if gate:
        return PODS_READY_GATE, gate
    commit.drop_reservation(pod.uid)        # a lapsed admission of an earlier pass is decided anew, as filter does
    known = state.blocked.lookup(state, pod, offered)
    if known is not None:
        return known.verdict.rule, known.verdict.reason
    verdict = decide(state, Workload.of_pod(pod), offered)
    if not verdict.managed:
        return None
    if verdict.admit:
        charge = reservation(state, verdict)
        if isinstance(charge, Refuse):
            return charge.rule, charge.reason
        commit.reserve(pod.uid, charge, ctx.reservation_timeout(pod), gate=True)
        return None
    if may_reclaim(verdict) and not ctx.unseen(pod) and ctx.gates.may_reclaim(pod.uid, state.timer(), RECLAIM_RETRY):
        tried = reclaim_for(ctx, pod, verdict)
        _commit(ctx, tried)
        if tried.started:
            return PREEMPTING, tried.started
        ctx.gates.found_no_victims(pod.uid, state.timer())
        commit.remember_refused(pod, verdict, offered, reclaim_tried=True)
        return verdict.rule, verdict.reason + tried.unfound
    commit.remember_refused(pod, verdict, offered)
    return verdict.rule, verdict.reason


def _group(ctx: Context, key, head: PodInfo, now: float) -> list[PodInfo] | tuple[str, str] | None:
    """A gated pod group's members to ungate (every member holds a node, its victims gone), (rule, reason) it
    waits for, or None when it was decided less than GROUP_RETRY ago."""
    state, gates = ctx.state, ctx.gates
    group = state.store.members(key)
    refusal = gang_admission.check_group(state, head, key, group)
    if refusal is not None:
        ctx.commit.release(members.released_by(refusal, group))
        return refusal.rule, refusal.reason
    waiting = gangs.pending_members(state, group)
    if waiting:
        if now - gates.group_tried.get(key, float("-inf")) < GROUP_RETRY:
            return None
        gates.group_tried[key] = now
        admission = admit_group(ctx, head, key, waiting, set())
        _commit(ctx, admission)
        if gangs.pending_members(state, group) and isinstance(admission.decision, Refuse):
            return admission.decision.rule, admission.decision.reason    # (admitted: a member's answer is its node)
    gates.group_tried.pop(key, None)
    left = next((w for w in (reclaim.victims_left(state, state.holds.get(m.uid)) for m in group) if w), "")
    return (WAITING_FOR_VICTIMS, left) if left else group


def _commit(ctx: Context, decided) -> None:
    """A preemption decided here (self_preemption.Reclaimed): its records booked, its evictions written at once."""
    for record in decided.records:
        ctx.books.record(record)
    ctx.commit.submit(decided.evictions)


def _blocks_admission(state) -> bool:
    """waitForPodsReady's blockAdmission: a workload not yet ready holds every admission, so a refusal for it
    stands for the pods behind too; otherwise it is one workload's requeue backoff."""
    cfg = state.config.wait_for_pods_ready
    return cfg is not None and cfg.block_admission


def _issue(ctx: Context, pod: PodInfo, now: float) -> None:
    """Write the gate's removal on the event loop, outside the pass that decided it."""
    gates = ctx.gates
    gates.issued[pod.uid] = now
    try:
        gates.track(asyncio.get_running_loop().create_task(_write(ctx, pod)))
    except RuntimeError:           # no event loop (a synchronous caller): the next pass issues it
        del gates.issued[pod.uid]


async def _write(ctx: Context, pod: PodInfo) -> None:
    """The removal written; refused or failed, what was kept for the pod ends (its reservation, its hold, and a
    group member's whole group's), and it is decided again once REISSUE_AFTER has passed (gates.due)."""
    gates = ctx.gates
    try:
        await ctx.writer.ungate(pod)
    except Exception as e:          # WriteError, or a bug
        gates.failed += 1
        gates.issued[pod.uid] = ctx.state.timer()
        key = group_of(pod)
        ctx.commit.release(ctx.state.store.members(key) if key else [pod])
        log.warning("removing the admission gate of %s failed: %s", pod.key, e)
        return
    gates.ungated += 1
