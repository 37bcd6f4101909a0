"""The four extender verbs, from wire bytes to wire bytes, over one ClusterState.

Each verb decodes, asks core/ for decisions (typed: core.decisions), commits them to the state,
hands the writes to act/, journals one record of its own type, and encodes. Deciding and committing
run without an await between them, so a decision is made and applied on one consistent state; the
only awaits are before deciding (bind waits for another bind of the same pod) and after committing
(act/'s writes). bind charges quota before it writes and takes the charge back if the write fails, so
two pods can never both hold the last unit of quota.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import replace

import orjson

from .act.intents import Actions
from .act.writer import LOCAL_QUEUE_STOPPED, OutcomeUnknown, WriteError, Writer
from .api import wire
from .api.offered import OfferedNodeCache, OfferedNodes
from .core import binding, filtering, gang_admission, gangs, next_in_line, readiness, reclaim
from .core.admission import Verdict, decide, drained, may_reclaim
from .core.cleared import cleared_cause
from .core.decisions import Evict, Refuse
from .core.drift import OVER_QUOTA
from .core.flavors import Charge
from .core.placement import pack_scores
from .core.preemption import kube_preempt
from .core.workload import RequeueRecord, WorkloadKey, group_of
from .journal import BindRecord, ChargeRecord, FilterRecord, Journal, PreemptRecord, ReclaimRecord, Record
from .objects.errors import InvalidObject
from .objects.pod import PodInfo, decode_pod
from .refusals import Refusals, retry_cause, retry_message
from .state.blocked import REMEMBERED
from .state.cluster import ClusterState
from .sync import freshness

log = logging.getLogger("quotient.extender")
STATUS_INTERVAL = 10.0       # seconds between ClusterQueue status writes
CLEARED_CHECKS = 500          # refusals judged per note_cleared call at most
POD_NOT_SEEN = "PodNotSeen"    # a pod the API has not shown may not preempt (answered as a retry)
FILTER_TAIL = b',"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'


class Extender:
    def __init__(self, state: ClusterState, writer: Writer, journal: Journal | None = None):
        self.state = state
        self.writer = writer
        self.journal = journal or Journal()
        self.offered = OfferedNodeCache(skip=state.skip)
        self.actions = Actions(lambda: self.writer, self._journal, state.timer)
        self.refusals = Refusals()
        self._binding: dict[str, asyncio.Event] = {}     # pod uid -> set when its bind in flight ends
        self._planned: list[Evict] | None = None      # a reconcile's evictions, while it plans
        self._timed_out: dict[str, Evict] = {}        # waitForPodsReady's evictions, until the pod goes
        self.unsettled: dict[str, str] = {}           # pod uid -> node: a Binding whose outcome is not known yet
        self._status_at = float("-inf")      # on state.timer: the first round publishes
        state.on_overrun = lambda o: self._journal(ChargeRecord(
            pod=o.pod, outcome=OVER_QUOTA, queue=o.cluster_queue, reason=f"{o.reason}; the API took this change, "
            f"which an extender cannot refuse: ClusterQueue {o.cluster_queue} admits no pod until it is back within quota"))

    # ---- helpers ---------------------------------------------------------
    def _pod(self, obj: dict) -> PodInfo:
        """The state's record of a pod, learning it from the request when new."""
        meta = obj.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        if uid and isinstance(uid, str):
            known = self.state.pods.get(uid)
            if known is not None:
                return known
        try:
            pod = decode_pod(obj)
        except InvalidObject as e:
            raise wire.WireError(f'"Pod": {e}') from None
        known = self.state.pods.get(pod.uid)
        if known is not None:
            return known
        self.state.learn_pod(pod)
        return pod

    def _journal(self, record: Record) -> None:
        self.journal.record(record.entry(self.state.clock()))

    def _repeats(self, pod: PodInfo, verb: str, outcome: str, reason: str, queue: str) -> bool:
        """The pod's newest decision by verb is this one already. Every reconcile looks again at each
        ClusterQueue's head that filter may never see; recording its unchanged NoPreemption each time
        filled the journal with copies (0.5 KB a cycle on a steady cluster, until the ring was full,
        pushing every other decision out of it: issue 16, point 12). Recorded again once it changed."""
        for entry in reversed(self.journal.by_pod.get(pod.key, ())):
            if entry["verb"] == verb:
                return entry["outcome"] == outcome and entry["reason"] == reason and entry.get("queue") == queue
        return False

    def _offer(self, raw: bytes) -> tuple[dict, OfferedNodes, dict | None]:
        """(the Pod object, the offered nodes, Node objects by name when nodeCacheCapable is false)."""
        fast = self.offered.split(raw)
        if fast is not None:
            body, offered = fast
            pod = body.get("Pod")
            if not isinstance(pod, dict):
                raise wire.WireError('"Pod" must be a Pod object')
            return pod, offered, None
        args = wire.decode_extender_args(raw)
        return args.pod, OfferedNodes(args.node_names), args.nodes

    @staticmethod
    def _filter_answer(nodes: dict | None, passing: list[str], encoded: bytes,
                       failed: dict | None = None, unresolvable: dict | None = None) -> bytes:
        """The filter answer; the common one (NodeNames, no reasons) is spliced from cached bytes."""
        if nodes is None and not failed and not unresolvable:
            return b'{"Nodes":null,"NodeNames":' + encoded + FILTER_TAIL
        return wire.encode_filter(nodes, passing, failed or {}, unresolvable or {})

    @classmethod
    def _refuse_all(cls, nodes: dict | None, offered: OfferedNodes, reason: str) -> bytes:
        """No node passes, for one reason preemption on kube-scheduler's side cannot help with."""
        return cls._filter_answer(nodes, [], b"[]", unresolvable=dict.fromkeys(offered.names, reason))

    def _refuse(self, pod: PodInfo, rule: str, reason: str, nodes: dict | None, offered: OfferedNodes,
                cluster_queue: str | None = None, resolvable: bool = False, assignment=None) -> bytes:
        """No node passes; the refusal booked. One that clears by itself soon is answered as an error, so
        kube-scheduler tries the pod again after its backoff instead of parking it (app/refusals.py);
        any other parks it, with FailedNodes when kube-scheduler's preemption may help. A pod refused again
        for the rule it was refused for last is answered in the same words (Refusals.refused)."""
        state = self.state
        state.tried(pod.uid, refused=True)
        retry = retry_cause(state, pod, rule, cluster_queue, resolvable, assignment,
                            every_node=len(offered.names) >= len(state.nodes))
        holds = frozenset(state.holds) if rule == "RoomHeld" else frozenset()
        reason = self.refusals.refused(pod.uid, rule, reason, state.clock(), retry, holds)
        if retry:
            self.refusals.retries[retry] += 1
            mine = self.journal.by_pod.get(pod.key)
            if mine and mine[-1]["verb"] == "filter" and mine[-1]["outcome"] == rule:
                mine[-1]["retry"] = retry          # /debug/pods shows the answer as it was sent
            return wire.encode_filter(nodes, [], {}, {}, retry_message(reason, retry))
        if resolvable:
            return self._filter_answer(nodes, [], b"[]", failed=dict.fromkeys(offered.names, reason))
        return self._refuse_all(nodes, offered, reason)

    def _passed(self, pod: PodInfo) -> None:
        self.refusals.passed(pod.uid, self.state.clock())
        self.state.tried(pod.uid, refused=False)

    def _refused(self, pod: PodInfo, r: Refuse, nodes: dict | None, offered: OfferedNodes, queue: str) -> bytes:
        """A core refusal after the verdict admitted: journaled and answered (no node passes)."""
        self._journal(FilterRecord(pod=pod.key, outcome=r.rule, reason=r.reason, queue=queue))
        return self._refuse(pod, r.rule, r.reason, nodes, offered)

    # ---- filter ------------------------------------------------------------
    def filter(self, raw: bytes) -> bytes:
        obj, offered, nodes = self._offer(raw)
        state = self.state
        state.expire_reservations()
        state.forget_stale_learned()          # before the pod is looked up: it may be one of them, learned anew
        pod = self._pod(obj)
        self.refusals.asked(pod.uid, state.clock())
        stale = freshness.refusal(state, pod)
        if stale:
            self._journal(FilterRecord(pod=pod.key, outcome=freshness.SOURCE_STALE, reason=stale, resolvable=False))
            return self._refuse(pod, freshness.SOURCE_STALE, stale, nodes, offered)
        if pod.queue_name and pod.uid not in state.admitted and pod.uid not in state.holds:
            gate = self._ready_gate(pod)
            if gate:
                self._journal(FilterRecord(pod=pod.key, outcome="PodsReadyGate", reason=gate, resolvable=False))
                return self._refuse(pod, "PodsReadyGate", gate, nodes, offered)
        if group_of(pod) and pod.queue_name:
            return self._filter_member(pod, offered, nodes)
        held = state.holds.get(pod.uid)
        waiting = reclaim.victims_left(state, held)
        if waiting:
            return self._refuse(pod, "WaitingForVictims", waiting, nodes, offered)
        charge = state.admitted.get(pod.uid)

        def has_nodes(flavor: str) -> bool:
            return offered.has_nodes(state, flavor)

        if charge is not None:   # already bound by Quotient: only its flavors' nodes
            verdict = Verdict("AlreadyAdmitted", True, cluster_queue=charge.cluster_queue)
            flavors = charge.flavors
        else:
            state.drop_reservation(pod.uid)
            known = state.blocked.lookup(state, pod, has_nodes)
            if known is not None:          # one of its shape ahead of it was refused, and nothing has freed since
                return self._refuse_behind(pod, known, nodes, offered)
            verdict = decide(state, pod, has_nodes)
            flavors = verdict.assignment.flavors if verdict.assignment else {}
        if not verdict.managed:
            passing, encoded = offered.on_offer(state, frozenset())
            self.offered.remember(encoded, passing)
            return self._filter_answer(nodes, passing, encoded)
        if not verdict.admit and may_reclaim(verdict):
            unseen = self._unseen(pod)
            if unseen:
                reason = f"{verdict.reason}; no preemption: {unseen}; only pods the API shows may cause evictions"
                self._journal(FilterRecord(pod=pod.key, outcome=POD_NOT_SEEN, reason=reason,
                                           queue=verdict.cluster_queue, resolvable=False, offered=len(offered.names)))
                return self._refuse(pod, POD_NOT_SEEN, reason, nodes, offered, verdict.cluster_queue)
            started = self._reclaim(pod, verdict)
            if started:
                self._journal(FilterRecord(pod=pod.key, outcome="Preempting", reason=started,
                                           queue=verdict.cluster_queue, resolvable=False, offered=len(offered.names),
                                           tried=list(verdict.assignment.reasons)))
                return self._refuse(pod, "Preempting", started, nodes, offered)
            state.blocked.remember(state, pod, verdict, has_nodes, reclaim_tried=True)
        elif not verdict.admit:
            state.blocked.remember(state, pod, verdict, has_nodes)
        if not verdict.admit:
            self._journal(FilterRecord(pod=pod.key, outcome=verdict.rule, reason=verdict.reason,
                                       queue=verdict.cluster_queue, resolvable=verdict.resolvable,
                                       offered=len(offered.names),
                                       tried=list(verdict.assignment.reasons) if verdict.assignment else []))
            return self._refuse(pod, verdict.rule, verdict.reason, nodes, offered, verdict.cluster_queue,
                                verdict.resolvable, verdict.assignment)
        kept = self._flavor_nodes(pod, frozenset(flavors.values()), offered)
        if isinstance(kept, Refuse):
            return self._refused(pod, kept, nodes, offered, verdict.cluster_queue)
        passing, encoded = kept
        if charge is None:
            charge = filtering.reservation(state, verdict)
            if isinstance(charge, Refuse):
                return self._refused(pod, charge, nodes, offered, verdict.cluster_queue)
            state.reserve(pod.uid, charge, self._reservation_timeout(pod))
        self._journal(FilterRecord(pod=pod.key, outcome=verdict.rule, reason="", queue=verdict.cluster_queue,
                                   flavors=dict(flavors), offered=len(offered.names), nodes=len(passing),
                                   outside_flavor=len(offered.names) - len(passing),
                                   borrowing=bool(verdict.assignment and verdict.assignment.borrowing),
                                   tried=list(verdict.assignment.reasons) if verdict.assignment else []))
        # Nodes outside the pod's flavors are dropped without a reason: kube-scheduler treats them
        # as unresolvable and only ever shows reasons when no node is left, which is not the case here.
        self._passed(pod)
        self.offered.remember(encoded, passing)
        return self._filter_answer(nodes, passing, encoded)

    def _refuse_behind(self, pod: PodInfo, known, nodes: dict | None, offered: OfferedNodes) -> bytes:
        """A refusal that stands for a pod of the same shape at or ahead of this one (state.blocked): answered
        as it was decided, preemption included (none was found then), naming the pod it was decided for."""
        v = known.verdict
        reason = v.reason if known.pod == pod.key else (
            f"{v.reason} (as decided for {known.pod}, of the same requests and priority and ahead of this pod in "
            f"ClusterQueue {v.cluster_queue}; nothing has freed quota in its cohort since)")
        self._journal(FilterRecord(pod=pod.key, outcome=v.rule, reason=reason, queue=v.cluster_queue,
                                   resolvable=v.resolvable, offered=len(offered.names),
                                   tried=list(v.assignment.reasons) if v.assignment else []))
        return self._refuse(pod, v.rule, reason, nodes, offered, v.cluster_queue, v.resolvable, v.assignment)

    def _flavor_nodes(self, pod: PodInfo, flavors: frozenset, offered: OfferedNodes) -> tuple[list, bytes] | Refuse:
        """The offered nodes of the pod's flavors it may take (core.filtering.nodes_for), and their JSON."""
        passing, encoded = offered.on_offer(self.state, flavors)
        kept = filtering.nodes_for(self.state, pod, flavors, passing, len(offered.names))
        if isinstance(kept, Refuse):
            return kept
        return (passing, encoded) if kept is passing else (kept, orjson.dumps(kept))

    def _ready_gate(self, pod: PodInfo) -> str:
        """waitForPodsReady at admission (core.next_in_line.admission_gate), after forgetting the requeues of a
        controller the pod's new owner replaced."""
        self.state.forget_stale_requeue(pod)
        return next_in_line.admission_gate(self.state, pod)

    def _filter_member(self, pod: PodInfo, offered: OfferedNodes, nodes: dict | None) -> bytes:
        """A pod group member (core.gang_admission): the group is admitted whole, every member with a node
        of its own held at once, or none is; a member then passes only onto its held node."""
        state, key = self.state, group_of(pod)

        def refuse(r: Refuse) -> bytes:
            self._journal(FilterRecord(pod=pod.key, outcome=r.rule, reason=r.reason, queue=r.cluster_queue,
                                       group=str(key)))
            return self._refuse(pod, r.rule, r.reason, nodes, offered, r.cluster_queue or None)

        def passes(node: str) -> bytes:
            self._passed(pod)
            return self._filter_answer(nodes, [node], orjson.dumps([node]))

        if pod.node_name:          # already bound: its own node only, the group is not admitted again
            if pod.node_name in offered.names:
                return self._filter_answer(nodes, [pod.node_name], orjson.dumps([pod.node_name]))
            return refuse(Refuse("AlreadyAdmitted", f"pod {pod.key} is already bound to {pod.node_name}"))
        rec = state.job_admissions.get(pod.owner.uid) if pod.job else None
        if rec is not None and pod.uid not in state.holds:
            return self._filter_job_pod(pod, key, rec, offered, nodes)
        members = state.members(key)
        refusal = gang_admission.check_group(state, pod, key, members)
        if refusal is not None:
            if refusal.rule == gang_admission.GROUP_INCOMPLETE:
                for m in members:          # a group that lost a member before it ran holds nothing
                    if not m.node_name:
                        state.release_hold(m.uid)
                        state.drop_reservation(m.uid)
            return refuse(refusal)
        held = state.holds.get(pod.uid)
        if held is not None:
            refusal = gang_admission.held_member(state, key, members, held, offered.names)
            if refusal is not None:
                return refuse(refusal)
            self._journal(FilterRecord(pod=pod.key, outcome="GroupReserved", reason="", group=str(key), node=held.node))
            return passes(held.node)
        decision = self._admit_group(pod, key, gangs.pending_members(state, members), set(offered.names))
        if isinstance(decision, Refuse):
            return refuse(decision)
        return passes(decision.node_of(pod.uid))

    def _filter_job_pod(self, pod: PodInfo, key: WorkloadKey, rec, offered: OfferedNodes, nodes: dict | None) -> bytes:
        """A pod of a Job whose workload is admitted (state.JobAdmission): it runs in a slot the workload's
        quota keeps (in place of a pod that finished or failed), with no new quota decision, or waits."""
        state, charge = self.state, rec.charge
        _, cq = state.queue_of(pod)
        if cq is None or cq.name != charge.cluster_queue:       # its queue changed: not this workload's slot
            state.evict_job(pod.owner.uid)
            return self._filter_member(pod, offered, nodes)
        if pod.uid not in state.reservations and rec.spare < 1:
            reason = (f"{key.described} is admitted with {rec.size} pod(s), all holding their quota; this pod "
                      "runs in the place of one that finishes or fails")
            self._journal(FilterRecord(pod=pod.key, outcome="JobAtSize", reason=reason,
                                       queue=charge.cluster_queue, group=str(key)))
            return self._refuse(pod, "JobAtSize", reason, nodes, offered, charge.cluster_queue)
        kept = self._flavor_nodes(pod, frozenset(charge.flavors.values()), offered)
        if isinstance(kept, Refuse):
            return self._refused(pod, kept, nodes, offered, charge.cluster_queue)
        passing, encoded = kept
        if pod.uid not in state.reservations:
            state.reserve(pod.uid, rec.spare_charge(1), self._reservation_timeout(pod))
        self._journal(FilterRecord(pod=pod.key, outcome="JobSlot", reason="", queue=charge.cluster_queue,
                                   group=str(key), flavors=dict(charge.flavors), offered=len(offered.names),
                                   nodes=len(passing)))
        self._passed(pod)
        self.offered.remember(encoded, passing)
        return self._filter_answer(nodes, passing, encoded)

    def _admit_group(self, pod: PodInfo, key: WorkloadKey, pending: list[PodInfo],
                     on_offer: set[str]) -> Refuse | gang_admission.GroupAdmission:
        """Decide for a whole pod group (core.gang_admission.admit_group) and commit it: a hold per member,
        the victims' evictions issued. Returns the refusal for pod, or the admission it passes by."""
        state = self.state
        job = state.jobs.get(pod.owner.uid) if pod.job else None
        decision = gang_admission.admit_partially(state, key, pending, on_offer, job and job.min_parallelism)
        if isinstance(decision, Refuse):
            return decision
        victims = decision.victims
        unseen = next((u for u in (self._unseen(state.pods[h.preemptor]) for h in decision.holds) if u), "") \
            if victims else ""
        if unseen:
            return Refuse(POD_NOT_SEEN, f"{key.described} would preempt, and {unseen}; only pods the API shows may "
                          "cause evictions", decision.cluster_queue)
        if victims:
            shown = ", ".join(f"{state.pods[u].key} ({r})" for u, (r, _) in victims.items())
            self._journal(ReclaimRecord(pod=pod.key, outcome="Preempting", reason=shown,
                                        queue=decision.cluster_queue, group=str(key),
                                        reasons=sorted({r for r, _ in victims.values()}),
                                        victims={"(group)": sorted(state.pods[u].key for u in victims)},
                                        victim_queues=self._queues_of(victims)))
        evicted: set[str] = set()     # every member's hold shares the victims: none binds before all are gone
        for h in decision.holds:
            held = state.hold(h.preemptor, h.node, h.requests, h.charge, h.victims, evicted)
        if job is not None:
            size = len(decision.holds) + sum(1 for m in state.members(key) if m.uid in state.admitted)
            state.admit_job(job.uid, size, decision.holds[0].charge, partial=size < job.count)
        if victims:
            self._issue(self._evictions(pod.uid, held))
        self._journal(FilterRecord(pod=pod.key, outcome="GroupAdmitted", reason="", queue=decision.cluster_queue,
                                   group=str(key), flavors=dict(decision.assignment.flavors),
                                   placement={state.pods[h.preemptor].key: h.node for h in decision.holds}))
        return decision.answer(pod, on_offer) or decision

    # ---- prioritize ----------------------------------------------------------
    def prioritize(self, raw: bytes) -> bytes:
        """Pack: score each node 0..10 by how full it would be (core.placement.pack_scores).

        kube-scheduler sends prioritize only the nodes that passed filter, which are
        already the nodes of the pod's flavors, so they are not checked again here."""
        obj, offered, _ = self._offer(raw)
        pod = self._pod(obj)
        table = self.state.node_table
        return offered.priorities(pack_scores(table.fullness(offered.rows(table), pod.requests)))

    # ---- preemption ------------------------------------------------------------------
    def _reclaim(self, pod: PodInfo, verdict: Verdict) -> str:
        """Self-driven reclaim (core.reclaim), committed: the hold taken, the victims' evictions issued.
        Returns what filter tells the pod, or "" with the reason no preemption was found added to the
        verdict's."""
        decision = reclaim.reclaim(self.state, pod, verdict)
        if isinstance(decision, Refuse):
            verdict.reason += f"; no preemption: {decision.reason}"
            if decision.rule == reclaim.NO_PREEMPTION and not self._repeats(
                    pod, "reclaim", "NoPreemption", decision.reason, decision.cluster_queue):
                self._journal(ReclaimRecord(pod=pod.key, outcome="NoPreemption", reason=decision.reason,
                                            queue=decision.cluster_queue))
            return ""
        h, best = decision
        held = self.state.hold(h.preemptor, h.node, h.requests, h.charge, h.victims)
        self._issue(self._evictions(pod.uid, held))
        chosen = best.victims()
        shown = ", ".join(f"{m.key} ({reason})" for reason, m in chosen)
        self._journal(ReclaimRecord(pod=pod.key, outcome="Preempting", reason=shown, queue=h.charge.cluster_queue,
                                    node=best.node, victims={best.node: [m.key for _, m in chosen]},
                                    reasons=[t.reason for t in best.targets],
                                    why_not=dict(list(best.others.items())[:20]),
                                    victim_queues=self._queues_of(m.uid for _, m in chosen)))
        return f"{verdict.reason}; preempting {shown} to make room on node {best.node}"

    def preempt(self, raw: bytes) -> bytes:
        """kube-scheduler's dry run found lower-priority victims; Quotient answers with its own victim group
        per node (core.preemption.kube_preempt), keeping for the pod the quota its victims free."""
        args = wire.decode_preemption_args(raw)
        state = self.state
        pod = self._pod(args.pod)
        unseen = self._unseen(pod)
        if unseen:
            self._journal(PreemptRecord(pod=pod.key, outcome="NoPreemption", candidates=sorted(args.victims),
                                        reason=f"{unseen}; only pods the API shows may cause evictions"))
            return wire.encode_preemption({}, {})
        decision = kube_preempt.answer(state, pod, sorted(args.victims))
        if decision.passthrough:
            return wire.encode_preemption(args.victims, args.pdb_violations)
        if decision.reserve is not None:
            r = decision.reserve
            state.reserve(r.uid, r.charge, r.timeout)
        victims = [u for uids in decision.victims.values() for u in uids]
        victim_queues = self._queues_of(victims)
        state.evict_jobs_of(victims)   # kube-scheduler evicts them
        found = decision.plans
        self._journal(PreemptRecord(pod=pod.key, outcome="Preempting" if decision.victims else "NoPreemption",
                                    reason=decision.why, queue=decision.cluster_queue,
                                    candidates=sorted(args.victims),
                                    victims={p.node: [m.key for _, m in p.victims()] for p in found},
                                    reasons=sorted({t.reason for p in found for t in p.targets}),
                                    why_not=dict(list(found[0].others.items())[:20]) if found else {},
                                    victim_queues=victim_queues))
        return wire.encode_preemption(decision.victims, decision.violations)

    def _queues_of(self, victims) -> list[str]:
        """The ClusterQueues the victims are charged to, for the journal: each queue's page lists the
        preemptions it suffered, whoever evicts the victims (Quotient, or kube-scheduler after preempt)."""
        admitted = self.state.admitted
        return sorted({admitted[u].cluster_queue for u in victims if u in admitted})

    # ---- bind ------------------------------------------------------------------
    def check_binding(self, pod: PodInfo, node: str) -> tuple[Charge | None, str]:
        """The charge a binding takes, re-checked now (core.binding); (None, reason) when it must be refused.
        A reservation that does not cover node is given back before admission is decided again."""
        state = self.state
        state.expire_reservations()
        why = freshness.refusal(state, pod) or binding.room_refusal(state, pod, node)
        if why:
            return None, why
        why = binding.changed_refusal(state, pod)
        if why:              # filter decides on the pod as it is now: its group with it, all or nothing
            key = state.reservations[pod.uid].decided.group
            for m in [pod, *(state.members(key) if key else ())]:
                if not m.node_name:
                    state.release_hold(m.uid)
                    state.drop_reservation(m.uid)
            return None, why
        kept = binding.reserved_charge(state, pod, node)
        if kept is not None:
            return kept, ""
        state.drop_reservation(pod.uid)
        key = group_of(pod)
        if key and pod.queue_name:      # a member alone would break all or nothing: its group decides again
            return None, (f"{key.described}: this member holds no reservation on node {node} (its group's hold "
                          "lapsed, or its workload was evicted); it passes filter again with its group")
        gate = self._ready_gate(pod) if pod.queue_name else ""
        if gate:             # e.g. its workload timed out after filter passed it, and backs off now
            return None, gate
        return binding.charge_at_bind(state, pod, node)

    async def bind(self, raw: bytes) -> bytes:
        """Decide (check, then commit the charge: the pod is assumed bound), write the Binding, and take
        the decision back if the write was refused. One bind per pod is in flight: a second call for the same
        pod waits for the first and then decides on what it left. A write whose outcome is not known
        (OutcomeUnknown) keeps the charge until the API says (settle_bindings, the watch, a retried bind)."""
        args = wire.decode_binding_args(raw)
        state = self.state
        key = f"{args.pod_namespace}/{args.pod_name}"
        while True:
            pod = state.pod_by_key(key)
            busy = self._binding.get(pod.uid) if pod is not None else None
            if busy is None:
                break
            await busy.wait()
        if pod is None or (args.pod_uid and pod.uid != args.pod_uid):
            return wire.encode_binding(f"pod {key} (uid {args.pod_uid}) is not known to Quotient; it must "
                                       "pass filter first")
        if pod.node_name:
            if pod.node_name != args.node:
                return wire.encode_binding(f"pod {pod.key} is already bound to {pod.node_name}")
            stale = freshness.refusal_if_stale(state, "Pod")
            if stale:               # the Pod list is being read again: it may have lost that binding
                return wire.encode_binding(stale)
            if pod.uid not in state.assumed:
                return wire.encode_binding()       # the API shows it bound there
            charge = state.admitted.get(pod.uid)   # Quotient's word only: the Binding is written again, and checked
        else:
            refusal = self._unseen(pod)
            if refusal:
                refusal += "; it is bound once the watch delivers it"
            else:
                charge, refusal = self.check_binding(pod, args.node)
            if refusal:
                self._journal(BindRecord(pod=pod.key, outcome="Refused", reason=refusal))
                return wire.encode_binding(refusal)
            refusal = state.commit_binding(pod.uid, args.node, charge)
            if refusal:
                refusal = f"quota invariant: {refusal}; the pod waits until the quota is really free"
                self._journal(BindRecord(pod=pod.key, outcome="QuotaInvariant", reason=refusal))
                return wire.encode_binding(refusal)
        done = self._binding[pod.uid] = asyncio.Event()
        try:
            await self.writer.bind(pod, args.node)
        except OutcomeUnknown as e:          # it may have landed: the charge stays until the API says
            if pod.uid in state.assumed:
                self.unsettled[pod.uid] = args.node
                reason = f"{e}; Quotient keeps its quota until the API shows whether the Binding landed"
                self._journal(BindRecord(pod=pod.key, outcome="OutcomeUnknown", reason=reason, node=args.node))
                return wire.encode_binding(reason)
            if state.pods.get(pod.uid, pod).node_name != args.node:      # the watch has spoken meanwhile
                self._journal(BindRecord(pod=pod.key, outcome="WriteFailed", reason=str(e)))
                return wire.encode_binding(f"binding {pod.key} to {args.node} failed: {e}")
            log.info("binding %s to %s: the write's answer was lost, the watch shows it bound", pod.key, args.node)
        except Exception as e:      # WriteError, or anything a client library raised: the charge is taken back
            if not isinstance(e, WriteError):
                log.warning("binding %s to %s: %s: %s", pod.key, args.node, type(e).__name__, e)
            self.unsettled.pop(pod.uid, None)
            if state.undo_binding(pod.uid, args.node) or state.pods.get(pod.uid, pod).node_name != args.node:
                self._journal(BindRecord(pod=pod.key, outcome="WriteFailed", reason=str(e)))
                return wire.encode_binding(f"binding {pod.key} to {args.node} failed: {e}")
            log.info("binding %s to %s: the write's answer was lost, the watch shows it bound", pod.key, args.node)
        finally:
            del self._binding[pod.uid]
            done.set()
        self.unsettled.pop(pod.uid, None)
        self._journal(BindRecord(pod=pod.key, outcome="Bound", reason="", node=args.node,
                                 queue=charge.cluster_queue if charge else ""))
        return wire.encode_binding()

    def _unseen(self, pod: PodInfo) -> str:
        """Why a pod known only from requests (state.learned) is not taken as one that exists: the API has not
        shown it, so it may be answered but is never bound and never causes an eviction (issue 31, point 8). ""
        when a source has shown it, or the writer stands for the API itself (SnapshotWriter)."""
        if pod.uid not in self.state.learned or getattr(self.writer, "speaks_for_learned", True):
            return ""
        return (f"pod {pod.key} (uid {pod.uid}) is known only from kube-scheduler's requests: the API has not shown "
                "it to Quotient (its watch event is late, or no such pod exists)")

    def _reservation_timeout(self, pod: PodInfo) -> float | None:
        """How long filter's reservation lasts (None: reservationTimeout). A pod the API has not shown keeps one at
        most reservationTimeout from when it was first learned, however often it is asked about again: a made-up
        pod filtered over and over does not hold quota for ever (a real one is delivered by the watch meanwhile)."""
        if not self._unseen(pod):
            return None
        state = self.state
        return max(0.0, state.learned[pod.uid] + state.config.reservation_timeout - state.timer())

    async def settle_bindings(self) -> int:
        """Read back the bindings whose outcome was not known (OutcomeUnknown), until the API says whether each
        landed: bound to its node, its charge stays; not bound (or gone, or elsewhere), the charge is taken back.
        One read per binding per reconcile, all at once (each bounded by the writer's API timeout), while reads
        fail. Returns how many were taken back."""
        read, state, undone = getattr(self.writer, "bound_node", None), self.state, 0
        if read is None or not self.unsettled:
            return 0
        asked = []
        for uid, node in list(self.unsettled.items()):
            pod = state.pods.get(uid)
            if pod is None or uid not in state.assumed or pod.node_name != node:
                del self.unsettled[uid]          # the watch has spoken (or the pod is gone)
            elif uid not in self._binding:       # (a retried bind in flight writes it again and settles it)
                asked.append((pod, node))
        answers = await asyncio.gather(*(read(pod) for pod, _ in asked), return_exceptions=True)
        for (pod, node), shown in zip(asked, answers):
            if isinstance(shown, BaseException):
                log.info("binding %s to %s: still not known (%s: %s)", pod.key, node, type(shown).__name__, shown)
                continue
            if self.unsettled.get(pod.uid) != node or pod.uid in self._binding:
                continue                         # settled meanwhile
            del self.unsettled[pod.uid]
            if shown == node:
                log.info("binding %s to %s: the API shows it landed", pod.key, node)
            elif state.undo_binding(pod.uid, node):
                undone += 1
                where = "no such pod" if shown is None else f"bound to {shown}" if shown else "not bound"
                self._journal(BindRecord(pod=pod.key, outcome="WriteFailed", reason=(
                    f"binding {pod.key} to {node}: its outcome was not known; read back: {where}; "
                    "the charge is taken back")))
        return undone

    # ---- decisions nobody asks for -------------------------------------------------
    async def reconcile(self) -> int:
        """Act on what the state calls for between requests: preemptions for pending pods filter never
        sees, the evictions preemption decided, waitForPodsReady's and stopPolicy HoldAndDrain's. All of
        it is decided first, without awaiting (plan); then act/ writes it. Returns how many pods were
        evicted."""
        await self.settle_bindings()
        evicted = await self.actions.evict(self.plan())
        publish = getattr(self.writer, "publish_status", None)
        if publish is not None and self.state.timer() - self._status_at >= STATUS_INTERVAL:
            self._status_at = self.state.timer()
            await publish()          # ClusterQueue .status, rate-limited
            publish_local = getattr(self.writer, "publish_local_queue_status", None)
            if publish_local is not None:
                await publish_local()          # LocalQueue .status, likewise
        return evicted

    def plan(self) -> list[Evict]:
        """Everything a reconcile decides, at once on one consistent state: the evictions to write."""
        state = self.state
        state.expire_reservations()
        state.expire_assumed()
        self.actions.prune(state.pods)
        self._planned = []
        try:
            self.reclaim_for_heads()
            chosen = self._planned
        finally:
            self._planned = None
        evictions = chosen + self._victims_to_evict() + self._timed_out_still_running() \
            + self._pods_ready_timeouts() + self._drains()
        state.evict_jobs_of(e.pod.uid for e in evictions)     # the pods a Job makes again are a new workload
        return evictions

    def _issue(self, evictions: list[Evict]) -> None:
        """Evictions a preemption decided: written at once by act/ (a request's decision), or with the rest
        of a reconcile's plan."""
        if self._planned is not None:
            self._planned.extend(evictions)
        else:
            self.actions.submit(evictions)

    def reclaim_for_heads(self) -> int:
        """Self-driven reclaim for the head of each ClusterQueue's pending pods. When no node has room,
        kube-scheduler never calls filter, and its own dry run proposes only lower-priority victims: a
        pod that must reclaim from equal-priority pods (reclaimWithinCohort: Any, fair sharing) would
        wait for ever. Returns how many preemptions were started."""
        state, started = self.state, 0
        if freshness.stale(state):
            return 0        # no eviction is decided on a stale state
        for head in reclaim.queue_heads(state, lambda p: self._unseen(p) or self._ready_gate(p)):
            key = group_of(head)
            if key:
                pending = gangs.waiting_members(state, key, head)
                if pending:
                    decision = self._admit_group(head, key, pending, set())
                    started += getattr(decision, "rule", "") == "GroupPreempting"
                continue
            verdict = decide(state, head)
            if may_reclaim(verdict) and self._reclaim(head, verdict):
                started += 1
        return started

    def _victims_to_evict(self) -> list[Evict]:
        """The safety net for self-driven preemption: victims whose eviction failed (act/ retries it once its
        backoff has passed) or was never issued."""
        return [e for holder, held in self.state.holds.items() for e in self._evictions(holder, held)]

    def _evictions(self, holder: str, held) -> list[Evict]:
        """The victims of a preemption, still running, whose eviction is not in flight, not just written and
        not backing off: not issued yet, failed, or lost (its task cancelled, no event loop to run it). The
        decision that chose them issues them at once (act/ writes them on the event loop)."""
        state, out = self.state, []
        for uid, (reason, message) in held.victims.items():
            victim = state.pods.get(uid)
            if victim is None or victim.deleting or victim.terminal:
                continue
            if not self.actions.wanted(uid):
                continue          # in flight, just written (the watch shows it soon), or backing off
            held.evicted.add(uid)
            charge = state.admitted.get(uid)
            out.append(Evict(victim, reason, message, "reclaim", "Preempted",
                                {"queue": charge.cluster_queue if charge else "", "preemptor": holder}))
        return out

    def _pods_ready_timeouts(self) -> list[Evict]:
        """waitForPodsReady's timeouts (core.readiness.timeouts), committed: each workload's requeue is
        counted and its members' holds and reservations end before anything is written."""
        state, out = self.state, []
        for rq in readiness.timeouts(state, state.clock()):
            state.readiness.pop(rq.unit, None)
            if not rq.members:
                continue
            q = state.requeues.setdefault(rq.workload, RequeueRecord(first_created=rq.first_created,
                                                                     owner_uid=rq.owner_uid))
            q.count, q.at, q.deactivated = rq.count, rq.at, rq.deactivated
            for m in rq.members:
                state.release_hold(m.uid)
                state.drop_reservation(m.uid)
            out.extend(rq.evictions)
        self._timed_out.update((e.pod.uid, e) for e in out)
        return out

    def _timed_out_still_running(self) -> list[Evict]:
        """The safety net for waitForPodsReady: a timed-out member whose eviction failed (a PodDisruptionBudget,
        an API error) is evicted again, after act/'s backoff, until it is gone; the workload is requeued once."""
        state, out = self.state, []
        for uid, eviction in list(self._timed_out.items()):
            pod = state.pods.get(uid)
            if pod is None or pod.deleting or pod.terminal or not pod.node_name:
                del self._timed_out[uid]
                continue
            out.append(replace(eviction, pod=pod))
        return out

    def _drains(self) -> list[Evict]:
        """stopPolicy HoldAndDrain: the admitted pods of a stopped LocalQueue or ClusterQueue are evicted."""
        def stopped(pod: PodInfo, cq: str, reason: str) -> str:
            queue = f"LocalQueue {pod.namespace}/{pod.queue_name}" if reason == LOCAL_QUEUE_STOPPED \
                else f"ClusterQueue {cq}"
            return f"{queue} has stopPolicy HoldAndDrain: its admitted pods are evicted"
        return [Evict(pod, reason, stopped(pod, cq, reason), "drain", record={"queue": cq})
                for pod, cq, reason in drained(self.state)]

    # ---- refusals that cleared ---------------------------------------------------------
    def note_cleared(self) -> int:
        """Note the refusals that no longer hold in Quotient's own state (for /debug/pods and
        quotient_refusals_cleared_total): at most CLEARED_CHECKS per call, the oldest first, then the others.
        A quota or queue-order refusal is judged once per ClusterQueue and pod shape, in queue order: once one
        still stands, so do those of its shape behind it (state.blocked), so a backlog of thousands costs a few
        decisions a call. Nothing is written: a pod answered as a retry is tried again by kube-scheduler by
        itself, and no write would move a parked one (app/refusals.py). Returns how many cleared in this call."""
        state, now, cleared = self.state, self.state.clock(), 0
        state.expire_reservations()           # a hold or reservation past its time clears refusals too
        batch: dict[tuple, list] = {}
        for uid in list(itertools.islice(self.refusals, CLEARED_CHECKS)):
            r, pod = self.refusals.pop(uid), state.pods.get(uid)
            if pod is None or pod.node_name or pod.terminal or pod.deleting:
                continue                                 # bound or gone: out of the book
            self.refusals[uid] = r                       # judged again after the others
            if r.cleared_at is not None:
                continue                                 # once per refusal; filter's next answer books anew
            alike = (pod.shape, r.rule) if r.rule in REMEMBERED and not group_of(pod) else (uid,)
            batch.setdefault(alike, []).append((pod, r))
        for refused in batch.values():
            refused.sort(key=lambda pr: state.queue_key(pr[0]))
            for pod, r in refused:
                if pod.uid not in state.holds:
                    state.forget_stale_requeue(pod)      # a controller's new owner: its old requeues are gone
                cause = cleared_cause(state, pod, r.rule, r.reason, r.holds)
                if not cause:
                    break                                # it stands: so do those of its shape behind it
                r.cleared_at, r.cause = now, cause
                self.refusals.cleared[cause] += 1
                cleared += 1
        return cleared

    def reactivate(self, key: str) -> bool:
        """Clear a workload's PodsReadyTimeout record (deactivation and backoff), as an admin asks."""
        return self.state.requeues.pop(key, None) is not None
