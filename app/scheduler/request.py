"""The requests the verbs take, as api/ decodes them from kube-scheduler's bodies."""
from __future__ import annotations

from dataclasses import dataclass

from ..objects.offered_nodes import OfferedNodes


class InvalidRequest(ValueError):
    """A request the scheduler cannot use (a Pod that does not decode); api/ answers it as a bad request."""


@dataclass(slots=True)
class Offer:
    """filter and prioritize: the pod (its object as sent) and the nodes offered to it."""
    pod: dict
    offered: OfferedNodes


@dataclass(slots=True)
class PreemptAsk:
    """preempt: the preemptor and the nodes kube-scheduler found candidate victims on."""
    pod: dict
    nodes: list[str]          # sorted


@dataclass(slots=True)
class BindAsk:
    """bind: the pod, by name (and uid when sent), onto node."""
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str
