"""filter: which of the offered nodes the pod may take now, or the one rule that refuses it.

A pod passes when its ClusterQueue admits it (core.admission), onto the nodes of its flavors; a pod group
member passes only with its whole group (core.gang_admission), onto the node held for it; a pod of an admitted
Job takes a slot its workload keeps (core.job_slots). A pod that must reclaim quota starts a preemption here.
"""
from __future__ import annotations

from dataclasses import replace

import orjson

from ..core import filtering, gang_admission, gangs, job_slots, members, reclaim, topology_placement
from ..core.admission import QUEUE_HEAD, Verdict, decide, may_reclaim, resolve
from ..core.decisions import Refuse
from ..core.workload import Workload, WorkloadKey, group_of
from ..core.rules import (ADMITTED, ALREADY_ADMITTED, GROUP_RESERVED, JOB_SLOT, PODS_READY_GATE, PREEMPTING,
                          SOURCE_STALE, WAITING_FOR_VICTIMS)
from ..journal import FilterRecord
from ..objects.offered_nodes import OfferedNodes
from ..objects.pod import PodInfo
from ..objects.quantity import amounts
from ..sync import freshness
from .context import Context
from .outcome import Outcome, passed, refused
from .self_preemption import POD_NOT_SEEN, admit_group, reclaim_for
from .request import Offer


def filter_pod(ctx: Context, offer: Offer) -> Outcome:
    offered = offer.offered
    state, commit = ctx.state, ctx.commit
    if ctx.journal.pending:
        ctx.journal.flush()    # an earlier request's books first: this one's refusal is booked in the same book
    commit.expire()
    commit.forget_stale_learned()          # before the pod is looked up: it may be one of them, learned anew
    pod = ctx.pod_of(offer.pod)
    stale = freshness.refusal(state, pod)
    if stale:
        return refused(pod, SOURCE_STALE, stale, FilterRecord(
            pod=pod.key, outcome=SOURCE_STALE, reason=stale, resolvable=False))
    if pod.queue_name and pod.uid not in state.admitted and pod.uid not in state.holds:
        gate = ctx.ready_gate(pod)
        if gate:
            return refused(pod, PODS_READY_GATE, gate, FilterRecord(
                pod=pod.key, outcome=PODS_READY_GATE, reason=gate, resolvable=False))
    if group_of(pod) and pod.queue_name:
        return _member(ctx, pod, offered)
    waiting = reclaim.victims_left(state, state.holds.get(pod.uid))
    if waiting:
        return refused(pod, WAITING_FOR_VICTIMS, waiting)
    charge = state.admitted.get(pod.uid)
    gate_charge = gate_admission(state, pod) if charge is None else None
    if charge is not None:   # already bound by Quotient: only its flavors' nodes
        verdict = Verdict(ALREADY_ADMITTED, True, cluster_queue=charge.cluster_queue)
        flavors = charge.flavors
    elif gate_charge is not None:     # admitted when its gate was removed (scheduler.ungate): placed, not decided
        verdict = Verdict(ADMITTED, True, cluster_queue=gate_charge.cluster_queue)
        flavors = gate_charge.flavors
    else:
        commit.drop_reservation(pod.uid)
        known = state.blocked.lookup(state, pod, offered)
        if known is not None:          # one of its shape was refused on a walk past it, and not enough has freed since
            return _behind(pod, known, offered)
        verdict = decide(state, Workload.of_pod(pod), offered)
        flavors = verdict.assignment.flavors if verdict.assignment else {}
    if not verdict.managed:
        return passed(pod, *offered.on_offer(state, frozenset()), booked=False)
    tried = verdict.assignment.reasons if verdict.assignment else ()
    records = []
    if not verdict.admit and may_reclaim(verdict):
        unseen = ctx.unseen(pod)
        if unseen:
            reason = f"{verdict.reason}; no preemption: {unseen}; only pods the API shows may cause evictions"
            return refused(pod, POD_NOT_SEEN, reason, FilterRecord(
                pod=pod.key, outcome=POD_NOT_SEEN, reason=reason, queue=verdict.cluster_queue, resolvable=False,
                offered=len(offered.names)), cluster_queue=verdict.cluster_queue)
        started = reclaim_for(ctx, pod, verdict)
        records = started.records
        if started.started:
            out = refused(pod, PREEMPTING, started.started, *records, FilterRecord(
                pod=pod.key, outcome=PREEMPTING, reason=started.started, queue=verdict.cluster_queue,
                resolvable=False, offered=len(offered.names), tried=list(tried)))
            out.evictions = started.evictions
            return out
        verdict = replace(verdict, reason=verdict.reason + started.unfound)
        commit.remember_refused(pod, verdict, offered, reclaim_tried=True)
    elif not verdict.admit:
        commit.remember_refused(pod, verdict, offered)
    if not verdict.admit:
        return refused(pod, verdict.rule, verdict.reason, *records, FilterRecord(
            pod=pod.key, outcome=verdict.rule, reason=verdict.reason, queue=verdict.cluster_queue,
            resolvable=verdict.resolvable, offered=len(offered.names), tried=list(tried)),
            cluster_queue=verdict.cluster_queue, resolvable=verdict.resolvable, assignment=verdict.assignment)
    kept = _flavor_nodes(ctx, pod, frozenset(flavors.values()), offered, verdict.cluster_queue)
    if isinstance(kept, Refuse):
        return _refusal(pod, kept, queue=verdict.cluster_queue)
    if charge is None and gate_charge is None:
        charge = filtering.reservation(state, verdict)
        if isinstance(charge, Refuse):
            return _refusal(pod, charge, queue=verdict.cluster_queue)
        commit.reserve(pod.uid, charge, ctx.reservation_timeout(pod))
    passing, encoded = kept
    # Nodes outside the pod's flavors are dropped without a reason: kube-scheduler treats them
    # as unresolvable and only ever shows reasons when no node is left, which is not the case here.
    return passed(pod, passing, encoded, FilterRecord(
        pod=pod.key, outcome=verdict.rule, reason="", queue=verdict.cluster_queue, flavors=dict(flavors),
        offered=len(offered.names), nodes=len(passing), outside_flavor=len(offered.names) - len(passing),
        borrowing=bool(verdict.assignment and verdict.assignment.borrowing), tried=list(tried)))


