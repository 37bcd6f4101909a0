"""The pods holding quota, indexed by ClusterQueue, and what a watched change of one of them tells the ledger."""
from __future__ import annotations

from ..core.flavors import Charge


class Admissions(dict):
    """uid -> Charge of the pods holding quota, also indexed by ClusterQueue: preemption looks at
    one queue's pods at a time and must not walk every pod of a 50,000-pod cluster to find them."""

    def __init__(self):
        super().__init__()
        self.by_queue: dict[str, set[str]] = {}

    def __setitem__(self, uid: str, charge: Charge) -> None:
        old = self.get(uid)
        if old is not None:
            self.by_queue[old.cluster_queue].discard(uid)
        super().__setitem__(uid, charge)
        self.by_queue.setdefault(charge.cluster_queue, set()).add(uid)

    def __delitem__(self, uid: str) -> None:
        charge = self[uid]
        super().__delitem__(uid)
        self.by_queue[charge.cluster_queue].discard(uid)

    def pop(self, uid: str, *default):
        if uid in self:
            charge = self[uid]
            del self[uid]
            return charge
        if default:
            return default[0]
        raise KeyError(uid)

    def clear(self) -> None:
        super().clear()
        self.by_queue = {}


def change_of(previous: Charge | None, charge: Charge, observed: bool) -> str:
    """What the watch shows of a bound pod that may take its ClusterQueue above quota ("" for nothing that grows
    a charge): bound by another, moved to another ClusterQueue, or grown by an in-place resize."""
    if observed:
        return "was found running, bound by another than Quotient"
    if previous is None:
        return ""
    if previous.cluster_queue != charge.cluster_queue:
        return f"moved from ClusterQueue {previous.cluster_queue} (its queue label changed while bound)"
    if any(v > previous.usage.get(fr, 0) for fr, v in charge.usage.items()):
        return "was resized in place (pods/resize)"
    return ""
