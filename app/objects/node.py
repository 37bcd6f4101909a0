"""A Node reduced to labels, taints and allocatable, quantities parsed once."""
from __future__ import annotations

from dataclasses import dataclass

from .quantity import QuantityError, parse_quantity
from .errors import InvalidObject
from .meta import listing, mapping, metadata, string_map


@dataclass(slots=True)
class NodeInfo:
    name: str
    labels: dict[str, str]
    taints: list[dict]
    allocatable: dict[str, int]
    unschedulable: bool = False


def decode_node(obj: dict) -> NodeInfo:
    meta, name = metadata(obj, "Node")
    spec = mapping(obj.get("spec"), "Node", name, "spec")
    status = mapping(obj.get("status"), "Node", name, "status")
    raw = mapping(status.get("allocatable"), "Node", name, "status.allocatable")
    try:
        allocatable = {r: parse_quantity(v, r) for r, v in raw.items()}
    except QuantityError as e:
        raise InvalidObject("Node", name, f"status.allocatable: {e}") from None
    taints = [t for t in listing(spec.get("taints"), "Node", name, "spec.taints") if isinstance(t, dict)]
    return NodeInfo(
        name=name,
        labels=string_map(meta.get("labels"), "Node", name, "metadata.labels"),
        taints=taints,
        allocatable=allocatable,
        unschedulable=bool(spec.get("unschedulable")),
    )
