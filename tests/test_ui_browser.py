"""The web view in a real browser: headless Chromium (Debian's `chromium`), driven by Playwright, against
`quotient serve` on the bundled demo snapshot. It opens the tree and finds the borrowed part of a borrowing
queue's bar, clicks into a ClusterQueue and one of its pending pods and reads the reason /debug gives, sees
a filter sent over HTTP appear in the journal without a reload, and uses the pages with JavaScript off.

A screenshot of each page is saved to tests/artifacts/ (or $QUOTIENT_ARTIFACTS). Where Chromium or
Playwright is missing, every test here is skipped with a message that says so (.ci/run installs both).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from serving import REPO, served

CHROMIUM = os.environ.get("QUOTIENT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:                                  # pragma: no cover - depends on the machine
    sync_playwright = None
if sync_playwright is None or CHROMIUM is None:
    pytest.skip("browser tests of /ui skipped: " + ("Playwright for Python is not installed (pip install -e "
                "'.[test]')" if sync_playwright is None else "Chromium is not installed (apt-get install "
                "chromium; .ci/run does it where it may)"), allow_module_level=True)

ARTIFACTS = Path(os.environ.get("QUOTIENT_ARTIFACTS") or REPO / "tests" / "artifacts")
# As root in a container Chromium needs --no-sandbox; the rest keep it from calling Google on a closed network.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
NODES = ["od-1", "od-2", "od-3", "od-4", "spot-1", "spot-2", "gpu-1", "gpu-2"]


def learned(name: str, cpu: str) -> dict:
    """A filter body for a pod of team-a's user-queue that only kube-scheduler's request tells Quotient of."""
    return {"Pod": {"metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                                 "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
            "Nodes": None, "NodeNames": NODES}


@pytest.fixture(scope="module")
def demo():
    """quotient serve on the demo snapshot, with team-a-cq borrowing 2 on-demand CPUs (8 used + 10 of 16), and
    team-a/huge-1 (40 CPUs, beyond what team-a-cq may ever use) pending in it."""
    with served() as server:
        with httpx.Client(base_url=server.url, timeout=5, trust_env=False) as c:
            assert c.post("/filter", json=learned("huge-1", "40")).json()["NodeNames"] in (None, [])
            assert c.post("/filter", json=learned("big-1", "10")).json()["NodeNames"]
            bound = c.post("/bind", json={"PodName": "big-1", "PodNamespace": "team-a", "PodUID": "uid-big-1",
                                          "Node": "od-2"})
            assert bound.json() == {"Error": ""}
        yield server


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def tab(browser):
    """A page in a fresh context; the test fails if the browser reported an error on it (a script error, a
    resource the Content-Security-Policy refused, a file that did not load)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"{r.url}: {r.failure}"))
    yield page
    context.close()
    assert errors == []


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"ui-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000         # a real picture, not an empty page
    return path


def test_the_tree_draws_the_borrowed_part_of_a_borrowing_queue(demo, tab):
    tab.goto(f"{demo.url}/ui")
    row = tab.locator('tr.resource[data-queue="team-a-cq"][data-flavor="on-demand"][data-resource="cpu"]')
    assert row.locator('[data-field="borrowed"]').inner_text() == "2"
    assert row.locator('[data-field="usage"]').inner_text() == "18"
    borrowed = row.locator("rect.seg.borrowed").bounding_box()
    used = row.locator("rect.seg.used").bounding_box()
    assert borrowed is not None and borrowed["width"] > 3           # drawn, and visible
    assert used["width"] == pytest.approx(borrowed["width"] * 8, rel=0.05)     # 16 within nominal, 2 beyond
    # queues that do not borrow have no borrowed segment
    assert tab.locator('tr.resource[data-queue="team-b-cq"] rect.seg.borrowed').count() == 0
    # ClusterQueues are drawn inside their cohort
    assert tab.locator('li[data-name="research"] li[data-name="team-a-cq"]').count() == 1
    shot(tab, "tree")


def test_click_into_a_queue_and_a_pending_pod_and_read_why_it_waits(demo, tab):
    with httpx.Client(base_url=demo.url, timeout=5, trust_env=False) as c:
        queue = c.get("/debug/queues/team-a-cq").json()
        first = next(p for p in queue["pendingPods"] if p["pod"] == "team-a/huge-1")
        ns, name = first["pod"].split("/")
        pod = c.get(f"/debug/pods/{ns}/{name}").json()
    assert first["rule"] == pod["now"]["rule"] == "QuotaExceeded" and "cpu request 40" in pod["now"]["reason"]
    tab.goto(f"{demo.url}/ui")
    tab.click('li[data-name="team-a-cq"] h2 a')
    tab.wait_for_url(f"{demo.url}/ui/queues/team-a-cq")
    row = tab.locator(f'table.pending tr[data-pod="{first["pod"]}"]')
    assert row.locator('[data-field="rule"]').inner_text() == first["rule"]
    assert row.locator('[data-field="why"]').inner_text() == first["why"]
    shot(tab, "queue")
    row.locator("a").click()
    tab.wait_for_url(f"{demo.url}/ui/pods/{ns}/{name}")
    assert tab.locator('dd[data-field="rule"]').inner_text() == pod["now"]["rule"]
    assert tab.locator('dd[data-field="reason"]').inner_text() == (pod["now"]["reason"] or "-")
    assert tab.locator('[data-field="status"]').first.inner_text() == pod["status"]
    shot(tab, "pod")


def test_a_filter_sent_over_http_appears_in_the_journal_without_a_reload(demo, tab):
    tab.goto(f"{demo.url}/ui/decisions?queue=team-a-cq")
    tab.evaluate("window.notReloaded = true")
    assert tab.locator('tr[data-pod="team-a/late-1"]').count() == 0
    with httpx.Client(base_url=demo.url, timeout=5, trust_env=False) as c:
        answer = c.post("/filter", json=learned("late-1", "64")).json()
    assert answer["NodeNames"] in (None, [])                      # 64 CPUs is beyond team-a's quota: refused
    row = tab.locator('tr[data-pod="team-a/late-1"]')
    row.wait_for(timeout=10_000)                                    # refreshes every 3 s
    assert tab.evaluate("window.notReloaded") is True
    assert row.locator('[data-field="outcome"]').inner_text() == "QuotaExceeded"
    assert "refreshed at" in tab.locator("#refreshed").inner_text()
    shot(tab, "decisions")


def test_without_javascript_every_page_but_the_refresh_works(demo, browser):
    context = browser.new_context(java_script_enabled=False)
    try:
        tab = context.new_page()
        tab.goto(f"{demo.url}/ui")
        tab.click('li[data-name="ml-cq"] h2 a')
        tab.wait_for_url(f"{demo.url}/ui/queues/ml-cq")
        assert tab.locator("table.pending tr[data-pod]").count() >= 1
        tab.goto(f"{demo.url}/ui/decisions")
        tab.fill('input[name="pod"]', "team-a/big-1")
        tab.click('form.filter button[type="submit"]')
        tab.wait_for_url(f"{demo.url}/ui/decisions?queue=&pod=team-a%2Fbig-1&limit=50")
        outcomes = tab.locator('tr[data-pod="team-a/big-1"] [data-field="outcome"]').all_inner_texts()
        assert outcomes == ["Bound", "Admitted"]
        assert tab.locator("tr[data-pod]").count() == 2              # filtered to that pod
    finally:
        context.close()
