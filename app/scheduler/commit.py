"""The one place that applies core's decisions to the state and hands their writes to act/.

The verbs and the reconcile decide (core/) and then commit here: reservations, preemption holds, a Job's
workload admitted or evicted, bindings assumed and undone, waitForPodsReady's requeues, and the evictions act/
writes. Nothing else in the scheduler changes ClusterState.
"""
from __future__ import annotations

from typing import Callable

from ..act.intents import Actions
from ..core.decisions import Evict, Hold, Requeue
from ..core.flavors import Charge
from ..core.rules import PREEMPTED
from ..core.workload import RequeueRecord
from ..journal import Journal
from ..objects.offered_nodes import OfferedNodes
from ..objects.pod import PodInfo
from ..state.cluster import ClusterState
from .outcome import book_later


class Commit:
    def __init__(self, state: ClusterState, actions: Actions, journal: Journal):
        self.state = state
        self.actions = actions
        self.journal = journal
        # f(pod, charge, at, in_job): a pod's reservation taken at `at` (state.clock), in_job: a slot of its Job's
        # admitted workload; told after the request's answer (observe.metrics counts Kueue's reserved workloads)
        self.on_reserved: list[Callable[[PodInfo, Charge, float, bool], None]] = []
        # f(pod, charge, at, started): a pod Quotient binds charged at `at`, started: its Job's admitted workload
        # had a pod bound already; told after the request's answer (observe.metrics counts admitted workloads)
        self.on_admitted: list[Callable[[PodInfo, Charge, float, bool], None]] = []

    # ---- housekeeping before a decision ----------------------------------------------
    def expire(self) -> None:
        """Reservations and holds past their time end."""
        self.state.expire_lapsed()

    def expire_assumed(self) -> None:
        """Assumed bindings the API has sent an unbinding for, past ASSUMED_TTL: its word is taken."""
        self.state.bindings.expire_assumed()

    def forget_stale_learned(self) -> None:
        self.state.learned_pods.forget_stale_learned()

    def forget_stale_requeue(self, pod: PodInfo) -> None:
        """A controller's new owner: the requeues of the one it replaced are gone."""
        self.state.pods_ready.forget_stale_requeue(pod)

    def learn(self, pod: PodInfo) -> None:
        """A pod known from kube-scheduler's request only, until a source shows it."""
        self.state.learned_pods.learn_pod(pod)

    def tried(self, uid: str, refused: bool) -> None:
        self.state.queues.tried(uid, refused=refused)

    # ---- quota kept for a pod ------------------------------------------------------------
    def reserve(self, uid: str, charge: Charge, timeout: float | None = None, gate: bool = False) -> None:
        self.state.workloads.reserve(uid, charge, timeout, gate)
        self._reserved(uid, charge)

    def _reserved(self, uid: str, charge: Charge) -> None:
        state = self.state
        pod = state.pods.get(uid)
        if pod is not None and self.on_reserved:
            at, in_job = state.clock(), self._job_admission(pod) is not None
            for listener in self.on_reserved:
                book_later(self.journal, listener, pod, charge, at, in_job)

    def _job_admission(self, pod: PodInfo):
        """The admitted workload of the pod's Job (state.job_admissions), None for a pod of no admitted Job."""
        return self.state.job_admissions.get(pod.owner.uid) if pod.job and pod.owner is not None else None

    def admitted_at_gate(self, uid: str) -> None:
        """The pod's reservation (a preemption hold's) is its admission from now on: its gate is being removed, and
        filter places it on that quota without deciding again (state.workloads.admitted_at_gate)."""
        r = self.state.reservations.get(uid)
        if r is not None:
            r.gate = True

    def drop_reservation(self, uid: str) -> None:
        self.state.workloads.drop_reservation(uid)

    def release(self, members: list[PodInfo]) -> None:
        """Each member's hold and reservation end."""
        for m in members:
            self.state.workloads.release_hold(m.uid)
            self.state.workloads.drop_reservation(m.uid)

    def remember_refused(self, pod: PodInfo, verdict, offered: OfferedNodes, reclaim_tried: bool = False) -> None:
        """The refusal stands for pods of the pod's shape behind it (state.blocked), until something frees."""
        state = self.state
        state.blocked.remember(state, pod, verdict, offered, reclaim_tried=reclaim_tried)

    # ---- preemption and workloads ------------------------------------------------------
    def hold(self, h: Hold, evicted: set[str] | None = None):
        """The room and quota the victims free, kept for the preemptor (members of a group share evicted)."""
        held = self.state.workloads.hold_for_preemptor(h.preemptor, h.node, h.requests, h.charge, h.victims, evicted)
        if h.charge is not None:
            self._reserved(h.preemptor, h.charge)
        return held

    def victims_of(self, holder: str, held) -> list[Evict]:
        """The victims of a preemption, still running, whose eviction is not in flight, not just written and
        not backing off: not issued yet, failed, or lost (its task cancelled, no event loop to run it); each is
        marked issued. The decision that chose them issues them at once (act/ writes them on the event loop)."""
        state, out = self.state, []
        for uid, (reason, message) in held.victims.items():
            victim = state.pods.get(uid)
            if victim is None or victim.deleting or victim.terminal:
                continue
            if not self.actions.wanted(uid):
                continue          # in flight, just written (the watch shows it soon), or backing off
            held.evicted.add(uid)
            charge = state.admitted.get(uid)
            out.append(Evict(victim, reason, message, "reclaim", PREEMPTED,
                             {"queue": charge.cluster_queue if charge else "", "preemptor": holder}))
        return out

    def admit_job(self, job_uid: str, size: int, charge: Charge, partial: bool) -> None:
        self.state.job_workloads.admit_job(job_uid, size, charge, partial=partial)

    def evict_job(self, job_uid: str) -> None:
        self.state.job_workloads.end_admission(job_uid)

    def evict_jobs_of(self, uids) -> None:
        """The pods a Job makes again in the place of these are a new workload."""
        self.state.job_workloads.end_admissions_of(uids)

    def requeue(self, rq: Requeue) -> None:
        """waitForPodsReady's timeout: the workload's requeue counted, its members' holds and reservations
        ended (its evictions are the caller's to write)."""
        state = self.state
        state.readiness.pop(rq.unit, None)
        if not rq.members:
            return
        q = state.requeues.setdefault(rq.workload, RequeueRecord(first_created=rq.first_created,
                                                                           owner_uid=rq.owner_uid))
        q.count, q.at, q.deactivated = rq.count, rq.at, rq.deactivated
        self.release(list(rq.members))

    def reactivate(self, key: str) -> bool:
        """A workload's PodsReadyTimeout record (deactivation and backoff) cleared, as an admin asks."""
        return self.state.requeues.pop(key, None) is not None

    # ---- bindings ----------------------------------------------------------------------
    def bind(self, uid: str, node: str, charge: Charge | None) -> str:
        """The pod assumed bound, its charge taken; a reason when the quota invariant refuses it."""
        state = self.state
        pod = state.pods.get(uid) if charge is not None and self.on_admitted else None
        if pod is not None:          # what the listeners are told is as it was before the charge
            at, job = state.clock(), self._job_admission(pod)
            started = job is not None and job.started
        refused = state.bindings.commit(uid, node, charge)
        if pod is not None and not refused:
            for listener in self.on_admitted:
                book_later(self.journal, listener, pod, charge, at, started)
        return refused

    def unbind(self, uid: str, node: str) -> bool:
        """A Binding that was not written: its charge taken back."""
        return self.state.bindings.undo(uid, node)

    # ---- writes ----------------------------------------------------------------------------
    def submit(self, evictions: list[Evict]) -> None:
        """A request's evictions, written now by act/ (its answer does not wait for them)."""
        if evictions:
            self.actions.submit(evictions)

    async def evict(self, evictions: list[Evict]) -> int:
        """A reconcile's evictions, written by act/; how many pods were evicted."""
        return await self.actions.evict(evictions)
