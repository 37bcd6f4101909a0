"""What the reflectors applied to ClusterState, per kind, and a fresh list reconciled against it.

The store keeps, per kind, key -> (uid, resourceVersion) of every object applied through sync.dispatch (the same
door the snapshot uses), so a pod recreated under the same name with a new uid replaces the old one instead of
being counted twice, a DELETED event is applied from what is known of the key (even an object whose newest version
was invalid is removed), and a relist deletes what the new list lacks and leaves alone what did not change.
"""
from __future__ import annotations

import heapq

from ..objects.errors import InvalidObject
from ..state.cluster import ClusterState
from .dispatch import apply_object, remove_object
from .resources import Resource


def key_of(obj: dict) -> tuple[str, str, str]:
    """(key, uid, resourceVersion) of a decoded JSON object, without trusting its shape."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "", "", ""
    name, ns = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        return "", "", ""
    key = f"{ns}/{name}" if isinstance(ns, str) and ns else name
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    return key, uid if isinstance(uid, str) else "", rv if isinstance(rv, str) else ""


def older(listed: str, watched: str) -> bool:
    """The list's resourceVersion is older than the one the watch had reached (both numbers, as etcd's are;
    anything else is opaque and compared by nobody)."""
    return listed.isdigit() and watched.isdigit() and int(listed) < int(watched)


class Store:
    """kind -> key -> (uid, resourceVersion) of what is applied to state; skip(res, reason) counts an invalid
    object (the last good version of it stays)."""

    def __init__(self, state: ClusterState, resources, skip):
        self.state = state
        self.known: dict[str, dict[str, tuple[str, str]]] = {r.kind: {} for r in resources}
        self.skip = skip

    def reconcile(self, res: Resource, items: list, went_back: bool = False) -> None:
        """The state of res becomes the list. went_back: the list is older (resourceVersion) than what the
        watch showed, as from an API server restored from a backup: versions are reused, so an object
        whose version did not change may have, and every object is applied again."""
        known = self.known[res.kind]
        listed: set[str] = set()
        for obj in items:
            if not isinstance(obj, dict):
                self.skip(res, "list item is not an object")
                continue
            obj.setdefault("kind", res.kind)            # the API leaves them out of list items
            obj.setdefault("apiVersion", res.api_version)
            key, uid, rv = key_of(obj)
            if key:
                listed.add(key)
                seen = known.get(key)
                if seen is not None and seen == (uid, rv) and rv and not went_back:
                    continue                            # unchanged since we last applied it
            self.upsert(res, obj)
        for key in [k for k in known if k not in listed]:
            self.delete(res, key)

    def upsert(self, res: Resource, obj: dict) -> None:
        key, uid, rv = key_of(obj)
        known = self.known[res.kind]
        old = known.get(key)
        if old is not None and old[0] != uid:
            self.delete(res, key)                       # same name, a new object: the old one is gone
        try:
            if obj.get("kind") != res.kind:
                raise InvalidObject(res.kind, key or "?", f"kind {obj.get('kind')!r} in a {res.plural} watch")
            apply_object(self.state, obj)
        except InvalidObject as e:
            self.skip(res, f"{e.name}: {e.reason}")
            return
        if key:
            known[key] = (uid, rv)

    def delete(self, res: Resource, key: str) -> None:
        seen = self.known[res.kind].pop(key, None)
        if seen is None:
            return          # never applied (it was invalid all along): nothing to take out
        remove_object(self.state, res.kind, key, seen[0])

    def canaries(self, kind: str, count: int) -> list[tuple[str, str]]:
        """The newest objects this source applied and still holds (known), newest first, as (key,
        resourceVersion): a restore undoes every change after its backup, so when one came, these are older now,
        or gone, but for those written again since (several are read: one written again says nothing)."""
        versioned = ((int(rv), key) for key, (_, rv) in self.known[kind].items() if rv.isdigit())
        return [(key, str(rv)) for rv, key in heapq.nlargest(count, versioned)]
