"""The shape issue 35 set for app/: small modules and classes, no import circle, layers that import only
downwards, one catalogue of rule names, no workload keys parsed from string prefixes.

Read from the source with ast (imports under TYPE_CHECKING count: a circle of types is still a circle)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"
MAX_MODULE_LINES = 450
MAX_CLASS_LINES = 300
# Top first; a package may import its own layer's packages (no circle) and any below, never one above.
LAYERS = [("cli", "sim", "leader", "leader_label", "__main__"), ("api", "ui"), ("scheduler",),
          ("sync", "act", "observe", "journal", "refusals"), ("state",), ("core",),
          ("objects", "config", "version", "data")]
FLOOR = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def modules() -> dict[str, Path]:
    found = {}
    for path in APP.rglob("*.py"):
        parts = path.relative_to(APP.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def imports(name: str, path: Path) -> set[str]:
    """The app modules `name` imports (relative or absolute, anywhere in the file)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for candidate in [target] + [f"{target}.{a.name}" for a in node.names]:
                if candidate in MODULES and candidate != name:
                    found.add(candidate)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
    return found


GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def room(name: str) -> str:
    return name.split(".")[1] if "." in name else name


def test_no_module_over_its_size():
    long = {str(p.relative_to(APP.parent)): n for p in MODULES.values()
            if (n := p.read_text().count("\n")) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_class_over_its_size():
    long = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long[f"{path.relative_to(APP.parent)}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert not long, f"classes over {MAX_CLASS_LINES} lines: {long}"


def circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    assert circles() == []


def test_layers_import_only_downwards():
    upward = sorted(f"{a} -> {b}" for a, deps in GRAPH.items() for b in deps
                    if FLOOR.get(room(b), 99) < FLOOR.get(room(a), 99))
    assert not upward, "imports of a higher layer: " + ", ".join(upward)


def test_every_package_has_a_layer():
    assert {room(name) for name in MODULES if "." in name} - set(FLOOR) == set()


def test_a_rule_name_is_written_in_one_module():
    written = [str(p.relative_to(APP.parent)) for p in MODULES.values() if '"QuotaExceeded"' in p.read_text()]
    assert written == ["app/core/rules.py"]


@pytest.mark.parametrize("prefix", ["pod:", "job:", "group:"])
def test_no_workload_key_is_parsed_from_a_prefix(prefix):
    pattern = re.compile(rf'["\']{prefix}')
    found = [str(p.relative_to(APP.parent)) for p in MODULES.values() if pattern.search(p.read_text())]
    assert found == []


def test_a_workload_is_no_pod_in_disguise():
    """A pod group or a Job reaches admission as a Workload of its real members (its template one of them), never
    as a pod made up for it with dataclasses.replace under another uid (issue 35: "no more key prefixes or fake
    pods")."""
    from app.core.workload import Workload

    assert "replace(" not in (APP / "core" / "workload.py").read_text()
    assert not hasattr(Workload, "pod") and "pod" not in Workload.__slots__
    made_up = re.compile(r"\breplace\([^)]*\b(uid|requests)=")
    found = [str(p.relative_to(APP.parent)) for p in MODULES.values() if made_up.search(p.read_text())]
    assert found == []