def gate_admission(state, pod: PodInfo):
    """The charge reserved when the pod's admission gate was removed (scheduler.ungate), while that admission
    stands: nothing it was decided on changed (state.workloads.admitted_at_gate), its LocalQueue and ClusterQueue
    still admit (active, not stopped, its namespace selected: core.admission.resolve, as Kueue cancels a
    reservation on a stopped queue) and the ClusterQueue is within quota. None: decided anew."""
    charge = state.workloads.admitted_at_gate(pod.uid)
    if charge is None:
        return None
    if resolve(state, Workload.of_pod(pod))[1] is not None:
        return None
    return charge if state.ledger.overrun(charge.cluster_queue) is None else None


def _refusal(pod: PodInfo, r: Refuse, *records, queue: str, group: WorkloadKey | None = None,
             cluster_queue: str | None = None) -> Outcome:
    """A core decision's refusal (a Refuse), journaled with the queue (and the group) it was decided in."""
    return refused(pod, r.rule, r.reason, *records, FilterRecord(
        pod=pod.key, outcome=r.rule, reason=r.reason, queue=queue, group=str(group) if group else None), cluster_queue=cluster_queue)


def _since(known) -> str:
    """Why the refusal still stands (state.blocked), in the answer's words."""
    if not known.short:
        return "nothing has freed quota in its cohort since"
    return f"nothing but less than it lacked ({amounts(known.short)}) has freed in its cohort since"


def _behind(pod: PodInfo, known, offered: OfferedNodes) -> Outcome:
    """A refusal that stands for this pod's shape from a place at or ahead of it (state.blocked): answered
    as it was decided, preemption included (none was found then), naming the pod it was decided for."""
    v = known.verdict
    walk = "with nothing ahead of it taking quota" if known.place == QUEUE_HEAD else \
        "on a walk of its queue that reached this pod"
    reason = v.reason if known.pod == pod.key else (
        f"{v.reason} (as decided for {known.pod}, of the same requests and priority in ClusterQueue "
        f"{v.cluster_queue}, {walk}; {_since(known)})")
    return refused(pod, v.rule, reason, FilterRecord(
        pod=pod.key, outcome=v.rule, reason=reason, queue=v.cluster_queue, resolvable=v.resolvable,
        offered=len(offered.names), tried=list(v.assignment.reasons) if v.assignment else []),
        cluster_queue=v.cluster_queue, resolvable=v.resolvable, assignment=v.assignment)


