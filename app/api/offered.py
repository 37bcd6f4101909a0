"""The node list kube-scheduler sends with each pod, recognised when it comes again.

kube-scheduler offers every pod the nodes that passed its own filters: in a
large cluster the same few thousand names, in a different order each time.
Decoding them into Python strings and checking each against a flavor costs more
than everything else filter does, so a compact body's NodeNames array is
fingerprinted over its raw bytes, in numpy and independently of order, and what
was computed for that set of names (the nodes of each flavor, their answer
bytes, their rows in the node table) is reused while the flavors' node
membership is unchanged. Were two different sets ever to share a fingerprint,
bind still checks the chosen node against the flavor by name.
Bodies that are not compact kube-scheduler JSON take the ordinary path.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import orjson


MARKER = b',"NodeNames":['
CAPACITY = 32                       # node lists remembered (a few per scheduler profile is typical)
MAX_SEGMENT = 1 << 19               # bytes of NodeNames fingerprinted (about 35,000 names); longer: ordinary path
_BASE = 0x9E3779B97F4A7C15          # odd, so invertible modulo 2**64


def _powers(base: int, count: int) -> np.ndarray:
    """base**0 .. base**(count-1) modulo 2**64."""
    out = np.empty(count, dtype=np.uint64)
    out[0] = 1
    done = 1
    with np.errstate(over="ignore"):
        while done < count:
            step = min(done, count - done)
            out[done:done + step] = out[:step] * (out[done - 1] * np.uint64(base))
            done += step
    return out


_POW = _powers(_BASE, MAX_SEGMENT + 1)
_INV = _powers(pow(_BASE, -1, 2**64), MAX_SEGMENT + 1)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, so the per-name values are summed after a non-linear step."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def fingerprint(segment: bytes) -> tuple[int, int, int] | None:
    """An order-independent fingerprint of a JSON array of plain strings; None when it is not one.

    Each name's polynomial hash is read off one prefix sum over the whole segment
    ((H[end] - H[start]) / BASE**start, modulo 2**64), mixed, and the mixes summed."""
    n = len(segment)
    if n < 2 or n > MAX_SEGMENT or segment[0] != 91 or segment[-1] != 93 or segment.find(b"\\") >= 0:
        return None
    arr = np.frombuffer(segment, dtype=np.uint8)
    quotes = np.flatnonzero(arr == 34)
    if len(quotes) == 0:
        return (0, 0, 0) if n == 2 else None
    if len(quotes) % 2:
        return None
    starts, ends = quotes[0::2] + 1, quotes[1::2]
    with np.errstate(over="ignore"):
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(arr * _POW[:n], out=prefix[1:])     # uint8 * uint64 -> uint64
        per_name = (prefix[ends] - prefix[starts]) * _INV[starts] + (ends - starts).astype(np.uint64)
        return len(starts), int((ends - starts).sum()), int(_mix(per_name).sum(dtype=np.uint64))


class OfferedNodes:
    """One set of offered node names and what has been worked out for it."""

    def __init__(self, names: list[str]):
        self.names = names
        self._per_flavors: dict[frozenset, tuple[int, list[str], bytes]] = {}
        self._rows: tuple[int, np.ndarray] | None = None
        self._scores_template: tuple[np.ndarray, np.ndarray] | None = None

    def on_offer(self, state, flavors: frozenset) -> tuple[list[str], bytes]:
        """The offered names in every one of the flavors, and the same as a JSON array."""
        known = self._per_flavors.get(flavors)
        if known is not None and known[0] == state.membership_generation:
            return known[1], known[2]
        names = self.names
        for flavor in sorted(flavors):
            members = state.flavor_nodes.get(flavor)
            if members is not None:
                names = list(filter(members.__contains__, names))
        encoded = orjson.dumps(names)
        self._per_flavors[flavors] = (state.membership_generation, names, encoded)
        return names, encoded

    def has_nodes(self, state, flavor: str) -> bool:
        return bool(self.on_offer(state, frozenset((flavor,)))[0])

    def rows(self, table) -> np.ndarray:
        """Each name's row in the node table (-1 for a node it does not hold)."""
        if self._rows is None or self._rows[0] != table.generation:
            self._rows = (table.generation, table.rows(self.names))
        return self._rows[1]


    def priorities(self, scores: np.ndarray) -> bytes:
        """HostPriorityList for these names, [{"Host": name, "Score": n}, ...], filled in by numpy.

        Every score takes two characters, padded with a space (valid JSON whitespace),
        so the answer is one template with the digits written into fixed places."""
        if self._scores_template is None:
            parts, slots, at = [b"["], [], 1
            for i, name in enumerate(self.names):
                head = (b"," if i else b"") + b'{"Host":' + orjson.dumps(name) + b',"Score":'
                slots.append(at + len(head))
                parts += [head, b"  }"]
                at += len(head) + 3
            parts.append(b"]")
            self._scores_template = (np.frombuffer(b"".join(parts), dtype=np.uint8),
                                     np.array(slots, dtype=np.intp))
        template, slots = self._scores_template
        out = template.copy()
        tens, ones = np.divmod(scores.astype(np.uint8), np.uint8(10))
        out[slots] = np.where(tens > 0, tens + 48, 32)
        out[slots + 1] = ones + 48
        return out.tobytes()


class OfferedNodeCache:
    """Remembers the last CAPACITY node lists by fingerprint, and the lists filter answered by their bytes.

    kube-scheduler sends prioritize exactly the NodeNames filter answered, in the same
    order, so those come back byte for byte and are found without a fingerprint."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self.entries: OrderedDict[tuple, OfferedNodes] = OrderedDict()
        self.answered: OrderedDict[bytes, OfferedNodes] = OrderedDict()
        self._answered_sizes: set[int] = set()     # hashing 60 kB is not free: compare sizes first
        self.hits = self.misses = 0

    def remember(self, encoded: bytes, names: list[str]) -> None:
        """Note a NodeNames answer, so the prioritize request that follows it is recognised."""
        if encoded not in self.answered:
            self.answered[encoded] = OfferedNodes(names)
            if len(self.answered) > self.capacity:
                self.answered.popitem(last=False)
            self._answered_sizes = {len(b) for b in self.answered}

    def split(self, raw: bytes) -> tuple[dict, OfferedNodes] | None:
        """(decoded body without NodeNames, the offered nodes) for a compact kube-scheduler body, else None.

        NodeNames is the last field kube-scheduler writes, and a JSON string cannot hold an
        unescaped quote, so the last `,"NodeNames":[` of a body ending in `]}` starts it."""
        at = raw.rfind(MARKER)
        if at < 0 or not raw.endswith(b"]}"):
            return None
        segment = raw[at + len(MARKER) - 1:-1]
        try:
            body = orjson.loads(raw[:at] + b"}")
        except orjson.JSONDecodeError:
            return None
        if not isinstance(body, dict):
            return None
        entry = self.answered.get(segment) if len(segment) in self._answered_sizes else None
        if entry is not None:
            self.hits += 1
            return body, entry
        key = fingerprint(segment)
        if key is None:
            return None
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
            self.hits += 1
            return body, entry
        try:
            names = orjson.loads(segment)
            "".join(names)
        except (orjson.JSONDecodeError, TypeError):
            return None      # not what it looked like: the ordinary path decodes it and says what is wrong
        entry = self.entries[key] = OfferedNodes(names)
        self.misses += 1
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)
        return body, entry
