"""GET /ui routes: the quota tree, one ClusterQueue or Cohort, one pod, the decisions journal, and the static
files. Each page renders the view its /debug twin answers as JSON; a name that is not known is
a 404 page saying so and what there is."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from ..observe.podview import pod_view
from ..observe.topology_view import topologies_view
from ..observe.view_query import DebugError, asked_decisions, build_queue_view
from ..observe.views import PENDING_SHOWN, NotFound, queues_view
from . import bars

HERE = Path(__file__).parent
STATIC = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
# Only this origin's own files, no inline script or style, no framing, no form posted anywhere.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
REFRESH_SECONDS = 3


def segment(value: object) -> str:
    """One path segment of a link, whatever the name holds (a learned pod's name is the caller's)."""
    return quote(str(value), safe="")


def pod_path(key: str) -> str:
    """namespace/name of a pod key, each part a path segment of its own."""
    namespace, _, name = str(key).partition("/")
    return f"{segment(namespace)}/{segment(name)}"


def pod_link(key: str) -> str:
    return f"/ui/pods/{pod_path(key)}"


def templates() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True, auto_reload=False)
    env.filters.update(segment=segment, pod_link=pod_link, pod_path=pod_path)
    env.globals.update(refresh_seconds=REFRESH_SECONDS)
    return env


@dataclass
class TreeNode:
    """A Cohort or ClusterQueue of the tree page, its rows with their bars, and its children."""
    view: dict
    rows: list[tuple[dict, bars.Bar]]
    children: list["TreeNode"] = field(default_factory=list)


def with_bars(view: dict, scale: dict[str, float]) -> list[tuple[dict, bars.Bar]]:
    return [(row, bars.bar(row, scale.get(row["resource"], 1.0))) for row in view["resources"]]


def tree(view: dict) -> list[TreeNode]:
    """The /debug/queues view as nested nodes: root Cohorts with their child Cohorts and ClusterQueues, then
    ClusterQueues in no Cohort (or in one the tree does not hold: an inactive queue is placed at the root
    rather than lost). ClusterQueues share one scale per resource, Cohorts another."""
    queue_scale = bars.scales([r for q in view["clusterQueues"] for r in q["resources"]])
    cohort_scale = bars.scales([r for c in view["cohorts"] for r in c["resources"]])
    queues = {q["name"]: q for q in view["clusterQueues"]}
    cohorts = {c["name"]: c for c in view["cohorts"]}
    placed: set[str] = set()

    def cohort_node(name: str, seen: frozenset) -> TreeNode:
        c = cohorts[name]
        node = TreeNode(c, with_bars(c, cohort_scale))
        for child in c["cohorts"]:
            if child in cohorts and child not in seen:
                node.children.append(cohort_node(child, seen | {child}))
        for q in c["clusterQueues"]:
            if q in queues and q not in placed:
                placed.add(q)
                node.children.append(TreeNode(queues[q], with_bars(queues[q], queue_scale)))
        return node

    roots = [cohort_node(name, frozenset({name})) for name, c in cohorts.items()
             if c["parent"] is None or c["parent"] not in cohorts]
    roots += [TreeNode(q, with_bars(q, queue_scale)) for name, q in queues.items() if name not in placed]
    return roots


def ui_router(scheduler) -> APIRouter:
    state, journal = scheduler.state, scheduler.journal
    env = templates()
    files = {name: (HERE / "static" / name).read_bytes() for name in STATIC}
    router = APIRouter(prefix="/ui")

    def page(template: str, status: int = 200, **values) -> HTMLResponse:
        return HTMLResponse(env.get_template(template).render(**values), status_code=status, headers=HEADERS)

    def not_found(e: NotFound) -> HTMLResponse:
        return page("missing.html", 404, title="Not found", error=e.message, known=e.known or [])

    @router.get("")
    @router.get("/")
    async def tree_page() -> HTMLResponse:
        view = queues_view(state)
        return page("tree.html", title="Quota tree", roots=tree(view))

    @router.get("/queues/{name}")
    async def queue_page(name: str) -> HTMLResponse:
        try:
            view = await build_queue_view(state, journal, name, PENDING_SHOWN)
        except NotFound as e:
            return not_found(e)
        scale = bars.scales(view["resources"])
        return page("queue.html", title=f"{view['kind']} {name}", q=view, rows=with_bars(view, scale))

    @router.get("/pods/{namespace}/{name:path}")
    async def pod_page(namespace: str, name: str) -> HTMLResponse:
        try:
            view = pod_view(state, journal, namespace, name, scheduler.actions, scheduler.refusals)
        except NotFound as e:
            return not_found(e)
        return page("pod.html", title=f"Pod {view['pod']}", p=view)

    @router.get("/topologies")
    async def topologies_page() -> HTMLResponse:
        return page("topologies.html", title="Topologies", t=topologies_view(state))

    @router.get("/decisions")
    async def decisions_page(request: Request) -> HTMLResponse:
        try:
            d = asked_decisions(journal, request.query_params)
        except DebugError as e:
            return page("missing.html", e.status, title="Decisions", error=e.view["error"], known=[])
        asked = urlencode({"limit": d["limit"], **{k: d[k] for k in ("queue", "pod") if d[k]}})
        return page("decisions.html", title="Decisions", d=d, twin=f"/debug/decisions?{asked}")

    @router.get("/decisions/rows")
    async def decision_rows(request: Request) -> HTMLResponse:
        """The journal table's rows alone, for ui.js to swap in without reloading the page."""
        try:
            return page("decision_rows.html", d=asked_decisions(journal, request.query_params))
        except DebugError as e:
            return HTMLResponse(f"<!-- {e.status} -->", status_code=e.status, headers=HEADERS)

    @router.get("/static/{name}")
    async def static(name: str) -> Response:
        if name not in STATIC:
            return Response(b"not found\n", status_code=404, media_type="text/plain")
        return Response(files[name], media_type=STATIC[name],
                        headers={**HEADERS, "Cache-Control": "max-age=300"})

    return router
