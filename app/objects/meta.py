"""Small helpers for reading object metadata and typed fields without trusting them."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

from .selectors import Selector, decode_selector
from .errors import InvalidObject


def selector_field(spec: dict, key: str, kind: str, name: str) -> Selector | None:
    """An optional metav1.LabelSelector field of spec: None when absent or null, else decoded (InvalidObject
    naming the field when it does not decode)."""
    if spec.get(key) is None:
        return None
    try:
        return decode_selector(spec[key])
    except ValueError as e:
        raise InvalidObject(kind, name, f"spec.{key}: {e}") from None


def mapping(obj: object, kind: str, name: str, field: str) -> dict:
    """Return obj if it is a dict (or {} for null), else fail naming the field."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise InvalidObject(kind, name, f"{field} must be an object, got {type(obj).__name__}")
    return obj


def listing(obj: object, kind: str, name: str, field: str) -> list:
    """Return obj if it is a list (or [] for null), else fail naming the field."""
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise InvalidObject(kind, name, f"{field} must be a list, got {type(obj).__name__}")
    return obj


def text(obj: dict, key: str, kind: str, name: str, field: str, default: str = "") -> str:
    """An optional string field: absent or null gives default, any other type is an error."""
    value = obj.get(key)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise InvalidObject(kind, name, f"{field} must be a string, got {type(value).__name__}")
    return value


def string_map(obj: object, kind: str, name: str, field: str) -> dict[str, str]:
    """Labels, annotations and nodeSelectors: str -> str, nothing else."""
    result = mapping(obj, kind, name, field)
    for k, v in result.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidObject(kind, name, f"{field} must map strings to strings ({k!r}: {v!r})")
    return result


def metadata(obj: dict, kind: str) -> tuple[dict, str]:
    """Return (metadata, name); a missing or empty name is an error."""
    if not isinstance(obj, dict):
        raise InvalidObject(kind, "?", "object must be a mapping")
    meta = mapping(obj.get("metadata"), kind, "?", "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject(kind, "?", "metadata.name is required")
    return meta, name


def parse_time(value: object) -> float | None:
    """RFC 3339 timestamp -> epoch seconds; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(epoch: float) -> str:
    """Epoch seconds -> RFC 3339, the way the API server writes it."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stable_uid(kind: str, namespace: str, name: str) -> str:
    """A deterministic UID for objects written without one (snapshots, scenarios)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"quotient:{kind}:{namespace}/{name}"))


def parse_duration(value: object, field: str = "duration") -> float:
    """Go-style duration ("30s", "5m", "1h30m", "250ms") or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{field}: {value!r} is negative")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field}: {value!r} is not a duration")
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    text, total, i = value.strip(), 0.0, 0
    while i < len(text):
        j = i
        while j < len(text) and (text[j].isdigit() or text[j] == "."):
            j += 1
        k = j
        while k < len(text) and not (text[k].isdigit() or text[k] == "."):
            k += 1
        number, unit = text[i:j], text[j:k]
        if not number or unit not in units:
            raise ValueError(f"{field}: {value!r} is not a duration like 30s, 5m or 1h")
        total += float(number) * units[unit]
        i = k
    return total
