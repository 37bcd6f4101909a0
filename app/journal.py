"""Recent decisions, kept for admins: a bounded ring for /debug/decisions, the last few per pod
for /debug/pods, and listeners (metrics, logs) told of each one as it is written.

A request's books (its records, what the refusal book and the workload metrics note of it) are written after its
answer: the request appends them to `pending`, in order, and `flush` writes them soon after on the event loop,
or before anything reads the journal, so every reader sees them as if they had been written in the request."""
from __future__ import annotations

import logging
from collections import OrderedDict, deque
from dataclasses import dataclass, fields
from typing import Callable

Entry = dict   # {"time", "verb", "pod", "outcome", "reason", "queue", ...}: plain JSON-able values
log = logging.getLogger("quotient.journal")


_OPTIONAL: dict[type, tuple[str, ...]] = {}


def _optional(cls: type) -> tuple[str, ...]:
    """The fields of a record type past pod, outcome and reason (verb aside), in order: worked out once."""
    names = _OPTIONAL.get(cls)
    if names is None:
        names = _OPTIONAL[cls] = tuple(f.name for f in fields(cls)[3:] if f.name != "verb")
    return names


@dataclass(slots=True, kw_only=True)
class Record:
    """One decision about one pod (namespace/name); entry() is its journal form, unset fields left out."""
    pod: str
    outcome: str
    reason: str = ""
    queue: str | None = None

    verb = ""

    def entry(self, time: float) -> Entry:
        out: Entry = {"time": time, "verb": self.verb, "pod": self.pod, "outcome": self.outcome, "reason": self.reason}
        for name in _optional(type(self)):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(slots=True, kw_only=True)
class FilterRecord(Record):
    """filter: the pod passed (outcome: the admission rule) or why not; the nodes offered and kept."""
    verb = "filter"
    resolvable: bool | None = None          # kube-scheduler's preemption may help
    offered: int | None = None
    nodes: int | None = None
    outside_flavor: int | None = None
    flavors: dict | None = None
    borrowing: bool | None = None
    tried: list | None = None               # the flavor assigner's reasons per flavor tried
    group: str | None = None
    node: str | None = None
    placement: dict | None = None           # a pod group's members -> nodes


@dataclass(slots=True, kw_only=True)
class PreemptRecord(Record):
    """preempt: kube-scheduler's proposed nodes and the victims Quotient's rules allow on each."""
    verb = "preempt"
    candidates: list | None = None
    victims: dict | None = None
    reasons: list | None = None
    why_not: dict | None = None
    victim_queues: list | None = None       # the ClusterQueues the victims are charged to


@dataclass(slots=True, kw_only=True)
class ReclaimRecord(Record):
    """reclaim: victims Quotient chose itself (for a pod, or a pod group whole), or why none."""
    verb = "reclaim"
    node: str | None = None
    group: str | None = None
    victims: dict | None = None
    reasons: list | None = None
    why_not: dict | None = None
    victim_queues: list | None = None


@dataclass(slots=True, kw_only=True)
class BindRecord(Record):
    """bind: the pod bound to node, or why not."""
    verb = "bind"
    node: str | None = None


@dataclass(slots=True, kw_only=True)
class ChargeRecord(Record):
    """charge: a bound pod's change the API took (moved to another queue, resized in place) and the charge it
    made, reported when it takes the ClusterQueue above quota (core.drift)."""
    verb = "charge"


@dataclass(slots=True, kw_only=True)
class EvictionRecord(Record):
    """An eviction written (or failed): verb is the decision it came from (reclaim, ready, drain)."""
    verb: str
    reasons: list | None = None
    preemptor: str | None = None
    workload: str | None = None
    requeues: int | None = None
    deactivated: bool | None = None


class Journal:
    def __init__(self, size: int = 1000, per_pod: int = 8, pods: int = 10000):
        self._entries: deque[Entry] = deque(maxlen=size)
        self.per_pod = per_pod
        self.pods = pods
        self._by_pod: OrderedDict[str, deque[Entry]] = OrderedDict()
        self.listeners: list[Callable[[Entry], None]] = []
        self.pending: list[tuple] = []      # (function, *args): books a request wrote after its answer, in order
        self._flushing = False

    @property
    def entries(self) -> deque[Entry]:
        """The ring of recent entries, oldest first (the pending books written first)."""
        self.flush()
        return self._entries

    @property
    def by_pod(self) -> OrderedDict[str, deque[Entry]]:
        """namespace/name -> its last entries, oldest first (the pending books written first)."""
        self.flush()
        return self._by_pod

    def flush(self) -> None:
        """Write the pending books, in the order the requests closed them. A reader calls this first; a listener
        that reads the journal while it runs sees it as it was when the entry was made, as it always did."""
        if self._flushing or not self.pending:
            return
        self._flushing = True
        pending = self.pending
        i = 0
        try:
            while i < len(pending):          # a step may add more
                fn, *args = pending[i]
                i += 1
                try:
                    fn(*args)
                except Exception:    # the answer is out: a failing book is logged, the others still written
                    log.exception("a book written after its request's answer failed")
        finally:
            del pending[:i]                  # only what was written: a step added meanwhile, or left by an
            self._flushing = False           # interrupt, waits for the next flush, never written twice

    def record(self, entry: Entry) -> None:
        if self.pending and not self._flushing:
            self.flush()
        self._entries.append(entry)
        key = entry["pod"]
        by_pod = self._by_pod
        mine = by_pod.get(key)
        if mine is None:
            mine = by_pod[key] = deque(maxlen=self.per_pod)
            if len(by_pod) > self.pods:
                by_pod.popitem(last=False)
        else:
            by_pod.move_to_end(key)
        mine.append(entry)
        for listener in self.listeners:
            listener(entry)

    def write(self, record: Record, time: float) -> None:
        """A pending book: record, as decided at time."""
        self.record(record.entry(time))

    def mark_retry(self, pod: str, rule: str, retry: str) -> None:
        """A pending book: the pod's last entry, its filter refusal by rule, was answered as a retry (/debug/pods
        shows the answer as it was sent)."""
        mine = self._by_pod.get(pod)
        if mine and mine[-1]["verb"] == "filter" and mine[-1]["outcome"] == rule:
            mine[-1]["retry"] = retry

    def recent(self, limit: int, queue: str | None = None, pod: str | None = None) -> list[Entry]:
        """Newest first, at most `limit` (clamped to what the ring holds), optionally for one queue or pod."""
        out = []
        for entry in reversed(self.entries):
            if (queue is None or entry.get("queue") == queue) and (pod is None or entry["pod"] == pod):
                out.append(entry)
                if len(out) >= limit:
                    break
        return out

    def of_pod(self, key: str) -> list[Entry]:
        """The last decisions about one pod (namespace/name), newest first."""
        return list(reversed(self.by_pod.get(key, ())))
