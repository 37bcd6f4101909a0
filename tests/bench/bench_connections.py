"""Slow-loris connections and a ConversionReview flood against a real `quotient serve` (issue 31, items 9 and 10).

    .venv/bin/python tests/bench/bench_connections.py [--conns N] [--attack S] [--idle S] [--flood S]

Not a pytest test (tests/bench/conftest.py keeps pytest out; tests/test_bench_connections_smoke.py runs it tiny).
It starts `quotient serve` (the bundled demo snapshot) with --conversion-port and --view-port and the default
connection limits (app/api/connections.py: 4,096 connections per port, 30 s idle, 10 s read), then:

  1. slow-loris: on each of the three ports, --conns idle connections (connected, nothing sent) and --conns
     half-sent ones (a request line and part of a header, then one byte every 2 s), kept at that number for
     --attack seconds (any the server closes is opened again, every 0.5 s). Meanwhile a prober opens a new
     connection for each probe, every 50 ms in turn: /readyz and a filter on the main port, a valid
     ConversionReview on the conversion port, /debug/queues on the view port. Prints per port the probes,
     failures, p50/p99/max latency, and how many attack connections the server closed;
  2. conversion flood: filter round trips on one kept-alive connection for --idle seconds (idle), then the same
     while 4 connections send the largest ConversionReview the limits admit (32 MiB less 4 KiB, under a million
     JSON items), one after another, for --flood seconds. Prints filter p50/p99 idle and under the flood, their
     ratio, and the VmRSS of the server (and of its conversion worker) before and at most during the flood;
  3. the largest filter body the limits admit (15,000 node names of 253 characters) and the 60 MB one of the
     issue (100,000 names of 600 characters): status and time to answer each (what it can hold the loop for).

Exit status: 0 when every probe and review was answered right and the goals are met (slow-loris probes within
50 ms at p99 of /readyz and filter, flood p99 within 2x idle, RSS growth under 128 MiB); 3 when only a latency or
memory goal is missed (a loaded machine); 1 on a wrong answer or a failed probe.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from builders import ClusterQueue, FlavorQuotas, Pod, extender_args  # noqa: E402
from serving import QUOTIENT_BIN, free_port, stop_process  # noqa: E402

from app.api.convert import CONVERT_BODY  # noqa: E402

HALF = b"POST /filter HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
NODES = ["od-1", "od-2", "od-3", "od-4", "gpu-1", "gpu-2", "spot-1", "spot-2"]


def filter_body(i: int = 0) -> bytes:
    pod = Pod(f"probe-{i}", "team-a").queue("user-queue").cpu("100m").wire()
    return orjson.dumps(extender_args(pod, NODES))


def review(size: int) -> bytes:
    """A valid v1beta1 -> v1beta2 ConversionReview of about `size` bytes (few JSON items per byte)."""
    cq = ClusterQueue("cq").cohort("co").resource_group(FlavorQuotas("f").resource("cpu", "4")).obj()
    cq["metadata"]["annotations"] = {"note": "x" * 2000}
    one = len(orjson.dumps(cq)) + 1
    n = max(1, (size - 200) // one)
    while True:
        objects = [{**cq, "metadata": {**cq["metadata"], "name": f"cq-{i:07d}"}} for i in range(n)]
        body = orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                             "request": {"uid": "bench", "desiredAPIVersion": "kueue.x-k8s.io/v1beta2",
                                         "objects": objects}})
        if len(body) <= size or n == 1:
            return body
        n = max(1, int(n * size / len(body)) - 1)


def request(method: str, path: str, body: bytes = b"", close: bool = True) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + (b"Connection: close\r\n" if close else b"") + b"Content-Type: application/json\r\n\r\n" + body


def read_response(s: socket.socket) -> tuple[int, bytes]:
    """(status, body) of one response with a Content-Length."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} bytes")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    parts, got = [rest], len(rest)
    while got < length:
        chunk = s.recv(min(1 << 20, length - got))
        if not chunk:
            raise ConnectionError("closed in the body")
        parts.append(chunk)
        got += len(chunk)
    return int(head.split(b" ", 2)[1]), b"".join(parts)


def once(port: int, method: str, path: str, body: bytes = b"", timeout: float = 10) -> tuple[int, float]:
    """One request on a new connection: (status or 0 on failure, seconds)."""
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            try:
                s.sendall(request(method, path, body))
            except OSError:         # refused from its Content-Length: the answer is there to read
                pass
            status, _ = read_response(s)
    except OSError:
        status = 0
    return status, time.perf_counter() - started


