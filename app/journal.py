"""Recent decisions, kept for admins: a bounded ring for /debug/decisions, the last few per pod
for /debug/pods, and listeners (metrics, logs) told of each one as it is made."""
from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, fields
from typing import Callable

Entry = dict   # {"time", "verb", "pod", "outcome", "reason", "queue", ...}: plain JSON-able values


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
        self.entries: deque[Entry] = deque(maxlen=size)
        self.per_pod = per_pod
        self.pods = pods
        self.by_pod: OrderedDict[str, deque[Entry]] = OrderedDict()
        self.listeners: list[Callable[[Entry], None]] = []

    def record(self, entry: Entry) -> None:
        self.entries.append(entry)
        key = entry["pod"]
        mine = self.by_pod.get(key)
        if mine is None:
            mine = self.by_pod[key] = deque(maxlen=self.per_pod)
            if len(self.by_pod) > self.pods:
                self.by_pod.popitem(last=False)
        else:
            self.by_pod.move_to_end(key)
        mine.append(entry)
        for listener in self.listeners:
            listener(entry)

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
