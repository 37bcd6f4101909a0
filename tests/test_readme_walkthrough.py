"""README "Debugging with curl": every command of its walkthrough, run as written against a real
`quotient serve` on the embedded demo snapshot, answers what the README says.

Commands are taken from the section's bash block; the only change is the port (a free one on
127.0.0.1 instead of 8888), and curl is made to fail on an HTTP error (--fail-with-body), so
each command's exit status says the route answered 2xx.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import orjson
import pytest

from serving import REPO, served

SECTION = "## Debugging with curl"
COMMAND_TIMEOUT = 10.0


def walkthrough_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert SECTION in text, f"README.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, "the section has no bash block"
    return found.group(1)


def commands(block: str) -> list[str]:
    """Shell commands of a bash block: comments skipped; a command goes on while a quote is open,
    a line ends with a backslash, or a here-document has not reached its terminator."""
    out, current, heredoc = [], [], None
    for line in block.splitlines():
        if heredoc is not None:
            current.append(line)
            if line == heredoc:
                out.append("\n".join(current))
                current, heredoc = [], None
            continue
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current.append(line)
        joined = "\n".join(current)
        marker = re.search(r"<<-?'?(\w+)'?", line)
        if marker:
            heredoc = marker.group(1)
        elif joined.count("'") % 2 == 0 and not line.endswith("\\"):
            out.append(joined)
            current = []
    assert not current and heredoc is None, f"unfinished command in the README block: {current}"
    return out


def test_walkthrough_commands_are_found():
    found = commands(walkthrough_block())
    assert len(found) == 8
    assert found[5].endswith("\nEOF") and "--data-binary @-" in found[5]


def check_queues(out: str) -> None:
    row = next(line for line in out.splitlines() if line.startswith("team-a-cq") and " on-demand " in line
               and " cpu " in line)
    # nominal 16, borrowingLimit 8, 8 used by etl-1 and etl-2, 16 more available (8 own + 8 borrowed)
    assert row.split() == ["team-a-cq", "on-demand", "cpu", "16", "8", "-", "8", "0", "0", "16", "16"]
    assert any(line.split()[:5] == ["team-b-cq", "research", "active", "StrictFIFO", "1"] for line in out.splitlines())


def check_queue(out: str) -> None:
    assert "ClusterQueue: team-a-cq" in out and "Pods:         1 pending, 0 reserving, 3 admitted" in out
    etl3 = next(line for line in out.splitlines() if "team-a/etl-3" in line)
    assert etl3.split()[:5] == ["1", "team-a/etl-3", "1000", "cpu=2,memory=8Gi,pods=1", "Admitted"]
    assert "fits now (flavor on-demand)" in etl3


def check_filter(out: str) -> None:
    assert orjson.loads(out)["NodeNames"] == ["od-1", "od-2", "gpu-1"]


def check_pod(out: str) -> None:
    assert "Status:       reserved" in out
    assert "Flavor chosen: cpu=on-demand,pods=on-demand" in out
    assert re.search(r"Offered:\s+4\n\s+Passing:\s+3", out)
    assert re.search(r"1\s+not in the pod's flavor\(s\) on-demand", out)
    assert "Gang: none" in out and "Backoff: none" in out


def check_decisions(out: str) -> None:
    view = orjson.loads(out)
    assert view["limit"] == 5
    first = view["decisions"][0]
    assert (first["verb"], first["pod"], first["outcome"], first["queue"]) == (
        "filter", "team-a/dbg-1", "Admitted", "team-a-cq")
    assert (first["offered"], first["nodes"], first["flavors"]["cpu"]) == (4, 3, "on-demand")


def check_explain(out: str) -> None:
    assert "Rule:          QuotaExceeded" in out
    assert "cpu request 30 > 24 at most (nominal 16 + borrowing limit 8)" in out
    assert "Pending ahead: 1" in out


def check_metrics(out: str) -> None:
    lines = set(out.splitlines())
    assert 'quotient_pending_workloads{cluster_queue="team-a-cq",status="active"} 1.0' in lines
    assert 'quotient_reserving_active_workloads{cluster_queue="team-a-cq"} 1.0' in lines
    assert 'quotient_admitted_active_workloads{cluster_queue="team-a-cq"} 3.0' in lines
    assert ('quotient_decisions_total{cluster_queue="team-a-cq",outcome="admitted",reason="Admitted",'
            'verb="filter"} 1.0') in lines
    assert all(line.startswith("quotient_") for line in lines)


def check_cli_queue(out: str) -> None:
    assert "ClusterQueue: team-a-cq" in out
    assert "Pods:         1 pending, 1 reserving, 3 admitted" in out      # dbg-1 holds its reservation
    assert re.search(r"team-a/dbg-1\s+cpu=on-demand,pods=on-demand", out)


CHECKS = [("/debug/queues?format=text", check_queues), ("/debug/queues/team-a-cq", check_queue),
          ("/filter", check_filter), ("/debug/pods/team-a/dbg-1", check_pod), ("/debug/decisions", check_decisions),
          ("/debug/explain", check_explain), ("/metrics", check_metrics), ("quotient queues team-a-cq", check_cli_queue)]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_readme_walkthrough_runs_as_documented():
    found = commands(walkthrough_block())
    with served() as server:
        env = {**os.environ, "QUOTIENT_SERVER": server.url}
        started = time.monotonic()
        used = []
        for command in found:
            check = next((c for marker, c in CHECKS if marker in command.split("\n")[0]), None)
            assert check is not None, f"no check for README command: {command}"
            used.append(check)
            ran = command.replace("127.0.0.1:8888", f"127.0.0.1:{server.port}").replace(
                "curl -s ", "curl -s --fail-with-body --max-time 5 ")
            p = subprocess.run(["bash", "-o", "pipefail", "-c", ran], cwd=str(REPO), env=env, capture_output=True,
                               text=True, timeout=COMMAND_TIMEOUT)
            assert p.returncode == 0, f"{command}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}"
            check(p.stdout)
        assert time.monotonic() - started < 30
    assert used == [c for _, c in CHECKS]