def rss(pid: int) -> float:
    """VmRSS of pid in MiB (0 when gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


class Loris:
    """Holds `n` idle and `n` half-sent connections on each port, opening again any the server closes."""

    def __init__(self, ports: dict[str, int], n: int):
        self.ports, self.n = ports, n
        self.sel = selectors.DefaultSelector()
        self.closed = {name: 0 for name in ports}
        self.held = {(name, kind): 0 for name in ports for kind in ("idle", "half")}
        self.stop = threading.Event()

    def _open(self, name: str, kind: str) -> None:
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect_ex(("127.0.0.1", self.ports[name]))
        except OSError:
            s.close()
            return
        key = self.sel.register(s, selectors.EVENT_READ, (name, kind, [False]))
        self.held[(name, kind)] += 1
        if kind == "half":
            self.unsent.append(key)

    def run(self, held: dict) -> None:
        """Cheap per connection: a connection costs work only when it is opened, dripped (every 2 s) or closed."""
        last_drip = last_fill = 0.0
        self.unsent = []
        while not self.stop.is_set():
            now = time.monotonic()
            if now - last_fill > 0.5:
                last_fill = now
                for (name, kind), count in list(self.held.items()):
                    for _ in range(self.n - count):
                        self._open(name, kind)
            if now - last_drip > 2.0:
                last_drip = now
                due = [k for k in self.sel.get_map().values() if k.data[1] == "half"]
            else:
                due, self.unsent = self.unsent, []
            for key in due:
                sent = key.data[2]
                if key.fileobj.fileno() < 0:
                    continue
                try:
                    key.fileobj.send(b"a" if sent[0] else HALF)
                    sent[0] = True
                except BlockingIOError:
                    self.unsent.append(key)
                except OSError:
                    if sent[0]:
                        self._drop(key)
                    else:
                        self.unsent.append(key)      # still connecting
            for key, _ in self.sel.select(0.1):
                try:
                    data = key.fileobj.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self._drop(key)
        held.update(self.held)
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fileobj)
            key.fileobj.close()

    def _drop(self, key) -> None:
        name, kind, _ = key.data
        self.sel.unregister(key.fileobj)
        key.fileobj.close()
        self.held[(name, kind)] -= 1
        self.closed[name] += 1


def _attack(ports: dict[str, int], n: int, stop, results) -> None:
    """The attacker's process: holds the connections until `stop`, then sends what it held and closed."""
    loris = Loris(ports, n)
    watcher = threading.Thread(target=lambda: (stop.wait(), loris.stop.set()), daemon=True)
    watcher.start()
    held: dict = {}
    loris.run(held)
    results.send((held, loris.closed))


def probe_times(ports: dict[str, int], seconds: float):
    """Each probe in turn, every 50 ms, for `seconds`: ({probe: [seconds]}, {probe: failures}, [(at, probe, s)])."""
    probes = {("main", "/readyz"): ("GET", b""), ("main", "/filter"): ("POST", filter_body()),
              ("conversion", "/convert"): ("POST", orjson.dumps(review_body())),
              ("view", "/debug/queues"): ("GET", b"")}
    times: dict[tuple[str, str], list[float]] = {k: [] for k in probes}
    failed = {k: 0 for k in probes}
    slow = []
    started = time.monotonic()
    deadline = started + seconds
    while time.monotonic() < deadline:
        for (name, path), (method, body) in probes.items():
            status, took = once(ports[name], method, path, body)
            if status != 200:
                failed[(name, path)] += 1
            times[(name, path)].append(took)
            if took > 0.05:
                slow.append((time.monotonic() - started, f"{name} {path}", took))
            time.sleep(0.05)
    return times, failed, slow


