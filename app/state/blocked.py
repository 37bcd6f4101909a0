"""What blocks each ClusterQueue: a quota refusal remembered per pod shape until something frees quota.

kube-scheduler asks about every pending pod again after its backoff, so a backlog of thousands is asked
about hundreds of times a second, and deciding each from scratch walks its queue and its cohort (issue 32).
Two pods of one shape (PodInfo.shape) in one ClusterQueue fit, or do not, alike, and the later one in queue
order never sooner: so once a pod is refused for quota or queue order, every pod of its shape behind it is
refused for the same reason, for as long as not enough has freed quota in its cohort tree since:

- no ClusterQueue of the tree plans with less usage than then (a pod finished, a reservation or hold ended,
  victims chosen), or, for a pod refused for quota with one flavor to take per resource, only what it lacked
  has freed in the tree, and less of each than it lacked (core.shortfall);
- (a refusal that counted pods ahead as admitted first can clear when usage grows elsewhere and one of them
  stops fitting, freeing what it was counted for, and a cohort-order refusal when a pod arrives in another
  ClusterQueue ahead of one counted first there and leaves it no room: neither is watched, since a busy cohort's
  usage and queues move every moment, and such a refusal is decided again within MAX_AGE, like what only time
  changes);
- no pending pod of the tree left its queue other than by binding (deleted, finished, relabelled), so no
  pod ahead that was counted is gone;
- no Kueue object, namespace, class, Job, PodGroup or PodDisruptionBudget changed (policy_generation),
  nor which nodes a flavor holds (membership_generation), nor which flavors have nodes on offer;
- it is at most MAX_AGE old: what only time changes (a preemption delay running out) and what
  BestEffortFIFO gives a pod behind when one ahead stops fitting are seen within that.

Only refusals are remembered; an admission is always decided anew on the state as it is, so nothing here
can admit a pod beyond quota. A refusal answered from here costs a few dictionary lookups, whatever the
length of the queue.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.rules import (BORROWING_LEVEL_ORDER, FAIR_SHARING_ORDER, NOMINAL_QUOTA_FIRST, QUOTA_EXCEEDED, STRICT_FIFO,
                          STRICT_FIFO_RESERVATION)

from ..core.workload import group_of
from ..objects.offered_nodes import OfferedNodes

REMEMBERED = frozenset({QUOTA_EXCEEDED, STRICT_FIFO, NOMINAL_QUOTA_FIRST, BORROWING_LEVEL_ORDER,
                        FAIR_SHARING_ORDER, STRICT_FIFO_RESERVATION})
MAX_AGE = 1.0          # seconds on state.timer
MAX_REMEMBERED = 10_000


@dataclass(slots=True)
class Blocked:
    """One remembered refusal: the pod it was decided for, where it stood, and what it was decided on."""
    place: tuple               # the refused pod's queue key (ClusterState.queue_key)
    pod: str                   # its namespace/name, named in the answers given from here
    verdict: object            # core.admission.Verdict, reason included
    usage: list                # (ClusterQueue node of the decisions' tree, its usage then) for the cohort tree
    left: int                  # the tree's pending pods gone unadmitted then (ClusterState.pending_left)
    policy: tuple              # (policy_generation, membership_generation, the decisions' tree) then
    at: float                  # state.timer then
    reclaim_tried: bool        # the verdict allowed preemption and none was found
    short: dict | None = None  # what the refused pod lacked per (flavor, resource) (core.shortfall)


def _tree_queues(state, cq_name: str) -> list:
    """The ClusterQueue nodes of cq_name's cohort tree in the decisions' tree (itself alone without a cohort)."""
    node = state.ledger.quota_node(cq_name)
    if node is None:
        return []
    stack, out = [node.root()], []
    while stack:
        current = stack.pop()
        if current.is_cohort:
            stack.extend(current.children)
        else:
            out.append(current)
    return out


class BlockedQueues:
    """(ClusterQueue, pod shape, flavors with nodes on offer) -> Blocked."""

    def __init__(self):
        self._by: dict[tuple, Blocked] = {}
        self.hits = 0
        self.misses = 0

    def _key(self, state, pod, offered: OfferedNodes | None) -> tuple | None:
        _, cq = state.store.queue_of(pod)
        if cq is None or pod.uid in state.holds:
            return None
        on_offer = tuple(offered.has_nodes(state, f.name) if offered is not None else True
                         for g in cq.resource_groups for f in g.flavors)
        return cq.name, pod.shape, on_offer

    def _policy(self, state) -> tuple:
        return state.policy_generation, state.ledger.membership_generation, id(state.ledger.quota_tree())

    def lookup(self, state, pod, offered: OfferedNodes | None = None) -> Blocked | None:
        """The refusal that still stands for pod (one of its shape at or ahead of its place, with nothing
        freed since), or None: then it is decided anew."""
        key = self._key(state, pod, offered)
        found = self._by.get(key) if key is not None else None
        if found is None:
            return None
        if not self._holds(state, found, key[0]):
            del self._by[key]
            self.misses += 1
            return None
        if state.queues.queue_key(pod) < found.place:
            self.misses += 1
            return None
        self.hits += 1
        return found

    def _holds(self, state, b: Blocked, cq_name: str) -> bool:
        if state.timer() - b.at > MAX_AGE or self._policy(state) != b.policy:     # (_policy brings the tree up to date)
            return False
        queues = _tree_queues(state, cq_name)
        if sum(state.queues.pending_left[q.name] for q in queues) != b.left:
            return False
        freed: dict = {}
        for node, then in b.usage:
            usage = node.usage
            for fr, v in then.items():
                now = usage.get(fr, 0)
                if now < v:
                    freed[fr] = freed.get(fr, 0) + v - now
        if not freed:
            return True
        short = b.short         # a quota refusal stands while only what it lacked has freed, less of each
        return short is not None and all(fr in short and v < short[fr] for fr, v in freed.items())

    def remember(self, state, pod, verdict, offered: OfferedNodes | None = None,
                 reclaim_tried: bool = False) -> None:
        """Keep a refusal decided for pod, for the pods of its shape behind it (REMEMBERED rules only; a pod
        of a group or holding room is never answered from here)."""
        if verdict.admit or not verdict.managed or verdict.rule not in REMEMBERED or group_of(pod):
            return
        key = self._key(state, pod, offered)
        if key is None or key[0] != verdict.cluster_queue:
            return
        place = state.queues.queue_key(pod)
        if verdict.holds_from is not None and verdict.holds_from < place:
            place = verdict.holds_from      # a pod of its shape ahead was refused on the same walk (queue_ahead)
        old = self._by.get(key)
        if old is not None and old.place < place and self._holds(state, old, key[0]):
            return          # one ahead of it stands already, and covers more
        if len(self._by) >= MAX_REMEMBERED:
            self._by.clear()         # shapes long gone: starting afresh costs one decision per shape
        queues = _tree_queues(state, key[0])
        self._by[key] = Blocked(place, pod.key, verdict, [(q, dict(q.usage)) for q in queues],
                                sum(state.queues.pending_left[q.name] for q in queues), self._policy(state),
                                state.timer(), reclaim_tried, verdict.short)

    def forget(self) -> None:
        self._by.clear()

    def __len__(self) -> int:
        return len(self._by)
