"""Whether the state is fresh enough to admit a pod by: a decision on a stale source refuses instead.

A watch can stall without an error (the connection stays open, nothing comes, not even a bookmark), and a
relist can be pending (the server refused to go on from a resourceVersion): meanwhile the state may lag the
API by any amount (a ClusterQueue's lowered quota, a deleted pod's freed CPU). The live source
(sync.watch.WatchSource) registers itself here for its ClusterState; filter and bind ask `refusal` before
admitting a pod of a queue, and the reconcile before self-driven reclaim. A state without a live source (a
snapshot, the simulator) is always fresh.
"""
from __future__ import annotations

from weakref import WeakKeyDictionary

from ..core.rules import SOURCE_STALE


_sources: WeakKeyDictionary = WeakKeyDictionary()      # ClusterState -> its WatchSource


def register(state, source) -> None:
    """source (with staleness() -> str: why it is stale, "" when fresh) now feeds state."""
    _sources[state] = source


def stale(state) -> str:
    """Why the state's source is stale ("" when fresh, or with no live source)."""
    source = _sources.get(state)
    return source.staleness() if source is not None else ""


def refusal_if_stale(state, kind: str) -> str:
    """SourceStale when kind's source is stale (a bind of a pod the state shows bound already: a restored API
    server may have lost that binding, and answering success would leave the pod Pending for good)."""
    source = _sources.get(state)
    why = source.staleness(kind) if source is not None else ""
    return f"{SOURCE_STALE}: {why}; the pod is tried again once the state is fresh" if why else ""


def refusal(state, pod) -> str:
    """Why admitting pod now must wait for a fresh source ("" when it may be decided): only a pod of a queue
    that holds no charge yet is admitted by a decision on the state."""
    if not pod.queue_name or pod.uid in state.admitted:
        return ""
    why = stale(state)
    return f"{SOURCE_STALE}: {why}; the pod is admitted once the state is fresh again" if why else ""


def _source_of(state):
    """The live source feeding state, None without one (a snapshot, or a writer given no state)."""
    return _sources.get(state) if state is not None else None


def mark(state) -> int:
    """How many watches of state's live source have broken so far (0 without one): taken when a write is decided."""
    source = _source_of(state)
    return source.breaks if source is not None else 0


def changed_since(state, taken: int) -> str:
    """Why a write decided at mark `taken` must not be sent again ("" when it may): a watch broke since, as watches
    do when the API server restarts (restored from a backup, even: the state the write was decided on may be gone,
    and a Binding sent again would pass its own preconditions), or the source is stale now. A watch the restarting
    server ends cleanly counts only once its reconnect fails (504, or the canary read): a retry inside that window
    is not caught here; the read-back version check in act.kube catches the rewrite path."""
    source = _source_of(state)
    if source is None:
        return ""
    if source.breaks != taken:
        return "a watch of the API server broke since Quotient decided (it may have restarted, from a backup even)"
    return source.staleness()