def slow_loris(ports: dict[str, int], n: int, seconds: float) -> bool:
    # Quiet first: the same probes without an attack, for the ratio.
    quiet, _, _ = probe_times(ports, min(5.0, seconds / 2))
    # The attacker runs in a process of its own (raw non-blocking sockets, one selector), so it does not share
    # this process's GIL with the prober; on a 2-core machine it still shares the cores with the server.
    ctx = multiprocessing.get_context("fork")
    stop, (results, sent) = ctx.Event(), ctx.Pipe(duplex=False)
    attacker = ctx.Process(target=_attack, args=(ports, n, stop, sent), daemon=True)
    attacker.start()
    time.sleep(min(3.0, seconds / 3))          # the connections are open before probing starts
    times, failed, slow = probe_times(ports, seconds)
    stop.set()
    held, closed = results.recv() if results.poll(30) else ({k: 0 for k in ((p, c) for p in ports for c in
                                                                            ("idle", "half"))}, {p: 0 for p in ports})
    attacker.join(10)
    print(f"slow-loris: {n:,} idle and {n:,} half-sent connections held on each port for {seconds:g} s "
          f"(held at the end: " + ", ".join(f"{name} {held[(name, 'idle')] + held[(name, 'half')]:,}"
                                             for name in ports) + ")")
    ok = True
    for (name, path), xs in times.items():
        print(f"  {name:10} {path:14} probes {len(xs):4d}  failed {failed[(name, path)]:3d}  "
              f"p50 {pct(xs, .5):7.1f} ms  p99 {pct(xs, .99):7.1f} ms  max {max(xs) * 1000:7.1f} ms")
        ok &= failed[(name, path)] == 0
    print("  attack connections closed by the server: " + ", ".join(f"{k} {v:,}" for k, v in closed.items()))
    for (name, path), xs in times.items():
        q = quiet[(name, path)]
        print(f"  {name:10} {path:14} p99 attack/quiet: {pct(xs, .99):7.1f} / {pct(q, .99):5.1f} ms = "
              f"{pct(xs, .99) / pct(q, .99):5.2f}x")
    if slow:
        print(f"  probes over 50 ms: " + ", ".join(f"{what} {took * 1000:.0f} ms at {at:.1f} s"
                                                   for at, what, took in slow[:12]))
    worst = max(pct(times[k], .99) for k in (("main", "/readyz"), ("main", "/filter")))
    print(f"slow-loris /readyz and filter p99: {worst:.1f} ms (goal < 50 ms: {'MET' if worst < 50 else 'NOT MET'}); "
          f"every probe answered 200: {'yes' if ok else 'NO'}")
    return ok, worst < 50


def review_body() -> dict:
    cq = ClusterQueue("cq").cohort("co").resource_group(FlavorQuotas("f").resource("cpu", "4")).obj()
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "probe", "desiredAPIVersion": "kueue.x-k8s.io/v1beta2", "objects": [cq]}}


def filter_times(port: int, seconds: float, stop: threading.Event | None = None) -> list[float]:
    out = []
    body = request("POST", "/filter", filter_body(), close=False)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            s.sendall(body)
            status, _ = read_response(s)
            out.append(time.perf_counter() - started)
            assert status == 200, status
            time.sleep(0.005)
    return out


def flood(ports: dict[str, int], pid: int, idle: float, seconds: float, flooders: int, size: int,
          nice: int = 0) -> tuple[bool, bool]:
    big = review(size)
    before = rss(pid)
    idle_times = filter_times(ports["main"], idle)
    stop = threading.Event()
    halt = multiprocessing.get_context("fork").Event()
    answered, wrong = multiprocessing.get_context("fork").Value("i", 0), multiprocessing.get_context("fork").Value("i", 0)
    peak, worker_peak = [before], [0.0]

    def flooder():      # in processes of their own, so this one's GIL times only the filters
        if nice:        # kube-apiserver does not share the extender's cores: the clients yield the CPU to it
            os.nice(nice)
        while not halt.is_set():
            try:
                with socket.create_connection(("127.0.0.1", ports["conversion"]), timeout=120) as s:
                    s.sendall(request("POST", "/convert", big))
                    status, out = read_response(s)
                ok = status == 200 and b'"result":{"status":"Success"}' in out[:4096]
            except OSError:
                ok = False
            with (answered if ok else wrong).get_lock():
                (answered if ok else wrong).value += 1

    def sampler():
        while not stop.is_set():
            peak[0] = max(peak[0], rss(pid))
            worker_peak[0] = max([worker_peak[0], *(rss(c) for c in children(pid))])
            time.sleep(0.1)

    threads = [multiprocessing.get_context("fork").Process(target=flooder, daemon=True) for _ in range(flooders)]
    threads.append(threading.Thread(target=sampler, daemon=True))
    for t in threads:
        t.start()
    time.sleep(0.5)
    flood_times = filter_times(ports["main"], seconds)
    stop.set()
    halt.set()
    for t in threads:
        t.join(120)
    answered, wrong = [answered.value], [wrong.value]
    i50, i99, f50, f99 = pct(idle_times, .5), pct(idle_times, .99), pct(flood_times, .5), pct(flood_times, .99)
    growth = peak[0] - before
    print(f"conversion flood: {flooders} connections sending {len(big) / 2**20:.1f} MiB ConversionReviews for "
          f"{seconds:g} s{f' (clients at nice {nice})' if nice else ''}: {answered[0]} answered Success, "
          f"{wrong[0]} failed")
    print(f"  filter idle:  {len(idle_times):5d} round trips  p50 {i50:6.2f} ms  p99 {i99:6.2f} ms")
    print(f"  filter flood: {len(flood_times):5d} round trips  p50 {f50:6.2f} ms  p99 {f99:6.2f} ms")
    ratio = f99 / i99 if i99 else float("inf")
    print(f"  filter p99 flood/idle: {ratio:.2f}x (goal <= 2x: {'MET' if ratio <= 2 else 'NOT MET'})")
    print(f"  server VmRSS: {before:.0f} MiB before, {peak[0]:.0f} MiB at most during the flood: growth "
          f"{growth:.0f} MiB (goal < 128 MiB: {'MET' if growth < 128 else 'NOT MET'}); conversion worker VmRSS at "
          f"most {worker_peak[0]:.0f} MiB")
    return wrong[0] == 0 and answered[0] > 0, ratio <= 2 and growth < 128


