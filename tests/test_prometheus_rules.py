"""deploy/components/prometheus/prometheusrule.yaml names Quotient's metrics as Kueue names them, so Kueue's
dashboards and alerts (kueue_*) work on Quotient: every quotient_* metric whose help names its Kueue namesake
(kueue_ + the same name) has a recording rule for each series it exports, made from that metric; no rule reads a
metric Quotient does not export. The list comes from the registry, so a Kueue metric added to
app/observe/metrics.py without its rule fails here.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from app.observe.metrics import Metrics
from app.refusals import Refusals
from test_debug import SCENARIO

RULES = Path(__file__).resolve().parents[1] / "deploy" / "components" / "prometheus" / "prometheusrule.yaml"
SERIES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
METRIC = re.compile(r"\bquotient_\w+")


@pytest.fixture
def families(build_extender):
    state = build_extender(SCENARIO).state
    return list(Metrics(state, Refusals()).registry.collect())


def recorded() -> dict[str, list[str]]:
    """record name -> the expressions recording it (a name may be recorded by several rules, one per label set)."""
    (doc,) = [d for d in yaml.safe_load_all(RULES.read_text()) if d]
    assert doc["kind"] == "PrometheusRule"
    out: dict[str, list[str]] = {}
    for group in doc["spec"]["groups"]:
        for rule in group["rules"]:
            out.setdefault(rule["record"], []).append(rule["expr"])
    return out


def kueue_namesakes(families) -> dict[str, str]:
    """Series Quotient exports under a Kueue namesake -> the series Kueue calls it: a family whose help names
    kueue_<its name after quotient_>."""
    out = {}
    for f in families:
        if not f.name.startswith("quotient_"):
            continue
        short = f.name[len("quotient_"):]
        if re.search(rf"\bkueue_{re.escape(short)}(_total)?\b", f.documentation):
            for suffix in SERIES.get(f.type, ("",)):
                out[f"quotient_{short}{suffix}"] = f"kueue_{short}{suffix}"
    return out


def test_every_metric_with_a_kueue_namesake_is_recorded_under_kueues_name_from_itself(families):
    namesakes = kueue_namesakes(families)
    assert {"quotient_admitted_workloads_total", "quotient_pending_workloads", "quotient_build_info",
            "quotient_admission_wait_time_seconds_bucket"} <= set(namesakes)       # the list is not empty
    rules = recorded()
    missing = [f"{ours} -> {theirs}" for ours, theirs in namesakes.items()
               if not any(re.search(rf"\b{ours}\b", e) for e in rules.get(theirs, ()))]
    assert not missing, "no recording rule: " + ", ".join(missing)


def test_every_rule_reads_metrics_quotient_exports_and_records_a_kueue_name(families):
    exported = {f"{f.name}{s}" for f in families for s in SERIES.get(f.type, ("",))}
    namesakes = set(kueue_namesakes(families).values())
    for record, exprs in recorded().items():
        assert record in namesakes, f"{record} records no metric whose help names it"
        for expr in exprs:
            read = set(METRIC.findall(expr))
            assert read and read <= exported, f"{record}: {expr} reads {read - exported or 'nothing'}"


def test_the_readme_shows_the_rules_and_names_the_component():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "components/prometheus/prometheusrule.yaml" in readme
    assert "record: kueue_admission_wait_time_seconds_bucket" in readme
