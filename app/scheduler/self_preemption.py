"""Self-driven preemption, for a pod (core.reclaim) or a whole pod group (core.gang_admission), decided and
committed: the holds taken, the victims' evictions returned for the caller to write (filter at once, the
reconcile with the rest of its plan)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core import gang_admission, reclaim
from ..core.admission import Verdict
from ..core.decisions import Evict, Refuse
from ..core.rules import GROUP_ADMITTED, NO_PREEMPTION, POD_NOT_SEEN, PREEMPTING
from ..core.workload import WorkloadKey
from ..journal import FilterRecord, Record, ReclaimRecord
from ..objects.pod import PodInfo
from .context import Context


@dataclass(slots=True)
class Reclaimed:
    """A preemption decided: `started` (what filter tells the pod) or `unfound` (why none was found, added to the
    verdict's reason); the group decision (a refusal, or the admission a member passes by); records and
    evictions for the caller."""
    started: str = ""
    unfound: str = ""
    decision: object = None
    records: list[Record] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)


def reclaim_for(ctx: Context, pod: PodInfo, verdict: Verdict) -> Reclaimed:
    """Self-driven reclaim (core.reclaim), committed: the hold taken, the victims' evictions returned."""
    decision = reclaim.reclaim(ctx.state, pod, verdict)
    out = Reclaimed()
    if isinstance(decision, Refuse):
        out.unfound = f"; no preemption: {decision.reason}"
        if decision.rule == NO_PREEMPTION and not ctx.books.repeats(
                pod, "reclaim", NO_PREEMPTION, decision.reason, decision.cluster_queue):
            out.records.append(ReclaimRecord(pod=pod.key, outcome=NO_PREEMPTION, reason=decision.reason,
                                             queue=decision.cluster_queue))
        return out
    h, best = decision
    held = ctx.commit.hold(h)
    out.evictions = ctx.commit.victims_of(pod.uid, held)
    chosen = best.victims()
    shown = ", ".join(f"{m.key} ({reason})" for reason, m in chosen)
    out.records.append(ReclaimRecord(pod=pod.key, outcome=PREEMPTING, reason=shown, queue=h.charge.cluster_queue,
                                     node=best.node, victims={best.node: [m.key for _, m in chosen]},
                                     reasons=[t.reason for t in best.targets],
                                     why_not=dict(list(best.others.items())[:20]),
                                     victim_queues=ctx.queues_of(m.uid for _, m in chosen)))
    out.started = f"{verdict.reason}; preempting {shown} to make room on node {best.node}"
    return out


def admit_group(ctx: Context, pod: PodInfo, key: WorkloadKey, pending: list[PodInfo], on_offer: set[str]) -> Reclaimed:
    """Decide for a whole pod group (core.gang_admission.admit_partially) and commit it: a hold per member, the
    victims' evictions returned. Its decision: the refusal for pod, or the admission it passes by."""
    state, out = ctx.state, Reclaimed()
    job = state.jobs.get(pod.owner.uid) if pod.job else None
    decision = gang_admission.admit_partially(state, key, pending, on_offer, job and job.min_parallelism)
    if isinstance(decision, Refuse):
        out.decision = decision
        return out
    victims = decision.victims
    unseen = next((u for u in (ctx.unseen(state.pods[h.preemptor]) for h in decision.holds) if u), "") \
        if victims else ""
    if unseen:
        out.decision = Refuse(POD_NOT_SEEN, f"{key.described} would preempt, and {unseen}; only pods the API shows "
                              "may cause evictions", decision.cluster_queue)
        return out
    if victims:
        shown = ", ".join(f"{state.pods[u].key} ({r})" for u, (r, _) in victims.items())
        out.records.append(ReclaimRecord(pod=pod.key, outcome=PREEMPTING, reason=shown,
                                         queue=decision.cluster_queue, group=str(key),
                                         reasons=sorted({r for r, _ in victims.values()}),
                                         victims={"(group)": sorted(state.pods[u].key for u in victims)},
                                         victim_queues=ctx.queues_of(victims)))
    evicted: set[str] = set()     # every member's hold shares the victims: none binds before all are gone
    for h in decision.holds:
        held = ctx.commit.hold(h, evicted)
    if job is not None:
        size = len(decision.holds) + sum(1 for m in state.store.members(key) if m.uid in state.admitted)
        ctx.commit.admit_job(job.uid, size, decision.holds[0].charge, partial=size < job.count)
    if victims:
        out.evictions = ctx.commit.victims_of(pod.uid, held)
    out.records.append(FilterRecord(pod=pod.key, outcome=GROUP_ADMITTED, reason="", queue=decision.cluster_queue,
                                    group=str(key), flavors=dict(decision.assignment.flavors),
                                    placement={state.pods[h.preemptor].key: h.node for h in decision.holds}))
    out.decision = decision.answer(pod, on_offer) or decision
    return out
