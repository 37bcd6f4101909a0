"""The node list kube-scheduler sends with each pod, recognised when it comes again.

kube-scheduler offers every pod the nodes that passed its own filters: in a
large cluster the same few thousand names, in a different order each time.
Decoding them into Python strings and checking each against a flavor costs more
than everything else filter does, so a compact body's NodeNames array is cut
into names in numpy, over its raw bytes, and fingerprinted independently of
order; what was computed for that set of names (the nodes of each flavor, their
answer bytes, their rows in the node table) is reused while the flavors' node
membership is unchanged.

Whoever names nodes chooses the bytes hashed, so the fingerprint is keyed with
a secret drawn from the operating system's random source when the process
starts (SEED): a collision cannot be computed offline. A fingerprint is still
only 64 bits, so a hit is not trusted on its own: the names themselves, in a
canonical order, are compared with the cached list's byte for byte, and only an
equal list reuses the cached answer. A list that matches a fingerprint but not
the names is decoded in full like a new one, and counted (`collisions`, and the
state's skip counter). Nothing later would catch a wrong reuse: kube-scheduler
fails the whole scheduling attempt when filter answers a node it did not offer
("claims a filtered node ... not found in the input node list"), so bind is never
called, and an offered node wrongly left out is never seen again.
Bodies that are not compact kube-scheduler JSON take the ordinary path.
"""
from __future__ import annotations

import secrets
from collections import OrderedDict
from typing import Callable

import numpy as np
import orjson

from ..objects.offered_nodes import OfferedNodes
from .wire import MAX_NODES


MARKER = b',"NodeNames":['
CAPACITY = 32                       # node lists remembered (a few per scheduler profile is typical)
SMALL_SEGMENT = 4096                # bytes of NodeNames (about 200 names) kept by their bytes, unscanned
SMALL_CAPACITY = 1024               # such lists: every rotation of a few lists
SET_SEGMENT = 1024                  # bytes of NodeNames (about 70 names) keyed by their set of names, not scanned:
                                    # decoding them costs less than numpy's fixed cost per call
MAX_SEGMENT = 1 << 19               # bytes of NodeNames fingerprinted (about 35,000 names); longer: ordinary path
MAX_NAME = 253                      # a Node's name is a DNS subdomain; a longer one is no node: ordinary path
WORDS = (MAX_NAME + 1 + 7) // 8     # 64-bit words that hold the longest name and its closing quote
MAX_PADDING = 4                     # names as whole words may take this many times the segment's bytes, no more
COLLISION = ("cached node list not reused: a NodeNames list shared its fingerprint with a different one "
             "and was decoded in full (harmless when rare; frequent ones mean node names are chosen to "
             "collide, which only slows filter down)")
_KEPT = np.array([[(1 << 8 * min(max(n + 1 - 8 * w, 0), 8)) - 1 for n in range(MAX_NAME + 1)]
                  for w in range(WORDS)], dtype=np.uint64)    # [word][name length]: the bytes of the word kept


def new_seed() -> np.ndarray:
    """Secret keys from the operating system's random source: for each word position in a name,
    one to xor and one (odd) to multiply with."""
    seed = np.frombuffer(secrets.token_bytes(16 * WORDS), dtype=np.uint64).reshape(2, WORDS).copy()
    seed[1] |= np.uint64(1)
    return seed


SEED = new_seed()                   # per process: node names cannot be chosen to collide without it


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, so each name's keyed words are mixed non-linearly before the list sums them."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class NameList:
    """A NodeNames segment cut into names: word w of every name in row w of `words` (little-endian,
    the name's closing quote and zeros after it), so a name's column holds it and nothing else. A name
    holds no quote, so two columns are equal exactly when their names are."""

    __slots__ = ("words", "per_name", "key")

    def __init__(self, words: np.ndarray, per_name: np.ndarray, key: tuple[int, int, int]):
        self.words, self.per_name, self.key = words, per_name, key

    def canonical(self) -> bytes:
        """The columns in order of their keyed hash (ties by position): equal bytes exactly when the
        lists hold the same names, whatever order kube-scheduler sent them in."""
        n = len(self.per_name)
        if n == 0:
            return b""
        low = np.uint64((1 << n.bit_length()) - 1)
        order = np.sort((self.per_name & ~low) | np.arange(n, dtype=np.uint64)) & low
        return self.words.take(order.astype(np.intp), axis=1).tobytes()


