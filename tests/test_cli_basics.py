"""What a cluster admin trips on first (issue 33 item 6): `quotient --version`, GET /version and
quotient_build_info; the "serving" line only once the port listens and a taken port one line of error; a bad
flag value one argparse line; an empty environment variable treated as unset; GET / a redirect to /ui;
GET /healthz. Where the behaviour is the process's (exit status, what it prints), a real process is run."""
from __future__ import annotations

import importlib.metadata
import platform
import socket
import subprocess

import httpx
import pytest

from app.api.app import create_app, create_view_app
from serving import QUOTIENT_BIN, REPO, free_port, served

VERSION = importlib.metadata.version("quotient")


def run(*args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([str(QUOTIENT_BIN), *args], capture_output=True, text=True, timeout=timeout, cwd=str(REPO),
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})


def test_version_flag_prints_the_packages_version():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"quotient {VERSION}", r


async def test_version_route_and_build_info_metric(load_extender):
    from test_verbs import small

    app = create_app(load_extender(small()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        r = await client.get("/version")
        assert r.status_code == 200 and r.json() == {
            "version": VERSION, "python": platform.python_version(),
            "platform": f"{platform.system().lower()}/{ {'x86_64': 'amd64', 'aarch64': 'arm64'}.get(platform.machine(), platform.machine())}"}
        metrics = (await client.get("/metrics")).text
    assert (f'quotient_build_info{{build_date="unknown",compiler="{platform.python_implementation()}",'
            f'git_commit="unknown",git_version="{VERSION}",platform="{r.json()["platform"]}",'
            f'python_version="{platform.python_version()}"}} 1.0') in metrics      # kueue_build_info's label names


async def test_root_redirects_to_the_view_and_healthz_answers_as_livez(load_extender):
    from test_verbs import small

    app = create_app(load_extender(small()), alive=lambda: alive[0])
    alive = [True]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        r = await client.get("/")
        assert r.status_code == 307 and r.headers["location"] == "/ui"
        assert (await client.get("/", follow_redirects=True)).status_code == 200
        assert (await client.get("/healthz")).status_code == 200
        alive[0] = False
        r = await client.get("/healthz")
    assert r.status_code == 503 and r.json()["reason"] == "watch loop not running"
    view = create_view_app(load_extender(small()))         # the --view-port application too
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=view), base_url="http://127.0.0.1") as client:
        r = await client.get("/")
    assert r.status_code == 307 and r.headers["location"] == "/ui"


def test_the_serving_line_comes_once_the_port_listens():
    """The "serving ..." line is logged after uvicorn has started the server on the bound port, not before."""
    with served() as server:
        log = server.log()
    serving = log.index("INFO quotient: serving snapshot")
    assert log.index("Application startup complete") < serving, log
    assert f"http://127.0.0.1:{server.port}/" in log[serving:].splitlines()[0]


@pytest.mark.parametrize("flag", ["--port", "--view-port", "--conversion-port"])
def test_a_taken_port_is_one_line_of_error_and_a_failed_exit(flag, tmp_path):
    """Nothing was served: no "serving" line, no traceback, a non-zero exit and one line naming the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["serve", "--port", str(port if flag == "--port" else free_port())]
        if flag != "--port":
            args += [flag, str(port)]
        if flag == "--conversion-port":      # needs a serving certificate
            cert, key = str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                            "-days", "365", "-subj", "/CN=quotient", "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True, timeout=60)
            args += ["--tls-cert", cert, "--tls-key", key]
        r = run(*args)
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr and "quotient: serving" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if "ERROR" in line or line.startswith("quotient:")]
    assert errors == [f"quotient: cannot listen on 127.0.0.1:{port} ({flag}): address already in use"], r.stderr


@pytest.mark.parametrize("args, error", [
    (["serve", "--log-level", "bogus"], "argument --log-level: invalid choice: 'bogus'"),
    (["serve", "--port", "abc"], "argument --port: 'abc' is not a port (1 to 65535)"),
    (["serve", "--port", "70000"], "argument --port: '70000' is not a port (1 to 65535)"),
    (["serve", "--lease-seconds", "0"], "argument --lease-seconds: '0' is not a duration in seconds"),
    (["queues", "--timeout", "-1"], "argument --timeout: '-1' is not a duration in seconds"),
])
def test_a_bad_flag_value_is_one_argparse_line(args, error):
    r = run(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines()[-1].startswith(f"quotient {args[0]}: error: {error}"), r.stderr


def test_log_level_is_case_insensitive():
    r = run("serve", "--log-level", "WARNING", "--port", "abc")      # the level is accepted, the port is not
    last = r.stderr.splitlines()[-1]
    assert "--log-level" not in last and "argument --port" in last, r.stderr


@pytest.mark.parametrize("env", [{"QUOTIENT_SERVER": ""}, {"QUOTIENT_SERVER": "", "QUOTIENT_CA": "", "QUOTIENT_CERT": "",
                                                               "QUOTIENT_KEY": ""}])
def test_empty_environment_variables_are_unset(env):
    """QUOTIENT_SERVER= means the default server, not a URL "" (before: "cannot reach Quotient at : ...")."""
    r = run("queues", "--timeout", "2", env=env)
    assert "cannot reach Quotient at :" not in r.stderr, r.stderr
    assert r.returncode == 0 or "cannot reach Quotient at http://127.0.0.1:8888" in r.stderr, r.stderr


def test_an_empty_kubernetes_service_host_is_not_a_pod():
    """KUBERNETES_SERVICE_HOST= (empty) does not switch to live mode: the demo snapshot is served."""
    with served(env={"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""}) as server:
        assert "serving snapshot" in server.log()
