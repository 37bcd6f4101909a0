"""Recent decisions, kept for admins: a bounded ring for /debug/decisions, the last few per pod
for /debug/pods, and listeners (metrics, logs) told of each one as it is made."""
from __future__ import annotations

from collections import OrderedDict, deque
from typing import Callable

Entry = dict   # {"time", "verb", "pod", "outcome", "reason", "queue", ...}: plain JSON-able values


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
