"""Follow one filter request through Quotient's modules, from the HTTP entry to its answer.

Why: issue 35 asks how far a raw filter body travels (how many modules it enters, how often it climbs back
up a layer). This traces every Python call made while one ASGI filter request is served against the bundled
demo snapshot, from the request's arrival to the last byte of its answer, and counts, over the calls that land
in app/:

- modules entered: distinct app/ modules in which code ran;
- stays: calls within the module that made them;
- moves between rooms: calls from one package of app/ into another;
- climbs: calls from a lower layer into a higher one (layers, top first: cli/sim/leader, api/ui,
  scheduler, sync/act/observe/journal/refusals, state, core, objects/config);
- returns: calls into a module the request had already entered and left.

A call made from outside app/ (the standard library, orjson, a callback) is attributed to the nearest app/
frame below it. What runs after the answer is sent (the request's books: journal, metrics, logs, written after
the answer by scheduler.outcome.book_later; the request-duration histogram) is not on the path: its modules are
listed apart. Usage: python tests/bench/trace_filter.py [--pod NAME] [--verbose]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LAYERS = [("cli", "sim", "leader", "leader_label"), ("api", "ui"), ("scheduler", "extender"),
          ("sync", "act", "observe", "journal", "refusals"), ("state",), ("core",), ("objects", "config", "version")]
FLOOR = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}
APP = str(ROOT / "app") + "/"


def module_of(filename: str) -> str | None:
    """app/core/preemption/oracle.py -> core/preemption/oracle; None outside app/."""
    if not filename.startswith(APP):
        return None
    return filename[len(APP):].removesuffix(".py").removesuffix("/__init__")


def room_of(module: str) -> str:
    return module.split("/", 1)[0]


class Tracer:
    """Counts the calls between app/ modules made while it is installed."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.entered: list[str] = []
        self.stays = self.moves = self.climbs = self.returns = 0
        self.path: list[str] = []
        self.answered = False          # the answer's last byte is sent: what runs now is off the path
        self.after: list[str] = []     # modules entered after the answer

    def __call__(self, frame, event, arg):
        if event != "call":
            return None
        callee = module_of(frame.f_code.co_filename)
        if callee is None:
            return None
        if self.answered:
            if callee not in self.after:
                self.after.append(callee)
            return None
        caller, back = None, frame.f_back
        while back is not None and caller is None:
            caller = module_of(back.f_code.co_filename)
            back = back.f_back
        if callee not in self.entered:
            self.entered.append(callee)
        elif caller is not None and callee != caller:
            self.returns += 1
        if caller is None or callee == caller:
            self.stays += caller is not None
            return None
        if room_of(callee) != room_of(caller):
            self.moves += 1
        if FLOOR.get(room_of(callee), 9) < FLOOR.get(room_of(caller), 9):
            self.climbs += 1
            if self.verbose:
                print(f"  climb {caller} -> {callee}.{frame.f_code.co_name}")
        self.path.append(f"{caller} -> {callee}.{frame.f_code.co_name}")
        return None


async def asgi_post(app, path: str, body: bytes, answered=lambda: None) -> tuple[int, bytes]:
    """One POST through the ASGI app, as uvicorn would make it; answered() is called once the answer's last byte
    is sent."""
    sent, out = False, {"status": 0, "body": b""}

    async def receive():
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
        elif message["type"] == "http.response.body":
            out["body"] += message.get("body", b"")
            if not message.get("more_body", False):
                answered()

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8888)}
    await app(scope, receive, send)
    return out["status"], out["body"]


def pending_pod(snapshot: Path, name: str | None) -> dict:
    import yaml
    for doc in yaml.safe_load_all(snapshot.read_text()):
        if doc and doc.get("kind") == "Pod" and not doc.get("spec", {}).get("nodeName"):
            if name is None or doc["metadata"]["name"] == name:
                return doc
    raise SystemExit(f"no pending pod {name or ''} in {snapshot}")


async def trace(pod_name: str | None = None, verbose: bool = False) -> tuple[Tracer, int, bytes, str]:
    """One filter request for the demo snapshot's pending pod pod_name (default: the first), traced after a
    warm-up request: (the tracer, the HTTP status, the answer, the pod's name)."""
    from app.api.app import create_app
    from app.cli import build_from_snapshot
    snapshot = ROOT / "app" / "data" / "demo-snapshot.yaml"
    served = build_from_snapshot(str(snapshot))
    app = create_app(served)
    state = getattr(served, "state", None)
    nodes = sorted(state.nodes) if state is not None else []
    pod = pending_pod(snapshot, pod_name)
    pod.setdefault("metadata", {}).setdefault("uid", f"uid-{pod['metadata']['name']}")
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": nodes})
    await asgi_post(app, "/filter", body)   # warm: imports, caches
    await asyncio.sleep(0)                  # and its books, written after its answer
    tracer = Tracer(verbose)

    def answered() -> None:
        tracer.answered = True

    profile, previous = sys.getprofile(), sys.gettrace()
    sys.setprofile(None)
    sys.settrace(tracer)
    try:
        status, answer = await asgi_post(app, "/filter", body, answered)
        await asyncio.sleep(0)              # the books written after the answer, on the event loop
    finally:
        sys.settrace(previous)
        sys.setprofile(profile)
    return tracer, status, answer, pod["metadata"]["name"]


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pod", help="the pending pod of the demo snapshot to filter (default: the first)")
    ap.add_argument("--verbose", action="store_true", help="print every climb and the call path")
    args = ap.parse_args()
    tracer, status, answer, name = await trace(args.pod, args.verbose)
    print(f"filter {name}: HTTP {status}, answer {answer[:160].decode(errors='replace')}")
    print(f"modules entered: {len(tracer.entered)}  ({', '.join(tracer.entered)})")
    print(f"stays: {tracer.stays}  moves between rooms: {tracer.moves}  climbs back up: {tracer.climbs}  "
          f"returns to a module already left: {tracer.returns}")
    print(f"after the answer: {len(tracer.after)} modules ({', '.join(tracer.after)})")
    if args.verbose:
        print("\n".join(tracer.path))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
