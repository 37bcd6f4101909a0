"""Per-node allocatable and requested amounts as numpy columns, for scoring thousands of nodes at once.

ClusterState keeps the per-node dicts as the truth; this table mirrors them so
that prioritize can score 5,000 nodes in one vectorised pass instead of a
Python loop per node.
"""
from __future__ import annotations

from itertools import repeat

import numpy as np


class NodeTable:
    def __init__(self, capacity: int = 1024):
        self.index: dict[str, int] = {}
        self._free: list[int] = []
        self._size = 0
        self._capacity = capacity
        self.allocatable: dict[str, np.ndarray] = {}
        self.requested: dict[str, np.ndarray] = {}
        self.generation = 0     # bumps when a name gets or loses its row

    def _column(self, table: dict[str, np.ndarray], resource: str) -> np.ndarray:
        col = table.get(resource)
        if col is None:
            col = table[resource] = np.zeros(self._capacity, dtype=np.float64)
        return col

    def _grow(self) -> None:
        self._capacity *= 2
        for table in (self.allocatable, self.requested):
            for r, col in table.items():
                bigger = np.zeros(self._capacity, dtype=np.float64)
                bigger[: len(col)] = col
                table[r] = bigger

    def set_node(self, name: str, allocatable: dict[str, int]) -> None:
        i = self.index.get(name)
        if i is None:
            if self._free:
                i = self._free.pop()
            else:
                if self._size == self._capacity:
                    self._grow()
                i, self._size = self._size, self._size + 1
            self.index[name] = i
            self.generation += 1
        for col in self.allocatable.values():
            col[i] = 0
        for r, v in allocatable.items():
            self._column(self.allocatable, r)[i] = v

    def remove_node(self, name: str) -> None:
        i = self.index.pop(name, None)
        if i is not None:
            self.generation += 1
            for table in (self.allocatable, self.requested):
                for col in table.values():
                    col[i] = 0
            self._free.append(i)

    def add_requested(self, name: str, requests: dict[str, int], sign: int = 1) -> None:
        i = self.index.get(name)
        if i is None:
            return
        for r, v in requests.items():
            self._column(self.requested, r)[i] += sign * v

    def rows(self, names: list[str]) -> np.ndarray:
        """Each name's row (-1 for a node the table does not hold)."""
        return np.fromiter(map(self.index.get, names, repeat(-1)), dtype=np.intp, count=len(names))

    def fullness(self, idx: np.ndarray, requests: dict[str, int]) -> np.ndarray:
        """For each row: the fraction of its fullest requested resource after adding requests (-1: unknown)."""
        fullest = np.zeros(len(idx), dtype=np.float64)
        for r, amount in requests.items():
            if r == "pods" or not amount or r not in self.allocatable:
                continue
            alloc = self.allocatable[r][idx]
            used = self.requested[r][idx] if r in self.requested else 0.0
            with np.errstate(divide="ignore", invalid="ignore"):
                frac = np.where(alloc > 0, (used + amount) / alloc, 0.0)
            np.maximum(fullest, frac, out=fullest)
        fullest[idx < 0] = -1.0
        return fullest
