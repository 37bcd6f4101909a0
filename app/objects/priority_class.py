"""A scheduling.k8s.io PriorityClass, decoded once at the edge into what admission and preemption read."""
from __future__ import annotations

from dataclasses import dataclass, field

from .annotations import allows_preemption
from .errors import InvalidObject
from .meta import metadata, string_map


@dataclass(slots=True)
class PriorityClassInfo:
    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"
    global_default: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    allow_preemption: bool = True       # YuniKorn's allow-preemption annotation (objects.annotations)


def decode_priority_class(obj: dict) -> PriorityClassInfo:
    meta, name = metadata(obj, "PriorityClass")
    value = obj.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidObject("PriorityClass", name, f"value must be an integer, got {value!r}")
    annotations = string_map(meta.get("annotations"), "PriorityClass", name, "metadata.annotations")
    return PriorityClassInfo(name, value, obj.get("preemptionPolicy") or "PreemptLowerPriority",
                             bool(obj.get("globalDefault")), annotations, allows_preemption(annotations))
