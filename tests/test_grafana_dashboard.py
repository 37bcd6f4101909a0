"""deploy/grafana-dashboard.json stays in step with what Quotient exports.

A dashboard over a renamed metric or a dropped label shows "No data" without any error, so the
test asks a real `quotient serve` (the demo snapshot, driven with a filter, a refusal and a bind so
the decision and latency families have samples) for /metrics and checks every query against it:
each metric it names is exported, each label it matches, groups by or shows in a legend is one that
metric has. Labelled families with no samples yet (watch, eviction, preemption counters) take their
label names from the metric objects of app.observe.metrics.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import httpx
import pytest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from app.cli import build_from_snapshot
from app.observe import attach
from app.observe.collectors import OUTCOMES
from app.sync.snapshot import DEFAULT_SNAPSHOT
from serving import served
from test_demo import TRY_POD

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana-dashboard.json"
DATASOURCE_UIDS = {"$datasource", "${datasource}"}
SCRAPE_LABELS = {"instance", "job"}          # added by Prometheus to every series it scrapes
# Series a family exports, by the family's type (the parser names a counter family without _total).
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "summary": ("", "_count", "_sum"),
            "gauge": ("",), "untyped": ("",), "info": ("_info",)}
# PromQL functions, aggregations and keywords: any other identifier in an expression is a metric name.
KEYWORDS = set("""
    sum min max avg count group stddev stdvar topk bottomk quantile count_values by without on ignoring
    group_left group_right bool and or unless offset rate irate increase delta idelta deriv predict_linear
    histogram_quantile clamp clamp_min clamp_max abs ceil floor round sqrt exp ln log2 log10 sgn
    label_values label_replace label_join vector scalar time timestamp sort sort_desc absent absent_over_time
    changes resets avg_over_time min_over_time max_over_time sum_over_time count_over_time last_over_time
    quantile_over_time inf nan
""".split())

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
LABEL_VALUES = re.compile(r"^\s*label_values\s*\((.*),\s*([A-Za-z_]\w*)\s*\)\s*$", re.DOTALL)
RANGE = re.compile(r"\[[^\]]*\]")
SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}")
MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
IDENT = re.compile(r"(?<![\w.$])[A-Za-z_:][\w:]*")
LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
OUTCOME = re.compile(r'\boutcome\s*=\s*"([^"]*)"')


# ---- what Quotient exports -----------------------------------------------------------------

def post(client: httpx.Client, path: str, body: dict) -> dict:
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def metrics_text() -> str:
    """/metrics of a real server on the demo snapshot, after an admission, a refusal and a bind."""
    big = {**TRY_POD, "metadata": {**TRY_POD["metadata"], "name": "too-big", "uid": "too-big"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500"}}}]}}
    nodes = ["od-1", "od-2", "spot-1", "gpu-1"]
    with served() as server, httpx.Client(base_url=server.url, trust_env=False, timeout=10) as client:
        assert post(client, "/filter", {"Pod": TRY_POD, "Nodes": None, "NodeNames": nodes})["NodeNames"]
        assert not post(client, "/filter", {"Pod": big, "Nodes": None, "NodeNames": nodes})["NodeNames"]
        assert post(client, "/bind", {"PodName": "try-1", "PodNamespace": "team-a", "PodUID": "try-1",
                                      "Node": "od-1"}) == {"Error": ""}
        r = client.get("/metrics")
    assert r.status_code == 200
    return r.text


def declared_labels() -> dict[str, set[str]]:
    """{family name: label names} from the metric objects themselves, for families with no samples yet."""
    metrics = attach(build_from_snapshot(DEFAULT_SNAPSHOT)).metrics
    out = {family.name: set(getattr(family, "_labelnames", ())) for family in metrics.registry.collect()}
    for wrapper in vars(metrics).values():
        if isinstance(wrapper, MetricWrapperBase):
            out[wrapper._name] = set(wrapper._labelnames)
    return out


def exported_series(text: str, declared: dict[str, set[str]]) -> dict[str, set[str]]:
    """{series name a query can select: its label names}, from the exposition text."""
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for name in (family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))):
            series[name] = set(declared.get(family.name, ())) | ({"le"} if name.endswith("_bucket") else set())
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


@pytest.fixture(scope="module")
def series(metrics_text) -> dict[str, set[str]]:
    return exported_series(metrics_text, declared_labels())


# ---- what the dashboard asks for --------------------------------------------------------------

def parse_query(expr: str) -> tuple[set[str], list[tuple[str | None, set[str]]], set[str], set[str] | None]:
    """(metric names, [(metric or None, labels matched)], labels grouped on, labels kept by a `by`) of a
    PromQL expression or a Grafana label_values(...) query; enough PromQL for the dashboard's queries."""
    expr = STRING.sub('""', expr)
    grouped: set[str] = set()
    found = LABEL_VALUES.match(expr)
    if found:
        expr = found[1]
        grouped.add(found[2])
    expr = RANGE.sub(" ", expr)
    selectors = []
    for found in SELECTOR.finditer(expr):
        selectors.append((found[1], set(MATCHER.findall(found[2]))))
    expr = SELECTOR.sub(lambda m: f" {m[1] or ''} ", expr)
    kept: set[str] | None = None
    for found in GROUPING.finditer(expr):
        labels = {label.strip() for label in found[2].split(",") if label.strip()}
        grouped |= labels
        if found[1] == "by":
            kept = (kept or set()) | labels
    expr = GROUPING.sub(" ", expr)
    names = {name for name in IDENT.findall(expr) if name not in KEYWORDS}
    return names, selectors, grouped, kept


