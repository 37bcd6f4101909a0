"""Shared fixtures for the HTTP-level tests (test_wire, test_verbs, test_bad_input, test_scenarios).

States are built from small YAML snapshots written to tmp_path (builders.snapshot_yaml), through the
same read_snapshot/apply_documents path `quotient serve --snapshot` uses; the verbs are called over the
real FastAPI routes with httpx's ASGI transport. Objects and bodies come from builders.py, the tests'
one builder vocabulary; conftest holds fixtures only.
"""
from __future__ import annotations

import contextlib
import gc
import textwrap
from pathlib import Path

import httpx
import pytest

from app.act.writer import SnapshotWriter
from app.api.app import create_app
from app.cli import build_from_snapshot
from app.config import Configuration
from app.scheduler.scheduler import Scheduler
from app.state.cluster import ClusterState
from app.sync.snapshot import apply_documents, read_snapshot
from helpers import FakeClock

REPO = Path(__file__).resolve().parents[1]
WIRE_DIR = REPO.parent / "shared" / "wire"
SCENARIO_DIR = REPO.parent / "shared" / "scenarios" / "examples"
QUOTIENT_BIN = REPO / ".venv" / "bin" / "quotient"


@pytest.fixture(autouse=True)
def _unfrozen():
    """A test that loads a snapshot or lists a cluster freezes the heap and raises the collector's threshold
    (app/state/heap.py), as the process would once; in the test process that would keep every later test's
    cyclic garbage from the collector."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.fixture(autouse=True)
def _local_only(monkeypatch):
    """Nothing in the tests talks beyond 127.0.0.1: no proxy from the environment (a test may set one)."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def write_yaml(tmp_path):
    """write_yaml(text, name="snapshot.yaml") -> path of the dedented text written under tmp_path."""
    def write(text: str, name: str = "snapshot.yaml") -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return str(path)
    return write


@pytest.fixture
def load_extender(write_yaml):
    """load_extender(yaml) -> Scheduler via build_from_snapshot (the CLI's own builder)."""
    def load(text: str, name: str = "snapshot.yaml") -> Scheduler:
        return build_from_snapshot(write_yaml(text, name))
    return load


@pytest.fixture
def build_extender(write_yaml):
    """build_extender(yaml, config=..., clock=..., writer=...) -> Scheduler on a hand-built ClusterState.

    Mirrors build_from_snapshot, but lets a test choose the Configuration, the clock
    and the writer (writer is a factory taking the state, or an object)."""
    def build(text: str, config: Configuration | None = None, clock=None, writer=None) -> Scheduler:
        path = write_yaml(text)
        cluster, _ = read_snapshot(path)
        state = ClusterState(config or Configuration(), **({"clock": clock} if clock is not None else {}))
        apply_documents(path, state, cluster)
        if writer is None:
            writer = SnapshotWriter(state)
        elif callable(writer) and not hasattr(writer, "bind"):
            writer = writer(state)
        return Scheduler(state, writer)
    return build


@pytest.fixture
def ext(request, build_extender):
    """The test module's cluster as a Scheduler: its CLUSTER text (a snapshot), on a FakeClock at its T0 when it
    names one."""
    t0 = getattr(request.module, "T0", None)
    return build_extender(request.module.CLUSTER, clock=FakeClock(t0) if t0 is not None else None)


@pytest.fixture
def api():
    """`async with api(scheduler, prefix) as client:` an httpx client on the real routes."""
    @contextlib.asynccontextmanager
    async def open_client(scheduler: Scheduler, prefix: str = "", ready=None):
        app = create_app(scheduler, prefix) if ready is None else create_app(scheduler, prefix, ready)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            client.served = app          # what the application keeps (its offered-node cache), for a test to read
            yield client
    return open_client