def large_filters(port: int) -> bool:
    pod = Pod("large", "team-a").queue("user-queue").cpu("100m").wire()
    ok = True
    for label, n, length, want in (("largest admitted", 15_000, 253, 200), ("issue's 60 MB", 100_000, 600, 413)):
        body = orjson.dumps(extender_args(pod, [f"n{i:0{length - 1}d}" for i in range(n)]))
        status, took = once(port, "POST", "/filter", body, timeout=60)
        print(f"filter body {label}: {n:,} names of {length} characters, {len(body) / 2**20:.1f} MiB: "
              f"{status} in {took * 1000:.0f} ms")
        ok &= status == want
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conns", type=int, default=1000, help="idle and half-sent connections per port (each)")
    p.add_argument("--attack", type=float, default=20.0)
    p.add_argument("--idle", type=float, default=10.0)
    p.add_argument("--flood", type=float, default=20.0)
    p.add_argument("--flooders", type=int, default=4)
    p.add_argument("--review-bytes", type=int, default=CONVERT_BODY - 4096)
    p.add_argument("--flood-nice", type=int, default=0,
                   help="run the flooding clients at this nice value (on a 2-core machine they otherwise take the "
                        "server's CPU, which kube-apiserver on its own node would not)")
    p.add_argument("--parts", default="loris,flood,large", help="which of loris, flood, large to run")
    p.add_argument("--hold", type=float, default=0.0, help="seconds to wait after start (to attach a profiler)")
    args = p.parse_args()
    ports = {"main": free_port(), "conversion": free_port(), "view": free_port()}
    with tempfile.TemporaryDirectory(prefix="bench-conn-") as tmp:
        log_path = os.path.join(tmp, "serve.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(QUOTIENT_BIN), "serve", "--port", str(ports["main"]), "--conversion-port",
                                     str(ports["conversion"]), "--view-port", str(ports["view"])],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(ROOT))
        try:
            deadline = time.monotonic() + 30
            while once(ports["main"], "GET", "/readyz", timeout=1)[0] != 200:
                assert proc.poll() is None and time.monotonic() < deadline, Path(log_path).read_text()[-3000:]
                time.sleep(0.1)
            print(f"quotient serve pid {proc.pid}: VmRSS {rss(proc.pid):.0f} MiB after start")
            time.sleep(args.hold)
            parts = set(args.parts.split(","))
            answered, loris_goal = slow_loris(ports, args.conns, args.attack) if "loris" in parts else (True, True)
            time.sleep(1)
            flood_ok, flood_goal = flood(ports, proc.pid, args.idle, args.flood, args.flooders, args.review_bytes,
                  args.flood_nice) \
                if "flood" in parts else (True, True)
            large_ok = large_filters(ports["main"]) if "large" in parts else True
            alive = once(ports["main"], "GET", "/livez")[0] == 200
            print(f"server alive at the end: {'yes' if alive else 'NO'}; tracebacks in the server log: "
                  f"{Path(log_path).read_text().count('Traceback')}")
        finally:
            stop_process(proc)
    if not (answered and flood_ok and large_ok and alive):
        return 1
    return 0 if loris_goal and flood_goal else 3


if __name__ == "__main__":
    sys.exit(main())