def queries(dashboard: dict):
    """(where, expr, legend) for every target of every panel (rows' panels too) and every query variable."""
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['id']} {panel['title']!r} {target.get('refId')}", target["expr"], \
                target.get("legendFormat", "")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            yield f"variable {variable['name']}", query["query"] if isinstance(query, dict) else query, ""


def check(dashboard: dict, series: dict[str, set[str]]) -> list[str]:
    """Every problem of the dashboard's queries against the exported series: unknown metrics, labels a
    metric does not have, legend labels the aggregation drops, outcome values no decision has."""
    outcomes = set(OUTCOMES.values()) | {"refused"}
    problems = []
    for where, expr, legend in queries(dashboard):
        names, selectors, grouped, kept = parse_query(expr)
        if not names:
            problems.append(f"{where}: no metric in {expr!r}")
        for name in sorted(names - series.keys()):
            problems.append(f"{where}: metric {name} is not exported")
        for metric, labels in selectors:
            if metric is None:
                problems.append(f"{where}: a selector without a metric name")
            elif metric in series:          # an unknown metric is reported above
                problems += [f"{where}: {metric} has no label {label}"
                             for label in sorted(labels - series[metric] - SCRAPE_LABELS)]
        shown = set(LEGEND.findall(legend))
        for label in sorted(grouped | shown):
            problems += [f"{where}: {name} has no label {label}" for name in sorted(names & series.keys())
                         if label not in series[name] | SCRAPE_LABELS]
        if kept is not None:
            problems += [f"{where}: legend shows {label}, which `by (...)` drops" for label in sorted(shown - kept)]
        problems += [f"{where}: no decision has outcome {value!r}" for value in OUTCOME.findall(expr)
                     if value not in outcomes]
    return problems


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def all_panels(dashboard: dict) -> list[dict]:
    """Rows, the panels between them and those inside collapsed rows."""
    return dashboard["panels"] + [inner for panel in dashboard["panels"] for inner in panel.get("panels", [])]


def data_panels(dashboard: dict) -> list[dict]:
    return [panel for panel in all_panels(dashboard) if panel["type"] != "row"]


# ---- the tests ------------------------------------------------------------------------------

def test_the_dashboard_is_an_importable_grafana_dashboard(dashboard):
    """What Grafana's import and the sidecar need: a uid, a title, panels with unique ids and a place on the grid."""
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    assert dashboard.get("id") is None               # an id would tie it to the Grafana it was exported from
    ids = [panel["id"] for panel in all_panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    assert {p["title"] for p in dashboard["panels"] if p["type"] == "row"} >= {
        "Quota", "Workloads", "Decisions", "Verbs", "Health"}
    for panel in data_panels(dashboard):
        assert panel["type"] in {"timeseries", "stat", "bargauge", "table", "gauge"}, panel["type"]
        assert panel.get("description", "").strip(), f"panel {panel['title']!r} has no description"
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            assert target.get("expr", "").strip() and target.get("refId"), (panel["title"], target)
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


def test_every_panel_and_query_uses_the_datasource_variable(dashboard):
    """One Prometheus chosen at the top: no panel pinned to the uid of a data source of another Grafana."""
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in data_panels(dashboard):
        assert panel["datasource"]["uid"] in DATASOURCE_UIDS, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] in DATASOURCE_UIDS, (panel["title"], target["refId"])
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] in DATASOURCE_UIDS, variable["name"]


