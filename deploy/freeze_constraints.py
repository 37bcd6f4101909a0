"""Print deploy/constraints.txt: the installed versions of Quotient's runtime dependencies and
everything they pull in (no test tools), from the environment this runs in.

    .venv/bin/python deploy/freeze_constraints.py > deploy/constraints.txt
"""
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

HEADER = """\
# Exact versions for the container image only (Dockerfile: pip install -c). pyproject.toml
# keeps the ranges CI and `pip install -e .` resolve; this pins the runtime closure of those
# dependencies (no test tools) to the versions the suite last passed with.
# Regenerate from a venv that passes the tests:
#   .venv/bin/python deploy/freeze_constraints.py > deploy/constraints.txt
"""


def main() -> int:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    stack = [Requirement(d) for d in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]
    pins: dict[str, str] = {}
    while stack:
        req = stack.pop()
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        if key in pins:
            continue
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            print(f"{req.name} is not installed", file=sys.stderr)
            return 1
        pins[key] = dist.version
        stack += [Requirement(r) for r in dist.requires or []]
    sys.stdout.write(HEADER + "".join(f"{k}=={v}\n" for k, v in sorted(pins.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
