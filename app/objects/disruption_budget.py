"""PodDisruptionBudget (policy/v1), decoded once: its selector and its minAvailable or maxUnavailable."""
from __future__ import annotations

from dataclasses import dataclass

from .selectors import Selector
from .errors import InvalidObject
from .meta import mapping, metadata, selector_field

KIND = "PodDisruptionBudget"


@dataclass(frozen=True, slots=True)
class IntOrPercent:
    value: int
    percent: bool = False

    def scaled(self, total: int) -> int:
        """The amount for total pods; a percentage rounds up, as Kubernetes does for both fields."""
        return -(-self.value * total // 100) if self.percent else self.value


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: Selector | None             # None (null) selects no pod, {} every pod of the namespace
    min_available: IntOrPercent | None = None
    max_unavailable: IntOrPercent | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, labels: dict[str, str]) -> bool:
        return self.selector is not None and self.selector.matches(labels)


def _int_or_percent(value: object, name: str, field: str) -> IntOrPercent | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return IntOrPercent(value)
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return IntOrPercent(int(value[:-1]), True)
    if isinstance(value, str) and value.isdigit():
        return IntOrPercent(int(value))
    raise InvalidObject(KIND, name, f"spec.{field} must be a non-negative integer or a percentage, got {value!r}")


def decode_pdb(obj: dict) -> PodDisruptionBudget:
    meta, name = metadata(obj, KIND)
    spec = mapping(obj.get("spec"), KIND, name, "spec")
    return PodDisruptionBudget(meta.get("namespace") or "default", name, selector_field(spec, "selector", KIND, name),
                               _int_or_percent(spec.get("minAvailable"), name, "minAvailable"),
                               _int_or_percent(spec.get("maxUnavailable"), name, "maxUnavailable"))