def _flavor_nodes(ctx: Context, pod: PodInfo, flavors: frozenset, offered: OfferedNodes,
                  cluster_queue: str) -> tuple[list, bytes] | Refuse:
    """The offered nodes of the pod's flavors it may take (core.filtering.nodes_for), and their JSON."""
    passing, encoded = offered.on_offer(ctx.state, flavors)
    kept = filtering.nodes_for(ctx.state, pod, flavors, passing, len(offered.names))
    if isinstance(kept, Refuse):
        return kept
    if pod.topology_asked:         # Kueue's TAS: a lone pod's domain, or a Job's pod beside its peers
        kept = topology_placement.narrow(ctx.state, pod, group_of(pod), flavors, kept,
                                         ctx.state.workloads.rooms(pod.uid), cluster_queue)
        if isinstance(kept, Refuse):
            return kept
    return (passing, encoded) if kept is passing else (kept, orjson.dumps(kept))


def _member(ctx: Context, pod: PodInfo, offered: OfferedNodes) -> Outcome:
    """A pod group member (core.gang_admission): the group is admitted whole, every member with a node
    of its own held at once, or none is; a member then passes only onto its held node."""
    state, key = ctx.state, group_of(pod)

    def onto(node: str, *records, booked: bool = True) -> Outcome:
        return passed(pod, [node], orjson.dumps([node]), *records, remember=False, booked=booked)

    if pod.node_name:          # already bound: its own node only, the group is not admitted again
        if pod.node_name in offered.names:
            return onto(pod.node_name, booked=False)
        bound = Refuse(ALREADY_ADMITTED, f"pod {pod.key} is already bound to {pod.node_name}")
        return _member_refusal(pod, key, bound)
    admitted = state.job_admissions.get(pod.owner.uid) if pod.job else None
    if admitted is not None and pod.uid not in state.holds:
        return _job_pod(ctx, pod, key, admitted, offered)
    group = state.store.members(key)
    refusal = gang_admission.check_group(state, pod, key, group)
    if refusal is not None:
        ctx.commit.release(members.released_by(refusal, group))
        return _member_refusal(pod, key, refusal)
    held = state.holds.get(pod.uid)
    if held is not None:
        refusal = gang_admission.held_member(state, key, group, held, offered.names)
        if refusal is not None:
            return _member_refusal(pod, key, refusal)
        return onto(held.node, FilterRecord(pod=pod.key, outcome=GROUP_RESERVED, reason="", group=str(key),
                                            node=held.node))
    admission = admit_group(ctx, pod, key, gangs.pending_members(state, group), set(offered.names))
    if isinstance(admission.decision, Refuse):
        out = _member_refusal(pod, key, admission.decision, *admission.records)
    else:
        out = onto(admission.decision.node_of(pod.uid), *admission.records)
    out.evictions = admission.evictions
    return out


def _member_refusal(pod: PodInfo, key: WorkloadKey, r: Refuse, *records) -> Outcome:
    """A refusal of a pod group member (or a Job's pod), decided for its group."""
    return _refusal(pod, r, *records, queue=r.cluster_queue, group=key, cluster_queue=r.cluster_queue or None)


def _job_pod(ctx: Context, pod: PodInfo, key: WorkloadKey, admitted, offered: OfferedNodes) -> Outcome:
    """A pod of a Job whose workload is admitted (state.job_workloads.JobAdmission): it runs in a slot the workload's
    quota keeps (in place of a pod that finished or failed), with no new quota decision, or waits."""
    state, charge = ctx.state, admitted.charge
    if job_slots.queue_changed(state, pod, charge.cluster_queue):    # not this workload's slot
        ctx.commit.evict_job(pod.owner.uid)
        return _member(ctx, pod, offered)
    at_size = job_slots.at_size(state, pod, key, admitted)
    if at_size is not None:
        return _member_refusal(pod, key, at_size)
    kept = _flavor_nodes(ctx, pod, frozenset(charge.flavors.values()), offered, charge.cluster_queue)
    if isinstance(kept, Refuse):
        return _refusal(pod, kept, queue=charge.cluster_queue)
    passing, encoded = kept
    if pod.uid not in state.reservations:
        ctx.commit.reserve(pod.uid, admitted.spare_charge(1), ctx.reservation_timeout(pod))
    return passed(pod, passing, encoded, FilterRecord(
        pod=pod.key, outcome=JOB_SLOT, reason="", queue=charge.cluster_queue, group=str(key),
        flavors=dict(charge.flavors), offered=len(offered.names), nodes=len(passing)))