def test_the_cluster_queue_variable_filters_every_per_queue_query(dashboard, series):
    """Multi-valued with All (as a regex, so queries use =~), listed from quotient_pending_workloads; a query over
    a metric with a ClusterQueue label that ignored the variable would show every queue whatever is chosen."""
    variable = next(v for v in dashboard["templating"]["list"] if v["name"] == "cluster_queue")
    query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
    assert query == "label_values(quotient_pending_workloads, cluster_queue)"
    assert variable["multi"] and variable["includeAll"] and variable["allValue"] == ".*"
    used = 0
    for where, expr, _ in queries(dashboard):
        names = parse_query(expr)[0] & series.keys()
        per_queue = any(series[name] & {"cluster_queue", "preempting_cluster_queue"} for name in names)
        if per_queue and not where.startswith("variable cluster_queue"):
            assert re.search(r'(?:preempting_)?cluster_queue\s*=~\s*"\$cluster_queue"', expr), where
            used += 1
    assert used >= 10
    text = "\n".join([expr for _, expr, _ in queries(dashboard)] + [p["title"] for p in data_panels(dashboard)])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            name = variable["name"]
            assert f"${name}" in text or f"${{{name}}}" in text, f"${name} is not used"


def test_the_server_was_driven_so_decisions_and_latency_have_samples(metrics_text):
    """The label check reads labels from samples: without traffic the decision family would have none."""
    families = {f.name: f for f in text_string_to_metric_families(metrics_text)}
    outcomes = {s.labels["outcome"] for s in families["quotient_decisions"].samples}
    assert outcomes >= {"admitted", "refused", "bound"}
    counts = {s.labels["verb"]: s.value for s in families["quotient_extender_request_duration_seconds"].samples
              if s.name.endswith("_count")}
    assert counts["filter"] == 2 and counts["bind"] == 1


def test_every_query_names_exported_metrics_and_their_labels(dashboard, series):
    """The point of the file: nothing on the dashboard asks for a series or a label Quotient does not export,
    and every family the issue asks for is shown."""
    assert check(dashboard, series) == []
    metrics = set().union(*(parse_query(expr)[0] for _, expr, _ in queries(dashboard)))
    for wanted in ("quotient_cluster_queue_nominal_quota", "quotient_cluster_queue_resource_reservation",
                   "quotient_cluster_queue_borrowing_limit", "quotient_pending_workloads",
                   "quotient_reserving_active_workloads", "quotient_admitted_active_workloads",
                   "quotient_decisions_total", "quotient_preempted_workloads_total",
                   "quotient_evicted_workloads_total", "quotient_extender_request_duration_seconds_bucket",
                   "quotient_watch_errors_total", "quotient_eviction_failures_total",
                   "quotient_loop_seconds_since_round", "quotient_admission_wait_time_seconds_bucket",
                   "quotient_admitted_workloads_total"):
        assert wanted in metrics, f"the dashboard shows nothing of {wanted}"


def test_the_checker_reports_a_misspelled_metric_and_unknown_labels(dashboard, series):
    """The check above can fail: the same dashboard with one metric misspelled, a matcher, a grouping and a
    legend on labels that do not exist, and a counter without _total, is reported on each."""
    broken = copy.deepcopy(dashboard)
    targets = [t for p in data_panels(broken) for t in p["targets"]]
    pending = next(t for t in targets if "quotient_pending_workloads{" in t["expr"])
    pending["expr"] = pending["expr"].replace("quotient_pending_workloads", "quotient_pending_workload")
    evictions = next(t for t in targets if "quotient_evicted_workloads_total" in t["expr"])
    evictions["expr"] = evictions["expr"].replace('cluster_queue=~"', 'clusterqueue=~"')
    latency = next(t for t in targets if "quotient_extender_request_duration_seconds_bucket" in t["expr"])
    latency["expr"] = latency["expr"].replace("by (verb, le)", "by (verb, le, node)")
    latency["legendFormat"] = "{{verb}} {{pod}}"
    decisions = next(t for t in targets if "quotient_decisions_total" in t["expr"])
    decisions["expr"] = decisions["expr"].replace("quotient_decisions_total", "quotient_decisions")
    problems = "\n".join(check(broken, series))
    assert "metric quotient_pending_workload is not exported" in problems
    assert "quotient_evicted_workloads_total has no label clusterqueue" in problems
    assert "quotient_extender_request_duration_seconds_bucket has no label node" in problems
    assert "quotient_extender_request_duration_seconds_bucket has no label pod" in problems
    assert "metric quotient_decisions is not exported" in problems
    assert len(check(broken, series)) >= 5


def test_the_query_parser_sees_through_strings_ranges_and_functions():
    names, selectors, grouped, kept = parse_query(
        'histogram_quantile(0.99, sum by (le, verb) (rate(m_bucket{verb=~"filter|bind", x!="a,b}"}[$__rate_interval])))'
        ' / on (verb) group_left () clamp_min(other_total, 1e3)')
    assert names == {"m_bucket", "other_total"}
    assert selectors == [("m_bucket", {"verb", "x"})]
    assert grouped == {"le", "verb"} and kept == {"le", "verb"}
    assert parse_query('label_values(q{a="$b"}, cq)')[:3] == ({"q"}, [("q", {"a"})], {"cq"})
