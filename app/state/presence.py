"""Which pending pods kube-scheduler brings now: each pod's attempts and when it is due, and per ClusterQueue the
pods present now in queue order, kept as time passes rather than found by walking the whole queue.

kube-scheduler v1.36 tries a new pod at once and a refused one again after its backoff, 1 s doubling with each
attempt up to 10 s (podInitialBackoff, podMaxBackoff). A pod is present from when it is due until it is tried,
for OVERDUE at most: kube-scheduler's activeQ may hold it behind a burst of thousands, and it is away until it
is tried. A pending pod with no attempt noted (its binding undone, say) is present. Queues.away says it of
one pod; Queues.present_pending walks the present pods of a queue in order, at a cost that follows how
many are present, not how many wait (issue 32: a decision walked hundreds of entries, most of them away).
"""
from __future__ import annotations

import bisect
import heapq
from typing import Callable, Iterator

MAX_BACKOFF = 10.0     # kube-scheduler's podMaxBackoffSeconds (its podInitialBackoffSeconds: 1)
OVERDUE = 1.0          # a pod not tried this long after it was due (or new) is away until it is


def remove_entry(items: list[tuple], entry: tuple) -> None:
    """Take entry out of a sorted list of queue entries, if it is there."""
    i = bisect.bisect_left(items, entry)
    if i < len(items) and items[i] == entry:
        items.pop(i)