def scan(segment: bytes) -> NameList | None:
    """The names of a compact JSON array of plain strings (`["a","b"]`), keyed with SEED; None when it is
    not one, or when its names would not be cheap to handle as words (the ordinary path takes it)."""
    size = len(segment)
    if size < 2 or size > MAX_SEGMENT or segment[0] != 91 or segment[-1] != 93 or segment.find(b"\\") >= 0:
        return None
    if size == 2:
        return NameList(np.zeros((1, 0), dtype=np.uint64), np.zeros(0, dtype=np.uint64), (0, 0, 0))
    arr = np.frombuffer(segment, dtype=np.uint8)
    quotes = np.flatnonzero(arr == 34)
    if len(quotes) % 2 or len(quotes) == 0 or quotes[0] != 1 or quotes[-1] != size - 2:
        return None
    starts, ends = quotes[0::2] + 1, quotes[1::2]
    if (starts[1:] - ends[:-1] != 3).any() or (arr[ends[:-1] + 1] != 44).any():
        return None                                       # something other than `","` between two names
    lengths = ends - starts
    longest = int(lengths.max())
    width = longest // 8 + 1                              # words per name: the longest and its quote
    if longest > MAX_NAME or len(starts) * width * 8 > MAX_PADDING * size:
        return None
    return _keyed(segment, starts, lengths, width)


def _keyed(segment: bytes, starts: np.ndarray, lengths: np.ndarray, width: int) -> NameList:
    """The names as words (read through overlapping windows over the segment, the bytes after each
    closing quote zeroed), their keyed hashes, and the list's key: (names, characters, sum of the hashes)."""
    padded = segment + bytes(8 * width)
    windows = np.ndarray((len(segment),), dtype=f"V{8 * width}", buffer=padded, strides=(1,))
    words = np.ascontiguousarray(windows[starts].view("<u8").reshape(len(starts), width).T)   # little-endian
    with np.errstate(over="ignore"):
        summed = np.zeros(len(starts), dtype=np.uint64)
        for w in range(width):
            words[w] &= _KEPT[w].take(lengths)
            summed += (words[w] ^ SEED[0, w]) * SEED[1, w]
        per_name = _mix(summed)
        total = per_name.sum(dtype=np.uint64)
    return NameList(words, per_name, (len(starts), int(lengths.sum()), int(total)))


def fingerprint(segment: bytes) -> tuple[int, int, int] | None:
    """An order-independent fingerprint of a JSON array of plain strings, keyed with SEED; None when it
    is not one. Two lists with one fingerprint may still differ: compare NameList.canonical()."""
    names = scan(segment)
    return names.key if names is not None else None


def encode_priorities(offered: OfferedNodes, scores: np.ndarray) -> bytes:
    """HostPriorityList for the offered names, [{"Host": name, "Score": n}, ...], filled in by numpy.

    Every score takes two characters, padded with a space (valid JSON whitespace),
    so the answer is one template with the digits written into fixed places."""
    if offered.scores_template is None:
        parts, slots, at = [b"["], [], 1
        for i, name in enumerate(offered.names):
            head = (b"," if i else b"") + b'{"Host":' + orjson.dumps(name) + b',"Score":'
            slots.append(at + len(head))
            parts += [head, b"  }"]
            at += len(head) + 3
        parts.append(b"]")
        offered.scores_template = (np.frombuffer(b"".join(parts), dtype=np.uint8),
                                   np.array(slots, dtype=np.intp))
    template, slots = offered.scores_template
    out = template.copy()
    tens, ones = np.divmod(scores.astype(np.uint8), np.uint8(10))
    out[slots] = np.where(tens > 0, tens + 48, 32)
    out[slots + 1] = ones + 48
    return out.tobytes()


