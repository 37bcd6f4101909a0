"""Large ConversionReviews are decoded, converted and encoded in a child process, so the verbs keep the event loop.

Decoding a 28 MiB review holds the GIL for a quarter of a second and converting it for longer, so a thread
would stall the verbs as much as the loop itself; the parent only moves bytes: the body to the worker's stdin,
the answer back from its stdout, one review at a time, with blocking os-level writes and reads in a thread
(they release the GIL; the event loop takes no callback per pipe-full, and the answer is read into one buffer
of its size, not grown and copied). The worker runs at a lower CPU priority (nice 10): on a small node the
verbs' event loop gets the core first. Frames both ways are 1 byte of kind and 8 bytes of
length (big-endian), then the bytes: kind 0 is the answering review (200), 1 a refusal message (400),
2 a refusal for too many JSON items (413).

    python -m app.api.convertworker        # what ConversionWorker starts; reads frames until stdin closes
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import subprocess
import sys

from .limits import too_many_items
from .review import review
from .wire import WireError

log = logging.getLogger("quotient.api")
HEADER = struct.Struct(">BQ")
ANSWERED, REFUSED, CROWDED = 0, 1, 2
TIMEOUT = 60.0          # seconds a review may take; kube-apiserver gives up on a webhook after 30 at most
NICE = 10              # the worker yields the CPU to the verbs
RESTART_RSS = 256 * 2**20   # a worker that kept more memory than this after a review is started afresh


def answer_frame(body: bytes) -> bytes:
    """What the worker answers for one review body."""
    crowded = too_many_items(body)
    if crowded:
        return _frame(CROWDED, crowded.encode())
    try:
        return _frame(ANSWERED, review(body))
    except WireError as e:
        return _frame(REFUSED, str(e).encode())


def _frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def main() -> int:
    try:
        os.nice(NICE)
    except OSError:
        pass
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = source.read(HEADER.size)
        if len(head) < HEADER.size:
            return 0
        _, size = HEADER.unpack(head)
        body = source.read(size)
        if len(body) < size:
            return 0
        out = answer_frame(body)
        del body
        sink.write(out)
        sink.flush()


class ConversionWorker:
    """The parent's side: one child, started when first needed and again after it dies, hangs or grows."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._lock: asyncio.Lock | None = None
        self._loop = None

    async def convert(self, body) -> tuple[int, bytes]:
        """(kind, payload) for one review (`body`: bytes or a bytearray); RuntimeError when the worker failed
        (it is started afresh)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:      # a worker per event loop (tests run several in turn)
            self._forget()
            self._lock, self._loop = asyncio.Lock(), loop
        async with self._lock:
            proc = self._started()
            watchdog = loop.call_later(TIMEOUT, self._kill, proc)   # unblocks the thread: its pipes close
            try:
                kind, payload = await asyncio.to_thread(_exchange, proc, body)
            except (OSError, ValueError, EOFError) as e:
                self._stop(proc)
                raise RuntimeError(f"the conversion worker failed ({type(e).__name__}); it is started again") from None
            finally:
                watchdog.cancel()
            if _rss(proc.pid) > RESTART_RSS:
                self._stop(proc)
            return kind, payload

    def _started(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, bufsize=0)
        return self._proc

    @staticmethod
    def _kill(proc) -> None:
        if proc.poll() is None:
            proc.kill()

    def _stop(self, proc) -> None:
        if self._proc is proc:
            self._proc = None
        self._kill(proc)
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        proc.wait()

    def _forget(self) -> None:
        """Drop a worker started on another event loop: it is killed."""
        if self._proc is not None:
            self._stop(self._proc)

    async def close(self) -> None:
        if self._proc is not None:
            self._stop(self._proc)


def _exchange(proc: subprocess.Popen, body) -> tuple[int, bytearray]:
    """In a thread: one frame to the worker, its answer back (blocking reads and writes release the GIL)."""
    out, source = proc.stdin.fileno(), proc.stdout.fileno()
    _write_all(out, HEADER.pack(ANSWERED, len(body)))
    _write_all(out, body)
    kind, size = HEADER.unpack(_read_exactly(source, bytearray(HEADER.size)))
    return kind, _read_exactly(source, bytearray(size))


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, buf: bytearray) -> bytearray:
    view, got = memoryview(buf), 0
    while got < len(buf):
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError("the conversion worker closed its answer")
        got += n
    return buf


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