class Presence:
    def __init__(self, timer: Callable[[], float], entry_of: Callable[[str], tuple | None]):
        self.timer = timer
        self._entry_of = entry_of                      # uid -> (ClusterQueue, pending entry, ...) or None
        self.tries: dict[str, tuple[int, float]] = {}  # pending pod uid -> (attempts, when it is due)
        self._arrivals: list[tuple[float, str]] = []   # (due, uid), stale ones skipped
        self._leavings: list[tuple[float, str]] = []   # (due + OVERDUE, uid), stale ones skipped
        # ClusterQueue -> shape (core.gangs.walk_shape) -> its present pods' entries, in order: a walk passes over
        # a shape it has set aside without stepping through its pods (walk)
        self._present: dict[str, dict[object, list[tuple]]] = {}
        self._where: dict[str, tuple[str, object, tuple]] = {}  # uid -> (ClusterQueue, shape, entry) while present
        self._changes = 0                              # counts the changes to _present: a walk resumes where it was

    # ---- what kube-scheduler did -------------------------------------------------
    def expect(self, uid: str, due: float, attempts: int = 0) -> None:
        """The pod is due at `due` (now for a new pod, after its backoff for one just refused)."""
        self._advance()              # (here too: the heaps stay as short as what is due, read or not)
        self.tries[uid] = (attempts, due)
        self._leave(uid)
        heapq.heappush(self._arrivals, (due, uid))

    def tried(self, uid: str, refused: bool) -> None:
        attempts = self.tries.get(uid, (0, 0.0))[0] + 1
        backoff = min(MAX_BACKOFF, 2.0 ** min(attempts - 1, 8)) if refused else 0.0
        self.expect(uid, self.timer() + backoff, attempts)

    def forget(self, uid: str) -> None:
        """Bound, finished or gone; or gated (scheduler.ungate brings it every pass: present while gated)."""
        self.tries.pop(uid, None)
        self._leave(uid)

    # ---- the pending index ----------------------------------------------------------
    def indexed(self, uid: str) -> None:
        """The pod took its place in its queue (ClusterState._index_pending)."""
        if self.away(uid):
            return
        found = self.tries.get(uid)
        if found is not None and found[1] > self.timer() - OVERDUE:
            heapq.heappush(self._leavings, (found[1] + OVERDUE, uid))
        self._join(uid)

    def unindexed(self, uid: str) -> None:
        self._leave(uid)

    def reset_index(self) -> None:
        """The pending index is built anew (ClusterState._rebuild): every pod is indexed again."""
        self._present.clear()
        self._where.clear()
        self._changes += 1

    # ---- reading ---------------------------------------------------------------------
    def away(self, uid: str) -> bool:
        found = self.tries.get(uid)
        if found is None:
            return False
        now = self.timer()
        return now < found[1] or now > found[1] + OVERDUE

    def expected(self, uid: str) -> bool:
        """kube-scheduler brings the pod now or once its backoff ends: never tried, or not yet OVERDUE past when it
        was due (one parked by kube-scheduler, or no longer in its queue, is not)."""
        found = self.tries.get(uid)
        return found is None or self.timer() <= found[1] + OVERDUE

    def walk(self, cq_name: str, last: tuple, skip: set) -> Iterator[tuple]:
        """The present pods' entries of the ClusterQueue up to `last`, in queue order, as of now, but those of a
        shape in `skip`: a shape the caller adds to it after an entry of that shape is left at once, so a walk
        that passes over shapes costs the entries it takes (and log of the shapes), not every pod behind them."""
        self._advance()
        by_shape = self._present.get(cq_name)
        if not by_shape:
            return
        if len(by_shape) == 1:          # one shape present (a backlog of alike pods): its list, in order
            yield from self._walk_one(by_shape, next(iter(by_shape)), last, skip)
            return
        changes = self._changes
        heap = [(items[0], shape, 0, changes) for shape, items in by_shape.items() if items and items[0] <= last]
        heapq.heapify(heap)                 # (entries hold the uid: no two compare equal, shapes never compared)
        while heap:
            entry, shape, i, seen = heap[0]
            if shape in skip:
                heapq.heappop(heap)
                continue
            yield entry
            items = by_shape.get(shape, ())
            # the next entry of the shape: the one after, unless the lists changed since its place was taken
            changes = self._changes
            i = i + 1 if seen == changes else bisect.bisect_right(items, entry)
            if i < len(items) and items[i] <= last:
                heapq.heapreplace(heap, (items[i], shape, i, changes))
            else:
                heapq.heappop(heap)

    def _walk_one(self, by_shape: dict, shape: object, last: tuple, skip: set) -> Iterator[tuple]:
        """walk for one shape: its entries up to `last`, until the caller puts the shape in `skip`."""
        items = by_shape[shape]
        i, n = 0, len(items)
        while i < n:
            entry = items[i]
            if entry > last or shape in skip:
                return
            changes = self._changes
            yield entry
            if changes == self._changes:
                i += 1
            else:                        # the list changed meanwhile: the next entry is found again
                items = by_shape.get(shape, ())
                i, n = bisect.bisect_right(items, entry), len(items)

    # ---- inside ----------------------------------------------------------------------
    def _advance(self) -> None:
        now = self.timer()
        arrivals, leavings, tries = self._arrivals, self._leavings, self.tries
        while arrivals and arrivals[0][0] <= now:
            due, uid = heapq.heappop(arrivals)
            found = tries.get(uid)
            if found is not None and found[1] == due and now <= due + OVERDUE:
                heapq.heappush(leavings, (due + OVERDUE, uid))
                self._join(uid)
        while leavings and leavings[0][0] < now:
            until, uid = heapq.heappop(leavings)
            found = tries.get(uid)
            if found is not None and found[1] + OVERDUE == until:
                self._leave(uid)

    def _join(self, uid: str) -> None:
        if uid in self._where:
            return
        found = self._entry_of(uid)
        if found is None:
            return
        cq_name, entry, shape = found[0], found[1], found[2]
        bisect.insort(self._present.setdefault(cq_name, {}).setdefault(shape, []), entry)
        self._changes += 1
        self._where[uid] = (cq_name, shape, entry)

    def _leave(self, uid: str) -> None:
        found = self._where.pop(uid, None)
        if found is None:
            return
        cq_name, shape, entry = found
        self._changes += 1
        by_shape = self._present.get(cq_name, {})
        items = by_shape.get(shape, [])
        remove_entry(items, entry)
        if not items:
            by_shape.pop(shape, None)
