"""Large ConversionReviews are decoded, converted and encoded in a child process, so the verbs keep the event loop.

Decoding a 28 MiB review holds the GIL for a quarter of a second and converting it for longer, so a thread
would stall the verbs as much as the loop itself; the parent only moves bytes: the body to the worker's stdin,
the answer back from its stdout, one review at a time. Frames both ways are 1 byte of kind and 8 bytes of
length (big-endian), then the bytes: kind 0 is the answering review (200), 1 a refusal message (400),
2 a refusal for too many JSON items (413).

    python -m app.api.convertworker        # what ConversionWorker starts; reads frames until stdin closes
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import struct
import sys

log = logging.getLogger("quotient.api")
HEADER = struct.Struct(">BQ")
ANSWERED, REFUSED, CROWDED = 0, 1, 2
TIMEOUT = 60.0          # seconds a review may take; kube-apiserver gives up on a webhook after 30 at most
RESTART_RSS = 256 * 2**20   # a worker that kept more memory than this after a review is started afresh


def answer_frame(body: bytes) -> bytes:
    """What the worker answers for one review body."""
    from .convert import review
    from .limits import too_many_items
    from .wire import WireError

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
        self._proc: asyncio.subprocess.Process | None = None
        self._lock: asyncio.Lock | None = None
        self._loop = None

    async def convert(self, body: bytes) -> tuple[int, bytes]:
        """(kind, payload) for one review; RuntimeError when the worker failed (it is started afresh)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:      # a worker per event loop (tests run several in turn)
            self._forget()
            self._lock, self._loop = asyncio.Lock(), loop
        async with self._lock:
            proc = await self._started()
            try:
                proc.stdin.write(HEADER.pack(ANSWERED, len(body)))
                proc.stdin.write(body)
                del body
                kind, payload = await asyncio.wait_for(self._read(proc), TIMEOUT)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError) as e:
                await self._stop(proc)
                raise RuntimeError(f"the conversion worker failed ({type(e).__name__}); it is started again") from None
            if _rss(proc.pid) > RESTART_RSS:
                await self._stop(proc)
            return kind, payload

    async def _read(self, proc) -> tuple[int, bytes]:
        await proc.stdin.drain()
        kind, size = HEADER.unpack(await proc.stdout.readexactly(HEADER.size))
        return kind, await proc.stdout.readexactly(size)

    async def _started(self):
        if self._proc is None or self._proc.returncode is not None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", __name__, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                limit=2**20)
        return self._proc

    async def _stop(self, proc) -> None:
        if self._proc is proc:
            self._proc = None
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    def _forget(self) -> None:
        """Drop a worker started on another event loop (its pipes belong to that loop): it is killed."""
        if self._proc is not None:
            try:
                os.kill(self._proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self._proc = None

    async def close(self) -> None:
        if self._proc is not None:
            await self._stop(self._proc)


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
