"""The web view benchmark (tests/bench/bench_ui.py) in quick mode: it still builds the tree it claims (parent
Cohorts, borrowers, reservations), every page it times answers 200, and it prints its figures. No timing is
asserted: the figures are the benchmark's to report, not a test's to judge on a noisy machine."""
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import bench_ui  # noqa: E402


class TreeItems(HTMLParser):
    """The data-name of every ClusterQueue and Cohort item of the tree page and the item it sits in, read as a
    browser would."""

    def __init__(self):
        super().__init__()
        self.names: dict[str, list[str]] = {"ClusterQueue": [], "Cohort": []}
        self.inside: dict[str, str | None] = {}
        self.open: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        if tag != "li":
            return
        a = dict(attrs)
        name = a.get("data-name") if a.get("data-kind") in self.names else None
        if name is not None:
            self.names[a["data-kind"]].append(name)
            self.inside[name] = next((n for n in reversed(self.open) if n is not None), None)
        self.open.append(name)

    def handle_endtag(self, tag):
        if tag == "li" and self.open:
            self.open.pop()


def test_quick_run_prints_its_figures_and_the_tree_names_every_cluster_queue(capsys):
    result = bench_ui.run(bench_ui.parse(["--quick", "--runs", "2", "--warmup", "1", "--queue-runs", "1"]))
    out = capsys.readouterr().out

    assert set(result.statuses.values()) == {200}, result.statuses
    assert len(result.queues) == 100 and result.reserved == 50
    items = TreeItems()
    items.feed(result.tree_html)
    assert sorted(items.names["ClusterQueue"]) == result.queues          # each once, none missing
    assert {"org-a", "org-b", "cohort-00", "cohort-09"} <= set(items.names["Cohort"])
    assert items.inside["cohort-00"] == "org-a" and items.inside["cohort-06"] == "org-b"
    assert items.inside["org-a"] is None and items.inside["cohort-09"] is None
    assert items.inside["cq-000"] == "cohort-00" and items.inside["cq-099"] == "cohort-09"

    number = r"[\d.]+"
    assert re.search(rf"^a\. GET /ui \(tree page\): p50 {number} ms, p90 {number} ms, p99 {number} ms, "
                     rf"max {number} ms, mean {number} ms; HTML \d+ KiB, status 200; ClusterQueues on the page: "
                     r"100 of 100;", out, re.M), out
    assert re.search(rf"^b\. GET /debug/queues \(the JSON twin\): p50 {number} ms, p99 {number} ms; \d+ KiB; "
                     rf"tree page / JSON: p50 x{number}, p99 x{number}", out, re.M), out
    assert re.search(rf"^c\. GET /ui/decisions: p50 {number} ms, p99 {number} ms", out, re.M), out
    assert re.search(rf"^d\. GET /ui/queues/cq-000 .*: p50 {number} ms, p99 {number} ms", out, re.M), out
    assert re.search(r"^e\. the tree page's parts in-process .*queues_view .*tree \+ bars .*render ", out, re.M), out
    assert "12 Cohorts (7 with a parent), 100 ClusterQueues (10 over their nominal quota)" in out, out
    for label in ("tree", "json", "queue", "decisions"):
        figures = result.figures[label]
        assert figures["n"] >= 1 and 0 < figures["p50"] <= figures["p99"] <= figures["max"], (label, figures)
