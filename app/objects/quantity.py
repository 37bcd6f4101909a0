"""Kubernetes quantities ("36Gi", "500m", "1e3") parsed once into integers.

CPU is kept in milli-CPU, everything else in base units (bytes, counts), rounded
up like kube-scheduler's Value()/MilliValue().
"""
from __future__ import annotations

import re
import sys
from functools import lru_cache
from decimal import Decimal, ROUND_CEILING

# Anything above this is a typo or an attack, not a cluster (2**62 ~ 4.6e18).
MAX_QUANTITY = 2**62

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"),
    "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
    "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
# ASCII digits only (Python's \d also matches Arabic-Indic and other Unicode digits), and no two
# adjacent repeats that can share a digit, so a failed match backtracks in linear time.
_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")
# No real quantity is longer ("123456789.123456789e-9" is 22); a longer one is refused unread.
MAX_QUANTITY_TEXT = 64

MILLI_RESOURCES = frozenset({"cpu"})


class QuantityError(ValueError):
    """A quantity that is malformed, negative or absurdly large."""


def parse_quantity(value: object, resource: str = "") -> int:
    """Return `value` as an int: milli-units for cpu, base units otherwise."""
    if isinstance(value, str):
        return _parse_text(value, resource)     # the same few strings recur across thousands of pods
    return _parse(value, resource)


@lru_cache(maxsize=4096)
def _parse_text(value: str, resource: str) -> int:
    return _parse(value, resource)


def _parse(value: object, resource: str) -> int:
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{resource or 'quantity'}: {value!r} is not a quantity")
    if isinstance(value, (int, float)):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_QUANTITY_TEXT:
            raise QuantityError(f"{resource or 'quantity'}: {_shown(text)} is longer than "
                                f"{MAX_QUANTITY_TEXT} characters, not a Kubernetes quantity")
    else:
        raise QuantityError(f"{resource or 'quantity'}: {_shown(value)} is not a quantity")
    m = _RE.match(text)
    if not m:
        raise QuantityError(f"{resource or 'quantity'}: {value!r} is not a Kubernetes quantity")
    number, exponent, suffix = m.groups()
    try:
        amount = Decimal(number)
        amount *= Decimal(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix or ""]
        if resource in MILLI_RESOURCES:
            amount *= 1000
    except (ArithmeticError, ValueError):  # decimal.Overflow/InvalidOperation are ArithmeticErrors
        raise QuantityError(f"{resource or 'quantity'}: {value!r} is out of range") from None
    if amount < 0:
        raise QuantityError(f"{resource or 'quantity'}: {value!r} is negative")
    # Check before int(): converting a value like 1e999990 to int takes many seconds.
    if amount > MAX_QUANTITY:
        raise QuantityError(f"{resource or 'quantity'}: {value!r} is absurdly large")
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def magnitude(text: str) -> float:
    """A quantity's size as a float, for drawing it beside others (app/ui/bars.py): unbounded, unrounded,
    never raising. A Cohort's subtree quota is a sum that may pass MAX_QUANTITY where each of its queues'
    quotas does not; anything that is not a quantity, or is negative, counts as 0."""
    m = _RE.match(text.strip()) if isinstance(text, str) and len(text) <= MAX_QUANTITY_TEXT else None
    if not m:
        return 0.0
    number, exponent, suffix = m.groups()
    try:
        value = float(Decimal(number) * (Decimal(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix or ""]))
    except (ArithmeticError, ValueError, OverflowError):
        return 0.0
    return min(value, sys.float_info.max) if value > 0 else 0.0      # float() turns a huge Decimal into inf


def _shown(value: object) -> str:
    """The start of a value for an error message: a 16,000-digit quantity is not echoed whole."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:32]}...({len(text)} characters)"


def format_quantity(amount: int, resource: str) -> str:
    """Render an integer amount the way an admin would write it (cpu 1500 -> "1500m", 2000 -> "2")."""
    if resource in MILLI_RESOURCES:
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    if resource == "memory" or resource.endswith("storage"):
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def amounts(usage: dict) -> str:
    """Quota per (flavor, resource) in the words refusals use: "3 cpu of flavor default"."""
    return ", ".join(f"{format_quantity(v, r)} {r} of flavor {f}" for (f, r), v in sorted(usage.items()))
