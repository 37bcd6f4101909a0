"""A real `quotient serve` on a free 127.0.0.1 port for the tests that drive the command line over HTTP.

    with served("--log-format", "json") as server:
        server.url, server.port, server.log()     # log(): what it printed so far

The server is always stopped (terminate, then kill) when the block ends, and a
server that does not answer /livez within `ready_within` seconds fails the test.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
QUOTIENT_BIN = REPO / ".venv" / "bin" / "quotient"


_GIVEN: set[int] = set()       # ports free_port handed out in this process


def free_port() -> int:
    """A port free now, and never one this process was given before: the socket that found it is closed at once,
    so two taken one after the other (a process's --port and --conversion-port) could be the same one."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


@dataclass
class Server:
    port: int
    proc: subprocess.Popen
    log_path: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return Path(self.log_path).read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def served(*args: str, ready_within: float = 15.0, env: dict | None = None):
    """env: variables set (over this process's) for the server."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="quotient-serve-") as tmp:
        log_path = os.path.join(tmp, "serve.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(QUOTIENT_BIN), "serve", "--host", "127.0.0.1", "--port", str(port), *args],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(REPO),
                                    env={**os.environ, **env} if env else None)
        server = Server(port, proc, log_path)
        try:
            _wait_ready(server, ready_within)
            yield server
        finally:
            stop_process(proc)


def stop_process(proc: subprocess.Popen, wait: float = 5.0) -> None:
    """Stop a process a test or benchmark started: terminate, then kill."""
    proc.terminate()
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(wait)


def _wait_ready(server: Server, within: float) -> None:
    deadline = time.monotonic() + within
    with httpx.Client(timeout=1.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                raise AssertionError(f"quotient serve exited with {server.proc.returncode}:\n{server.log()[-3000:]}")
            try:
                if client.get(f"{server.url}/livez").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    raise AssertionError(f"quotient serve did not answer /livez within {within} s:\n{server.log()[-3000:]}")


@contextlib.asynccontextmanager
async def served_live(api, tmp_path: Path, *args: str, ready_within: float = 15.0):
    """`quotient serve --kubeconfig` against a FakeApiServer on a free port, with args; yields (proc, port,
    log path) once /readyz answers 200 (with --leader-elect: "ok: leader", once leading), and stops it when the block ends."""
    import asyncio

    port, log_path = free_port(), tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(QUOTIENT_BIN), "serve", "--kubeconfig", api.kubeconfig_path(tmp_path), "--host", "127.0.0.1",
            "--port", str(port), *args, stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + ready_within
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
            while True:
                try:
                    r = await http.get(f"http://127.0.0.1:{port}/readyz")
                    if r.status_code == 200 and ("--leader-elect" not in args or r.text == "ok: leader"):
                        break
                except httpx.TransportError:
                    pass
                assert proc.returncode is None and time.monotonic() < deadline, log_path.read_text()
                await asyncio.sleep(0.1)
        yield proc, port, log_path
    finally:
        await stop(proc)


async def stop(proc) -> None:
    """Stop an asyncio subprocess (a `quotient serve` a test started): terminate, then kill."""
    import asyncio

    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
