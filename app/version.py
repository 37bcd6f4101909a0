"""Which Quotient this is, for `quotient --version`, GET /version and the quotient_build_info metric: an admin
(or a bug report) can tell which build a replica runs without reading its image tag."""
from __future__ import annotations

import importlib.metadata
import platform

# Go's names for the machine, as kube components' /version shows them (linux/amd64)
ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386", "i386": "386"}


def version() -> str:
    """The installed package's version (pyproject.toml), "unknown" when run from a tree never installed."""
    try:
        return importlib.metadata.version("quotient")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_info() -> dict:
    """GET /version's answer, after kube-apiserver's (gitVersion, goVersion, platform): Quotient's version,
    the Python it runs on, and os/arch."""
    return {"version": version(), "python": platform.python_version(),
            "platform": f"{platform.system().lower()}/{ARCH.get(platform.machine().lower(), platform.machine().lower())}"}
