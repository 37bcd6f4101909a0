"""preempt: kube-scheduler's dry run found lower-priority victims; Quotient answers with its own victim group per
node (core.preemption.kube_preempt), keeping for the pod the quota its victims free."""
from __future__ import annotations

from ..core.preemption import kube_preempt
from ..core.rules import NO_PREEMPTION, PREEMPTING
from ..journal import PreemptRecord
from .context import Context
from .outcome import Outcome
from .request import PreemptAsk


def preempt(ctx: Context, ask: PreemptAsk) -> Outcome:
    pod = ctx.pod_of(ask.pod)
    unseen = ctx.unseen(pod)
    if unseen:
        return Outcome("preempt", pod, [PreemptRecord(
            pod=pod.key, outcome=NO_PREEMPTION, candidates=ask.nodes,
            reason=f"{unseen}; only pods the API shows may cause evictions")], victims={}, violations={})
    decision = kube_preempt.answer(ctx.state, pod, ask.nodes)
    if decision.passthrough:
        return Outcome("preempt", pod, passthrough=True)
    if decision.reserve is not None:
        r = decision.reserve
        ctx.commit.reserve(r.uid, r.charge, r.timeout)
    victims = [u for uids in decision.victims.values() for u in uids]
    victim_queues = ctx.queues_of(victims)
    ctx.commit.evict_jobs_of(victims)   # kube-scheduler evicts them
    found = decision.plans
    return Outcome("preempt", pod, [PreemptRecord(
        pod=pod.key, outcome=PREEMPTING if decision.victims else NO_PREEMPTION, reason=decision.why,
        queue=decision.cluster_queue, candidates=ask.nodes,
        victims={p.node: [m.key for _, m in p.victims()] for p in found},
        reasons=sorted({t.reason for p in found for t in p.targets}),
        why_not=dict(list(found[0].others.items())[:20]) if found else {}, victim_queues=victim_queues)],
        victims=decision.victims, violations=decision.violations)
