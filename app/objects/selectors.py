"""Label selectors, node affinity terms and taint toleration, as Kubernetes defines them."""
from __future__ import annotations

from dataclasses import dataclass

_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(slots=True, frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt") and present:
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except (ValueError, IndexError):
                return False
            return have > want if self.operator == "Gt" else have < want
        return False


@dataclass(slots=True, frozen=True)
class Selector:
    """A metav1.LabelSelector: {} matches everything."""
    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        return all(r.matches(labels) for r in self.expressions)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.match_labels]
        parts += [f"{r.key} {r.operator} {list(r.values)}" if r.values else f"{r.key} {r.operator}"
                  for r in self.expressions]
        return ", ".join(parts) or "{} (everything)"


def namespace_labels(labels_by_namespace: dict[str, dict[str, str]], namespace: str) -> dict[str, str]:
    """A namespace's labels as a namespaceSelector reads them; one not (yet) seen has only the label the API
    server gives every namespace, kubernetes.io/metadata.name."""
    labels = labels_by_namespace.get(namespace)
    return labels if labels is not None else {"kubernetes.io/metadata.name": namespace}


def _requirement(raw: object, ops: tuple[str, ...]) -> Requirement:
    if not isinstance(raw, dict):
        raise ValueError("matchExpressions entries must be objects")
    key, op, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise ValueError("matchExpressions[].key is required")
    if op not in ops:
        raise ValueError(f"operator {op!r} is not one of {', '.join(ops)}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError("matchExpressions[].values must be a list of strings")
    if op in ("In", "NotIn") and not values:
        raise ValueError(f"operator {op} needs values")
    if op in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"operator {op} takes no values")
    return Requirement(key, op, tuple(values))


def decode_selector(raw: object) -> Selector:
    """metav1.LabelSelector from its JSON form; ValueError naming the problem."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError("a label selector must be an object")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in labels.items()):
        raise ValueError("matchLabels must map strings to strings")
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise ValueError("matchExpressions must be a list")
    return Selector(tuple(sorted(labels.items())), tuple(_requirement(e, _OPS) for e in exprs))


def node_affinity_matches(terms: list, labels: dict[str, str]) -> bool:
    """requiredDuringScheduling nodeSelectorTerms: ORed terms of ANDed expressions."""
    if not terms:
        return True
    for term in terms:
        if not isinstance(term, dict):
            continue
        try:
            reqs = [_requirement(e, _OPS + ("Gt", "Lt")) for e in term.get("matchExpressions") or []]
        except ValueError:
            continue
        if reqs and all(r.matches(labels) for r in reqs):
            return True
    return False


def tolerates(tolerations: list, taint: dict) -> bool:
    """True when some toleration matches the taint (key, value, effect), as kube does."""
    for t in tolerations:
        if not isinstance(t, dict):
            continue
        effect = t.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = t.get("key") or ""
        op = t.get("operator") or "Equal"
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taint(tolerations: list, taints: list, effects=("NoSchedule", "NoExecute")) -> dict | None:
    """The first taint with a scheduling effect that the tolerations do not cover."""
    for taint in taints:
        if taint.get("effect") in effects and not tolerates(tolerations, taint):
            return taint
    return None
