"""The state's long-lived objects out of the cyclic collector's sight."""
from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect, then freeze what survives: the tens of thousands of objects a snapshot or an initial list
    leaves (pods, nodes, the quota tree) would otherwise be rescanned by every full collection on the
    request path, a cost per request that grows with the backlog (issue 19). Objects made later are
    collected as usual; frozen ones are still freed by reference counting when dropped."""
    gc.collect()
    gc.freeze()
