"""The coscheduling PodGroup (scheduling.x-k8s.io), decoded once: the size of its group, minMember."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidObject
from .meta import mapping, metadata

KIND = "PodGroup"


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int | None          # None: absent (the group's size is unknown)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def decode_pod_group(obj: dict) -> PodGroup:
    meta, name = metadata(obj, KIND)
    spec = mapping(obj.get("spec"), KIND, name, "spec")
    raw = spec.get("minMember")
    if isinstance(raw, str) and raw.isdigit():
        raw = int(raw)
    if raw is not None and (not isinstance(raw, int) or isinstance(raw, bool) or raw < 0):
        raise InvalidObject(KIND, name, f"spec.minMember must be a non-negative integer, got {raw!r}")
    return PodGroup(meta.get("namespace") or "default", name, raw or None)
