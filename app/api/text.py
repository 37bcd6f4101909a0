"""The /debug views as aligned text tables a person reads in a terminal (?format=text).

Columns are left-aligned and separated by three spaces, as kubectl prints them;
an empty value is "-". Quantities arrive already in human units from the views.
"""
from __future__ import annotations

import re

GAP = "   "
# What a terminal would obey instead of print: C0 and C1 controls (ESC starts colour, cursor and
# title sequences) and the bidirectional overrides that reorder a line. Newline stays.
_UNPRINTABLE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """The text with every control character taken from names and reasons shown as an escape (ESC -> \\x1b)."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def cell(value: object) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    return str(value)


def table(headers: list[str], rows: list[list], indent: str = "") -> str:
    """Aligned columns; the last column is not padded (it may hold a long reason)."""
    cells = [headers] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        padded = [c.ljust(w) for c, w in zip(r[:-1], widths)] + [r[-1]]
        lines.append(indent + GAP.join(padded).rstrip())
    return "\n".join(lines)


def fields(pairs: list[tuple[str, object]]) -> str:
    """key: value lines, the values aligned."""
    width = max(len(k) for k, _ in pairs) + 1
    return "\n".join(f"{(k + ':').ljust(width)} {cell(v)}" for k, v in pairs)


RESOURCE_HEADERS = ["FLAVOR", "RESOURCE", "NOMINAL", "BORROWING-LIMIT", "LENDING-LIMIT", "USAGE", "RESERVED",
                    "BORROWED", "LENDABLE", "AVAILABLE"]


def _resource_cells(r: dict) -> list:
    return [r["flavor"], r["resource"], r["nominal"], r["borrowingLimit"], r["lendingLimit"], r["usage"],
            r["reserved"], r["borrowed"], r["lendable"], r["available"]]


def render_queues(view: dict) -> str:
    out = []
    if view["cohorts"]:
        out.append(table(["COHORT", "PARENT", "CLUSTERQUEUES", "COHORTS", "WEIGHT", "SHARE"], [
            [c["name"], c["parent"], c["clusterQueues"], c["cohorts"], c["fairSharing"]["weight"],
             c["fairSharing"]["share"]] for c in view["cohorts"]]))
    out.append(table(["CLUSTERQUEUE", "COHORT", "STATUS", "STRATEGY", "PENDING", "RESERVING", "ADMITTED", "WEIGHT",
                      "SHARE"], [
        [q["name"], q["cohort"], q["status"], q["queueingStrategy"], q["pending"], q["reserving"], q["admitted"],
         q["fairSharing"]["weight"], q["fairSharing"]["share"]] for q in view["clusterQueues"]]))
    rows = [[q["name"], *_resource_cells(r)] for q in view["clusterQueues"] for r in q["resources"]]
    rows += [[f"cohort/{c['name']}", *_resource_cells(r)] for c in view["cohorts"] for r in c["resources"]]
    out.append(table(["QUEUE", *RESOURCE_HEADERS], rows))
    return "\n\n".join(out) + "\n"


def render_queue(view: dict) -> str:
    if view["kind"] == "Cohort":
        head = fields([("Cohort", view["name"]), ("Parent", view["parent"]), ("ClusterQueues", view["clusterQueues"]),
                       ("Cohorts", view["cohorts"]), ("Weight", view["fairSharing"]["weight"]),
                       ("Share", view["fairSharing"]["share"]), ("Pending", view["pending"])])
        return head + "\n\n" + table(RESOURCE_HEADERS, [_resource_cells(r) for r in view["resources"]]) + "\n"
    fs = view["fairSharing"]
    out = [fields([
        ("ClusterQueue", view["name"]), ("Cohort", view["cohort"]),
        ("Status", view["status"] + (f" ({view['statusReason']})" if view["statusReason"] else "")),
        ("Strategy", view["queueingStrategy"]), ("Namespaces", view["namespaceSelector"]),
        ("LocalQueues", view["localQueues"]), ("Preemption", view["preemption"]),
        ("Share", f"{fs['share']} (weight {cell(fs['weight'])}" + (f", dominant {fs['dominantResource']})"
                                                              if fs["dominantResource"] else ")")),
        ("Pods", f"{view['pending']} pending, {view['reserving']} reserving, {view['admitted']} admitted"),
    ])]
    out.append(table(RESOURCE_HEADERS, [_resource_cells(r) for r in view["resources"]]))
    pending = view["pendingPods"]
    out.append("Pending pods in queue order:\n" + (table(
        ["#", "POD", "PRIORITY", "REQUESTS", "RULE", "WHY IT WAITS"],
        [[p["position"], p["pod"], p["priority"], p["requests"], p["rule"], p["why"]] for p in pending], "  ")
        if pending else "  none") + (f"\n  {view['pendingNote']}" if view.get("pendingNote") else ""))
    if view["reservations"]:
        out.append("Reservations (passed filter, waiting for bind):\n" + table(
            ["POD", "FLAVORS", "EXPIRES-IN"],
            [[r["pod"], r["flavors"], f"{r['expiresIn']:.1f}s"] for r in view["reservations"]], "  "))
    out.append("Admitted pods:\n" + (table(
        ["POD", "NODE", "PRIORITY", "FLAVORS"],
        [[a["pod"], a["node"], a["priority"], a["flavors"]] for a in view["admittedPods"]], "  ")
        if view["admittedPods"] else "  none") + (f"\n  {view['admittedNote']}" if view.get("admittedNote") else ""))
    for side, entries in view.get("preemptions", {}).items():
        out.append(f"Preemptions {side}:\n" + (table(
            ["AT", "VERB", "PREEMPTOR", "CLUSTERQUEUE", "VICTIMS"],
            [[e["at"], e["verb"], e["pod"], e.get("queue"), e.get("victims")] for e in entries], "  ")
            if entries else "  none recently"))
    ready = view.get("podsReady", {})
    if ready.get("enabled"):
        out.append("waitForPodsReady, admitted and not all Ready:\n" + (table(
            ["WORKLOAD", "PODS", "ADMITTED-AT", "UNREADY-AT"],
            [[w["workload"], w["pods"], w["admittedAt"], w["unreadyAt"]] for w in ready["waiting"]], "  ")
            if ready["waiting"] else "  none"))
        out.append("waitForPodsReady, requeued:\n" + (table(
            ["WORKLOAD", "EVICTIONS", "BACKOFF-UNTIL", "DEACTIVATED"],
            [[w["workload"], w["count"], w["backoffUntil"], w["deactivated"]] for w in ready["requeued"]], "  ")
            if ready["requeued"] else "  none"))
    return "\n\n".join(out) + "\n"


def _decision_rows(decisions: list[dict]) -> list[list]:
    rows = []
    for d in decisions:
        detail = d.get("reason") or ""
        if not detail and d.get("flavors"):
            detail = "flavors " + cell(d["flavors"])
            if "nodes" in d:
                detail += f"; {d['nodes']} of {d.get('offered')} nodes"
        if d.get("node") and d.get("verb") != "filter":
            detail = f"node {d['node']}" + (f"; {detail}" if detail else "")
        rows.append([d["at"], d["verb"], d["pod"], d.get("queue"), d["outcome"], detail])
    return rows


def render_decisions(view: dict) -> str:
    head = f"{view['count']} decision(s), newest first (limit {view['limit']}, ring of {view['buffer']})"
    if view.get("clamped"):
        head += f"; {view['clamped']}"
    body = table(["TIME", "VERB", "POD", "QUEUE", "OUTCOME", "REASON"], _decision_rows(view["decisions"]))
    return head + "\n" + body + "\n"


def _decision_fields(d: dict) -> list[tuple[str, object]]:
    pairs = [("Rule", d["rule"]), ("Answer", d["answer"]), ("ClusterQueue", d["clusterQueue"])]
    if d["admit"]:
        pairs += [("Flavors", d["flavors"]), ("Borrowing", d["borrowing"])]
    else:
        pairs.append(("Reason", d["reason"]))
    if d.get("note"):
        pairs.append(("Note", d["note"]))
    return pairs


def render_pod(view: dict) -> str:
    pairs = [("Pod", view["pod"]), ("Status", f"{view['status']}: {view['statusDetail']}")]
    for key, label in (("localQueue", "LocalQueue"), ("clusterQueue", "ClusterQueue"), ("priority", "Priority"),
                       ("requests", "Requests"), ("node", "Node")):
        if key in view:
            pairs.append((label, view[key]))
    if view.get("charge"):
        pairs.append(("Charge", f"{view['charge']['clusterQueue']} {cell(view['charge']['flavors'])}"))
        if view["charge"].get("admittedAt"):
            pairs.append(("Admitted", f"{view['charge']['admittedAt']} (from {view['charge']['admittedAtSource']})"))
    if view.get("reservation"):
        r = view["reservation"]
        pairs.append(("Reservation", f"{r['clusterQueue']} {cell(r['flavors'])}, expires in {r['expiresIn']:.1f}s"))
    out = [fields(pairs)]
    if view.get("now"):
        now = view["now"]
        out.append("Now:\n" + _indent(fields(_decision_fields(now) + [("Pending ahead", now.get("pendingAhead"))])))
    f = view.get("filter")
    if f:
        lines = [("At", f["at"]), ("Outcome", f["outcome"]), ("Answer", f["answer"]), ("Offered", f["offered"]),
                 ("Passing", f["passing"]), ("Flavor chosen", f["flavorChosen"]), ("Borrowing", f["borrowing"])]
        block = fields(lines)
        if f["flavorsTried"]:
            block += "\nFlavors tried:\n" + "\n".join(f"  - {t}" for t in f["flavorsTried"])
        if f["nodesRejected"]:
            block += "\nNodes rejected:\n" + table(["NODES", "REASON"],
                                                  [[g["nodes"], g["reason"]] for g in f["nodesRejected"]], "  ")
        out.append("Last filter:\n" + _indent(block))
    if view.get("bind"):
        b = view["bind"]
        out.append("Last bind:\n" + _indent(fields([("At", b["at"]), ("Outcome", b["outcome"]), ("Node", b["node"]),
                                                    ("Reason", b["reason"])])))
    if view.get("topology"):
        out.append(render_pod_topology(view["topology"]))
    out.append(render_preemption(view["preemption"]))
    if view.get("preemptedBy"):
        v = view["preemptedBy"]
        out.append("Preempted by:\n" + _indent(fields([
            ("Preemptor", v.get("preemptor")), ("Reason", v.get("reason")), ("Node", v.get("node")),
            ("Evicted", v.get("evicted")), ("At", v.get("at")), ("Message", v.get("message"))])))
    if view.get("eviction"):
        e = view["eviction"]
        out.append(f"Eviction: {e['at']} {e['reason']}")
    if view.get("refusal"):
        r = view["refusal"]
        out.append("Refusal:\n" + _indent(fields([
            ("Rule", r["rule"]), ("At", r["at"]), ("Answer", r["answer"]), ("Cleared", r["clearedAt"] or "not yet"),
            ("Because", r["clearedBecause"]), ("Tried again", r["retriedAt"] or "not yet")])))
    if view.get("evictionWrite"):
        w = view["evictionWrite"]
        out.append("Eviction being written:\n" + _indent(fields([
            ("In flight", w["inFlight"]), ("Reason", w.get("reason")), ("Attempts", w.get("attempts")),
            ("Last error", w.get("lastError")), ("Retry in", w.get("retryIn"))])))
    out.append(f"Gang: {cell(view['gang'])}\nBackoff: {cell(view['backoff'])}")
    out.append("Decisions, newest first:\n" + table(["TIME", "VERB", "POD", "QUEUE", "OUTCOME", "REASON"],
                                                   _decision_rows(view["decisions"]), "  ")
               if view["decisions"] else "Decisions: none recorded")
    return "\n\n".join(out) + "\n"


TABLED = ("victims", "whyNot", "hold")


def render_preemption(p: dict) -> str:
    if not p.get("considered"):
        return f"Preemption: none ({p['note']})"
    pairs = [(k[:1].upper() + k[1:], v) for k, v in p.items() if k not in ("considered", *TABLED)]
    parts = [fields(pairs)] if pairs else []      # a held group member: its hold alone, no attempt of its own
    if p.get("victims"):
        parts.append("Victims per node:\n" + table(["NODE", "VICTIMS"], [[n, v] for n, v in p["victims"].items()],
                                                   "  "))
    if p.get("whyNot"):
        parts.append("Why other nodes lost:\n" + table(["NODE", "REASON"], [[n, r] for n, r in p["whyNot"].items()],
                                                       "  "))
    if p.get("hold"):
        h = p["hold"]
        parts.append(f"Hold: node {h['node']} kept for it, victims {cell(h['victims'])}, waiting for "
                     f"{cell(h['waitingFor'])}, expires in {h['expiresIn']:.1f}s")
    block = "\n".join(parts)
    return "Preemption:\n" + _indent(block)


def render_explain(view: dict) -> str:
    pairs = [("Pod", view["pod"]), ("LocalQueue", view["localQueue"]), ("Priority", view["priority"]),
             ("Requests", view["requests"])] + _decision_fields(view["decision"])
    if "pendingAhead" in view:
        pairs.append(("Pending ahead", view["pendingAhead"]))
    if "nodes" in view:
        n = view["nodes"]
        pairs.append(("Nodes", f"{n['passing']} of {n['offered']} ({n['offeredFrom']}) pass: {cell(n['names'])}"))
    if view.get("note"):
        pairs.append(("Note", view["note"]))
    out = fields(pairs)
    tried = view["decision"]["flavorsTried"]
    if tried:
        out += "\nFlavors tried:\n" + "\n".join(f"  - {t}" for t in tried)
    return out + "\n"


def render_error(view: dict) -> str:
    out = f"error: {view['error']}"
    if view.get("known"):
        out += f"\nknown: {', '.join(view['known'])}"
    return out + "\n"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def render_pod_topology(t: dict) -> str:
    """A pod's topology request: its domain, and why each other domain of its level does not hold it."""
    pairs = [("Asked", t["asked"])]
    if t.get("problem"):
        return "Topology:\n" + _indent(fields(pairs + [("Problem", t["problem"])]))
    r = t["request"]
    pairs += [("Topology", t["topology"]), ("Request", f"{r['mode']} {r['level'] or t['level']}, {r['pods']} pod(s)"
               + (f", slices of {r['sliceSize']} in {r['sliceLevel']}" if r["sliceLevel"] else "")),
              ("Domain", ", ".join(t["domain"]) if t["domain"] else "none yet")]
    rows = [[d["domain"], d["nodes"], d["holds"], cell(d["free"]), d["why"]] for d in t["domains"]]
    more = f"\n  ({t['domainCount'] - len(rows)} more)" if t["domainCount"] > len(rows) else ""
    return ("Topology:\n" + _indent(fields(pairs)) + f"\n  Domains at {t['level']}:\n"
            + table(["DOMAIN", "NODES", "HOLDS", "FREE", "WHY"], rows, "    ") + more)


def render_topologies(view: dict) -> str:
    """/debug/topologies: each Topology's domains per level with their free room."""
    if not view["topologies"]:
        return "No Topology objects (kueue.x-k8s.io Topology) are known.\n"
    out = []
    for t in view["topologies"]:
        out.append(f"Topology {t['name']}: levels {', '.join(t['levels'])}; flavors {', '.join(t['flavors']) or '-'}; "
                   f"{t['nodes']} node(s)")
        for level, domains in t["domains"].items():
            rows = [[d["domain"], d["nodes"], cell(d["free"])] for d in domains["shown"]]
            more = f"\n    ({domains['count'] - len(rows)} more)" if domains["count"] > len(rows) else ""
            out.append(f"  {level}: {domains['count']} domain(s)\n" + table(["DOMAIN", "NODES", "FREE"], rows, "    ")
                       + more)
    return "\n".join(out) + "\n"
