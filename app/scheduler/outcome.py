"""One Outcome per request: what the verb decided, journaled, booked and handed to api/ to encode, once, at its end.

A filter either passes nodes or refuses by one rule; every refusal takes the one path here (Books.close): it is
booked in app/refusals.py, which also says whether it is answered as a retry (kube-scheduler tries the pod again
after its backoff) or parks the pod. preempt names its victims per node; bind says whether the Binding was written.

What changes the answer (the refusal's words, whether it is a retry, the pod tried in its queue) is booked in the
request; what only records it (the journal and its listeners: metrics, logs; the refusal book's asked and passed)
is written after the answer (book_later), in order, with the times of the request.
"""
from __future__ import annotations

from asyncio import _get_running_loop
from dataclasses import dataclass, field

import numpy as np

from ..core.decisions import Evict
from ..core.rules import ROOM_HELD
from ..journal import Journal, Record
from ..objects.pod import PodInfo
from ..refusals import Refusals, retry_cause, retry_message
from ..state.cluster import ClusterState


@dataclass(slots=True, eq=False)
class Outcome:
    """A request's result. filter: `nodes` passed (with `encoded`, their JSON array), or a refusal (`rule`,
    `reason`); prioritize: `scores`; preempt: `victims` per node (or `passthrough`: kube-scheduler's own);
    bind: `error` ("" when bound)."""
    verb: str
    pod: PodInfo | None = None
    records: list[Record] = field(default_factory=list)     # journaled in order when the request ends
    evictions: list[Evict] | tuple = ()                      # written by act/ once the decision is complete
    nodes: list[str] | None = None
    encoded: bytes = b""
    remember: bool = False           # filter: prioritize will be sent these nodes (api's offered-node cache)
    booked: bool = False             # filter: a decision of Quotient's own passed the pod (app/refusals.py)
    rule: str = ""
    reason: str = ""
    cluster_queue: str | None = None     # what app/refusals.py judges a refusal's retry by
    resolvable: bool = False             # kube-scheduler's preemption may help (FailedNodes)
    assignment: object = None
    offered: int = 0                     # filter: how many nodes were offered
    error: str = ""                      # filter: a refusal answered as a retry; bind: the refusal
    scores: np.ndarray | None = None
    victims: dict[str, list[str]] | None = None
    violations: dict[str, int] | None = None
    passthrough: bool = False


def passed(pod: PodInfo, nodes: list[str], encoded: bytes, *records: Record, remember: bool = True,
           booked: bool = True) -> Outcome:
    """filter passes pod onto nodes."""
    return Outcome("filter", pod, list(records), nodes=nodes, encoded=encoded, remember=remember, booked=booked)


def refused(pod: PodInfo, rule: str, reason: str, *records: Record, cluster_queue: str | None = None,
            resolvable: bool = False, assignment=None) -> Outcome:
    """filter refuses pod: no node passes, by rule, for reason."""
    return Outcome("filter", pod, list(records), rule=rule, reason=reason, cluster_queue=cluster_queue,
                   resolvable=resolvable, assignment=assignment)


def book_later(journal: Journal, *step) -> None:
    """Write step (function, *args) after the request's answer: on the event loop soon after (Journal.flush), or
    before anything reads the journal; at once when no event loop runs (the simulator, a direct call)."""
    loop = _get_running_loop()
    if loop is not None and not journal.pending:
        loop.call_soon(journal.flush)
    journal.pending.append(step)
    if loop is None:
        journal.flush()


class Books:
    """The journal and the refusals' book, written once per request."""

    def __init__(self, state: ClusterState, journal: Journal, refusals: Refusals, tried):
        self.state = state
        self.journal = journal
        self.refusals = refusals
        self._tried = tried            # commit.tried: the pod was decided for, refused or not

    def record(self, record: Record) -> None:
        """A record made outside a verb's Outcome (an eviction written, a charge the API took): journaled now,
        after the pending books."""
        self.journal.record(record.entry(self.state.clock()))

    def repeats(self, pod: PodInfo, verb: str, outcome: str, reason: str, queue: str) -> bool:
        """The pod's newest decision by verb is this one already. Every reconcile looks again at each
        ClusterQueue's head that filter may never see; recording its unchanged NoPreemption each time
        filled the journal with copies (0.5 KB a cycle on a steady cluster, until the ring was full,
        pushing every other decision out of it: issue 16, point 12). Recorded again once it changed."""
        for entry in reversed(self.journal.by_pod.get(pod.key, ())):
            if entry["verb"] == verb:
                return entry["outcome"] == outcome and entry["reason"] == reason and entry.get("queue") == queue
        return False

    def close(self, out: Outcome) -> Outcome:
        """Journal the outcome's records; for filter, book the refusal or the pass. A refusal that clears by
        itself soon is answered as an error (`error`), so kube-scheduler tries the pod again after its backoff
        instead of parking it (app/refusals.py); any other parks it, with FailedNodes when kube-scheduler's
        preemption may help. A pod refused again for the rule it was refused for last is answered in the same
        words (Refusals.book). The journal's records and a pass's notes in the refusal book are written after
        the answer (book_later), with the times taken here."""
        journal, clock = self.journal, self.state.clock
        for record in out.records:
            book_later(journal, journal.write, record, clock())
        if out.verb != "filter":
            return out
        state, pod, now = self.state, out.pod, clock()
        if out.nodes is not None:
            book_later(journal, self.refusals.asked, pod.uid, now)
            if out.booked:
                book_later(journal, self.refusals.passed, pod.uid, now)
                self._tried(pod.uid, refused=False)
            return out
        self.refusals.asked(pod.uid, now)       # before book: a cleared refusal is noted retried, then replaced
        self._tried(pod.uid, refused=True)
        retry = retry_cause(state, pod, out.rule, out.cluster_queue, out.resolvable, out.assignment,
                            every_node=out.offered >= len(state.nodes))
        holds = frozenset(state.holds) if out.rule == ROOM_HELD else frozenset()
        out.reason = self.refusals.book(pod.uid, out.rule, out.reason, now, retry, holds)
        if retry:
            self.refusals.retries[retry] += 1
            book_later(journal, journal.mark_retry, pod.key, out.rule, retry)
            out.error = retry_message(out.reason, retry)
        return out
