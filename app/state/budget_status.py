"""PodDisruptionBudgets with running figures: per budget, the pods it covers (bound, not finished) and
which of them are healthy, kept as pods change, so a preemption decision reads them instead of matching
every pod against every budget."""
from __future__ import annotations

from ..objects.disruption_budget import PodDisruptionBudget
from ..objects.pod import PodInfo


def _healthy(pod: PodInfo) -> bool:
    return pod.ready or pod.phase == "Running"


def _counted(pdb: PodDisruptionBudget, pod: PodInfo) -> bool:
    return pod.namespace == pdb.namespace and bool(pod.node_name) and not pod.terminal and pdb.covers(pod.labels)


class Budgets:
    def __init__(self):
        self.budgets: dict[str, PodDisruptionBudget] = {}
        self.covered: dict[str, dict[str, bool]] = {}          # budget key -> pod uid -> healthy
        self._by_namespace: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self.budgets)

    def upsert(self, pdb: PodDisruptionBudget, pods) -> None:
        """Add or replace a budget, counting the pods it covers among pods (every pod Quotient knows)."""
        self.budgets[pdb.key] = pdb
        self._by_namespace.setdefault(pdb.namespace, set()).add(pdb.key)
        self.covered[pdb.key] = {p.uid: _healthy(p) for p in pods if _counted(pdb, p)}

    def remove(self, key: str) -> None:
        pdb = self.budgets.pop(key, None)
        self.covered.pop(key, None)
        if pdb is not None:
            keys = self._by_namespace.get(pdb.namespace, set())
            keys.discard(key)
            if not keys:
                self._by_namespace.pop(pdb.namespace, None)

    def pod_changed(self, pod: PodInfo) -> None:
        """A pod was added or changed: count it under the budgets of its namespace that cover it now."""
        for key in self._by_namespace.get(pod.namespace, ()):
            covered = self.covered[key]
            if _counted(self.budgets[key], pod):
                covered[pod.uid] = _healthy(pod)
            else:
                covered.pop(pod.uid, None)

    def pod_removed(self, pod: PodInfo) -> None:
        for key in self._by_namespace.get(pod.namespace, ()):
            self.covered[key].pop(pod.uid, None)

    def figures(self):
        """(budget, the uids it covers, how many of them are healthy) for every budget."""
        for key, pdb in self.budgets.items():
            covered = self.covered[key]
            yield pdb, covered.keys(), sum(covered.values())
