"""What every verb and the reconcile work through: the state, the writer, commit, the books, and what they
ask of a pod (learned from a request, not yet shown by the API, gated by waitForPodsReady)."""
from __future__ import annotations

import asyncio

from ..act.intents import Actions
from ..act.writer import Writer
from ..core import next_in_line
from ..core.decisions import Evict
from ..core.rules import CLUSTER_QUEUE_OVER_QUOTA
from ..journal import ChargeRecord, Journal
from ..objects.errors import InvalidObject
from ..objects.pod import PodInfo, decode_pod
from ..refusals import Refusals
from ..state.cluster import ClusterState
from .commit import Commit
from .gates import Gates
from .outcome import Books
from .request import InvalidRequest


class Context:
    """The state, the writer and act/'s actions, commit, the books, the binds in flight, and the questions the
    verbs ask of a pod; each verb and the reconcile takes one (the Scheduler is one)."""

    def __init__(self, state: ClusterState, writer: Writer, journal: Journal | None = None):
        self.state = state
        self.writer = writer
        self.journal = journal or Journal()
        self.refusals = Refusals()
        self.actions = Actions(lambda: self.writer, lambda r: self.books.record(r), state.timer)
        self.commit = Commit(state, self.actions, self.journal)
        self.books = Books(state, self.journal, self.refusals, self.commit.tried)
        self.binding: dict[str, asyncio.Event] = {}     # pod uid -> set when its bind in flight ends
        self.unsettled: dict[str, str] = {}           # pod uid -> node: a Binding whose outcome is not known yet
        self.timed_out: dict[str, Evict] = {}         # waitForPodsReady's evictions, until the pod goes
        self.status_at = float("-inf")               # on state.timer: the first reconcile publishes status
        self.gates = Gates()                         # Kueue's admission gates being removed (scheduler.ungate)
        state.ledger.on_overrun = lambda o: self.books.record(ChargeRecord(
            pod=o.pod, outcome=CLUSTER_QUEUE_OVER_QUOTA, queue=o.cluster_queue, reason=f"{o.reason}; the API took this change, "
            f"which an extender cannot refuse: ClusterQueue {o.cluster_queue} admits no pod until it is back within quota"))

    def pod_of(self, obj: dict) -> PodInfo:
        """The state's record of a pod, learning it from the request when new."""
        meta = obj.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        state = self.state
        if uid and isinstance(uid, str):
            known = state.pods.get(uid)
            if known is not None:
                return known
        try:
            pod = decode_pod(obj)
        except InvalidObject as e:
            raise InvalidRequest(f'"Pod": {e}') from None
        known = state.pods.get(pod.uid)
        if known is not None:
            return known
        self.commit.learn(pod)
        return pod

    def unseen(self, pod: PodInfo) -> str:
        """Why a pod known only from requests (state.learned) is not taken as one that exists: the API has not
        shown it, so it may be answered but is never bound and never causes an eviction (issue 31, point 8). ""
        when a source has shown it, or the writer stands for the API itself (SnapshotWriter)."""
        if pod.uid not in self.state.learned or getattr(self.writer, "speaks_for_learned", True):
            return ""
        return (f"pod {pod.key} (uid {pod.uid}) is known only from kube-scheduler's requests: the API has not shown "
                "it to Quotient (its watch event is late, or no such pod exists)")

    def reservation_timeout(self, pod: PodInfo) -> float | None:
        """How long filter's reservation lasts (None: reservationTimeout). A pod the API has not shown keeps one at
        most reservationTimeout from when it was first learned, however often it is asked about again: a made-up
        pod filtered over and over does not hold quota for ever (a real one is delivered by the watch meanwhile)."""
        if not self.unseen(pod):
            return None
        state = self.state
        return max(0.0, state.learned[pod.uid] + state.config.reservation_timeout - state.timer())

    def ready_gate(self, pod: PodInfo) -> str:
        """waitForPodsReady at admission (core.next_in_line.admission_gate), after forgetting the requeues of a
        controller the pod's new owner replaced."""
        self.commit.forget_stale_requeue(pod)
        return next_in_line.admission_gate(self.state, pod)

    def queues_of(self, victims) -> list[str]:
        """The ClusterQueues the victims are charged to, for the journal: each queue's page lists the
        preemptions it suffered, whoever evicts the victims (Quotient, or kube-scheduler after preempt)."""
        admitted = self.state.admitted
        return sorted({admitted[u].cluster_queue for u in victims if u in admitted})
