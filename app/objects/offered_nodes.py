"""The nodes kube-scheduler offers a pod, and what was worked out for them (each flavor's nodes, rows in the
node table), kept with them while a list comes again: a value the scheduler reads and api/ builds and caches."""
from __future__ import annotations

import numpy as np
import orjson


class OfferedNodes:
    """One set of offered node names and what has been worked out for it."""

    def __init__(self, names: list[str]):
        self.names = names
        self._per_flavors: dict[frozenset, tuple[int, list[str], bytes]] = {}
        self._rows: tuple[int, np.ndarray] | None = None
        self.scores_template: tuple[np.ndarray, np.ndarray] | None = None   # prioritize's answer (api/offered.py)

    def on_offer(self, state, flavors: frozenset) -> tuple[list[str], bytes]:
        """The offered names in every one of the flavors, and the same as a JSON array."""
        known = self._per_flavors.get(flavors)
        if known is not None and known[0] == state.ledger.membership_generation:
            return known[1], known[2]
        names = self.names
        for flavor in sorted(flavors):
            members = state.flavor_nodes.get(flavor)
            if members is not None:
                names = list(filter(members.__contains__, names))
        encoded = orjson.dumps(names)
        self._per_flavors[flavors] = (state.ledger.membership_generation, names, encoded)
        return names, encoded

    def has_nodes(self, state, flavor: str) -> bool:
        return bool(self.on_offer(state, frozenset((flavor,)))[0])

    def rows(self, table) -> np.ndarray:
        """Each name's row in the node table (-1 for a node it does not hold)."""
        if self._rows is None or self._rows[0] != table.generation:
            self._rows = (table.generation, table.rows(self.names))
        return self._rows[1]
