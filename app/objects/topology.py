"""Kueue's Topology (kueue.x-k8s.io v1beta1 and v1beta2) and the pod-set annotations that ask for topology-aware
placement, decoded and validated as Kueue's API server and job webhooks do (apis/kueue/v1beta2/topology_types.go
CEL rules; pkg/controller/jobframework/tas_validation.go, ValidateTASPodSetRequest), so an admin's mistake is
refused with Kueue's reason rather than placed some other way."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidObject
from .meta import listing, mapping, metadata, text

HOSTNAME = "kubernetes.io/hostname"
K = "kueue.x-k8s.io/"
REQUIRED, PREFERRED, UNCONSTRAINED = (K + "podset-required-topology", K + "podset-preferred-topology",
                                      K + "podset-unconstrained-topology")
SLICE_REQUIRED, SLICE_SIZE = K + "podset-slice-required-topology", K + "podset-slice-size"
MAX_LEVELS = 16
_TRUE, _FALSE = ("1", "t", "T", "TRUE", "true", "True"), ("0", "f", "F", "FALSE", "false", "False")  # ParseBool
_INT = re.compile(r"^[+-]?[0-9]+$")         # strconv.Atoi's form
# Kueue's pattern for a level's nodeLabel (an optional DNS subdomain prefix, then a name), at most 316 characters.
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]      # node labels, the widest domain first


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's request, as its annotations say: level (required or preferred; "" when unconstrained: the
    lowest), and slices of slice_size pods each in one domain of slice_level ("" without slices)."""
    level: str = ""
    required: bool = False
    unconstrained: bool = False
    slice_level: str = ""
    slice_size: int = 1


def label_key(value: str) -> bool:
    return len(value) <= 316 and bool(_LABEL_KEY.match(value))


def decode_topology(obj: dict) -> Topology:
    """spec.levels[].nodeLabel: 1 to 16 levels, valid label keys, each once, kubernetes.io/hostname only as the
    lowest (Kueue's CEL rules, the same in v1beta1 and v1beta2)."""
    kind = "Topology"
    meta, name = metadata(obj, kind)
    spec = mapping(obj.get("spec"), kind, name, "spec")
    levels = []
    for i, level in enumerate(listing(spec.get("levels"), kind, name, "spec.levels")):
        label = text(mapping(level, kind, name, f"spec.levels[{i}]"), "nodeLabel", kind, name,
                     f"spec.levels[{i}].nodeLabel")
        if not label_key(label):
            raise InvalidObject(kind, name, f"spec.levels[{i}].nodeLabel: {label!r} is not a valid label key")
        levels.append(label)
    if not 1 <= len(levels) <= MAX_LEVELS:
        raise InvalidObject(kind, name, f"spec.levels must have 1 to {MAX_LEVELS} items, has {len(levels)}")
    if len(set(levels)) != len(levels):
        raise InvalidObject(kind, name, "spec.levels: nodeLabel must be unique")
    if HOSTNAME in levels[:-1]:
        raise InvalidObject(kind, name, f"spec.levels: {HOSTNAME} can only be used at the lowest level of topology")
    return Topology(name, tuple(levels))


def asked(annotations: dict[str, str]) -> str:
    """The topology annotations (valid or not), as a reason names them; "" when there are none, or only
    unconstrained: "false", which asks nothing."""
    keys = [k for k in (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE) if k in annotations]
    if keys == [UNCONSTRAINED] and annotations[UNCONSTRAINED] in _FALSE:
        return ""
    return ", ".join(f"{k}={annotations[k]!r}" for k in keys)


def pod_set_request(annotations: dict[str, str], count: int) -> tuple[TopologyRequest | None, str]:
    """The topology request of a pod set of count pods, from its annotations (None when it asks none), or why
    Kueue's webhook would refuse them ("" when it would not)."""
    asked = [a for a in (REQUIRED, PREFERRED, UNCONSTRAINED) if a in annotations]
    slice_level, size = annotations.get(SLICE_REQUIRED), annotations.get(SLICE_SIZE)
    if not asked and slice_level is None and size is None:
        return None, ""
    if len(asked) > 1:
        return None, f"must not contain more than one topology annotation: {', '.join(asked)}"
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in annotations and not label_key(annotations[key]):
            return None, f"annotation {key}: {annotations[key]!r} is not a valid label key"
    unconstrained = False
    if UNCONSTRAINED in asked:
        value = annotations[UNCONSTRAINED]
        if value not in _TRUE + _FALSE:
            return None, f"annotation {UNCONSTRAINED}: {annotations[UNCONSTRAINED]!r} is not a boolean"
        unconstrained = value in _TRUE
        if not unconstrained and slice_level is None and size is None:
            return None, ""         # unconstrained: false asks nothing (Kueue: no level, no topology request)
    if slice_level is None and size is not None:
        return None, f"annotation {SLICE_SIZE} is only allowed with {SLICE_REQUIRED}"
    slice_size = 1
    if slice_level is not None:
        if size is None:
            return None, f"annotation {SLICE_SIZE} is required with {SLICE_REQUIRED}"
        if not _INT.match(size) or int(size) < 1:
            return None, f"annotation {SLICE_SIZE}: {size!r} must be an integer of at least 1"
        slice_size = int(size)
        if slice_size > count:
            return None, f"annotation {SLICE_SIZE}: {slice_size} must not exceed the pod count {count}"
    level = annotations.get(REQUIRED) or annotations.get(PREFERRED) or ""
    return TopologyRequest(level, required=REQUIRED in asked, unconstrained=unconstrained or not level,
                           slice_level=slice_level or "", slice_size=slice_size), ""