class OfferedNodeCache:
    """Remembers the last CAPACITY node lists by fingerprint, and the lists filter answered by their bytes.

    kube-scheduler sends prioritize exactly the NodeNames filter answered, in the same
    order, so those come back byte for byte and are found without a fingerprint (a
    dictionary keyed by the bytes compares them whole: no collision there)."""

    def __init__(self, capacity: int = CAPACITY, skip: Callable[[str], None] | None = None):
        self.capacity = capacity
        self.entries: OrderedDict[tuple, tuple[bytes, OfferedNodes]] = OrderedDict()   # key -> (canonical, nodes)
        self.answered: OrderedDict[bytes, OfferedNodes] = OrderedDict()
        self.small: dict[bytes, OfferedNodes] = {}     # short lists by their bytes: no scan (SMALL_SEGMENT)
        self.sets: OrderedDict[frozenset, OfferedNodes] = OrderedDict()   # short lists by their names (SET_SEGMENT)
        self._answered_sizes: set[int] = set()     # hashing 60 kB is not free: compare sizes first
        self.hits = self.misses = self.collisions = 0
        self._skip = skip                          # the state's skip counter: a collision is counted and logged

    def remember(self, encoded: bytes, names: list[str]) -> None:
        """Note a NodeNames answer, so the prioritize request that follows it is recognised."""
        if encoded not in self.answered:
            self.answered[encoded] = OfferedNodes(names)
            if len(self.answered) > self.capacity:
                self.answered.popitem(last=False)
            self._answered_sizes = {len(b) for b in self.answered}

    def _small(self, segment: bytes, entry: OfferedNodes) -> None:
        """Remember a short list by its bytes, in each order kube-scheduler sends it (it rotates the first node
        from one cycle to the next): found again by a dictionary lookup, which compares the bytes whole."""
        if len(segment) <= SMALL_SEGMENT:
            self.small[segment] = entry
            if len(self.small) > SMALL_CAPACITY:
                self.small.pop(next(iter(self.small)))

    def _by_set(self, body: dict, segment: bytes) -> tuple[dict, OfferedNodes] | None:
        """A short list decoded and found by its set of names (a set compares the names themselves: nothing to
        collide); kube-scheduler offers each pod the nodes with room for it, so short lists vary from pod to pod."""
        try:
            decoded = orjson.loads(segment)
            "".join(decoded)
        except (orjson.JSONDecodeError, TypeError):
            return None      # not a list of names: the ordinary path decodes it and says what is wrong
        names = frozenset(decoded)
        if len(names) != len(decoded) or max(map(len, decoded), default=0) > MAX_NAME:
            return None      # a name twice, or one no Node can have: the ordinary path answers it
        entry = self.sets.get(names)
        if entry is None:
            self.misses += 1
            entry = self.sets[names] = OfferedNodes(decoded)
            if len(self.sets) > self.capacity:
                self.sets.popitem(last=False)
        else:
            self.hits += 1
            self.sets.move_to_end(names)
        self._small(segment, entry)
        return body, entry

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
        if entry is None and len(segment) <= SMALL_SEGMENT:
            entry = self.small.get(segment)
        if entry is not None:
            self.hits += 1
            return body, entry
        if len(segment) <= SET_SEGMENT:
            return self._by_set(body, segment)
        names = scan(segment)
        if names is None:
            return None
        canonical = names.canonical()
        known = self.entries.get(names.key)
        if known is not None:
            if known[0] == canonical:
                self.entries.move_to_end(names.key)
                self.hits += 1
                self._small(segment, known[1])
                return body, known[1]
            self.collisions += 1          # same fingerprint, other names: decoded below like a new list
            if self._skip is not None:
                self._skip(COLLISION)
        try:
            decoded = orjson.loads(segment)
            "".join(decoded)
        except (orjson.JSONDecodeError, TypeError):
            return None      # not what it looked like: the ordinary path decodes it and says what is wrong
        if len(decoded) > MAX_NODES:
            return None      # more than any cluster: the ordinary path refuses it with the reason
        entry = OfferedNodes(decoded)
        self._small(segment, entry)
        self.entries[names.key] = (canonical, entry)
        self.entries.move_to_end(names.key)
        self.misses += 1
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)
        return body, entry
