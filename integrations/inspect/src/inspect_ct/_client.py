"""The one `ct sandbox serve` process of this Inspect process, and the requests sent to it.

Frames (both ways): u32 BE header length, u32 BE body length, a JSON header, raw body bytes;
see ct's src/sandbox/serve/serve-session.ts for the requests. A reader thread takes the
answers and wakes the waiting task on its own event loop (asyncio or trio), so calls from any
number of tasks share the pipe; a cancelled call sends `cancel`, which kills its command in the
sandbox.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

import anyio
import sniffio

logger = logging.getLogger(__name__)

PROTOCOL = 1
# Bodies larger than this are written from a worker thread, so the event loop never blocks
# on a full pipe for long.
_INLINE_WRITE = 256 * 1024


class CtServeError(RuntimeError):
    """A failure reported by `ct sandbox serve`, with its type (see serve-session.ts)."""

    def __init__(self, type: str, message: str, header: dict[str, Any], body: bytes) -> None:
        super().__init__(message)
        self.type = type
        self.header = header
        self.body = body


def find_ct() -> list[str]:
    """The argv that runs ct: CT_BIN, then `ct` on PATH, then the repository around this package."""
    explicit = os.environ.get("CT_BIN")
    if explicit:
        return _argv_for(explicit)
    on_path = shutil.which("ct")
    if on_path:
        return [on_path]
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "bin" / "ct.js"
        if candidate.is_file() and (parent / "package.json").is_file():
            return _argv_for(str(candidate))
    raise RuntimeError(
        "ct was not found: install it (npm install -g <ct package>), put `ct` on PATH, "
        "or set CT_BIN to its path (a ct.js is run with node)"
    )


def _argv_for(path: str) -> list[str]:
    if path.endswith(".js"):
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is needed to run ct (Node 20 or newer) and is not on PATH")
        return [node, path]
    return [path]


class _Waiter:
    __slots__ = ("event", "wake", "header", "body")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.wake = _waker(self.event)
        self.header: dict[str, Any] = {}
        self.body = b""


def _waker(event: anyio.Event) -> Callable[[], None]:
    """A function another thread may call to set `event` on the current event loop."""
    if sniffio.current_async_library() == "trio":
        import trio

        token = trio.lowlevel.current_trio_token()
        return lambda: token.run_sync_soon(event.set)
    loop = asyncio.get_running_loop()
    return lambda: loop.call_soon_threadsafe(event.set)


class CtServer:
    """One `ct sandbox serve` child, its pipes and its requests in flight."""

    def __init__(self) -> None:
        argv = find_ct() + ["sandbox", "serve"]
        # Its own session: a terminal's Ctrl-C goes to Inspect, which then cleans up through
        # this process; the process ends when Inspect does (its stdin closes).
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            start_new_session=True,
        )
        self.pid = os.getpid()
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)
        self.dead: str | None = None
        self.ct_version = ""
        # The hello, answered before the reader starts.
        self._write({"id": next(self._ids), "op": "hello", "protocol": PROTOCOL}, b"")
        header, _ = self._read_frame()
        if header is None or not header.get("ok"):
            self.proc.kill()
            err = (header or {}).get("error", {}).get("message", "ct sandbox serve exited")
            raise RuntimeError(f"ct sandbox serve refused the handshake: {err}")
        self.ct_version = str(header.get("ct_version", ""))
        threading.Thread(target=self._read_loop, name="inspect-ct-reader", daemon=True).start()

    def alive(self) -> bool:
        return self.dead is None and self.proc.poll() is None and self.pid == os.getpid()

    async def request(self, op: str, args: dict[str, Any], body: bytes = b"") -> tuple[dict[str, Any], bytes]:
        """Sends one request; returns the answer's header and body or raises CtServeError."""
        if self.dead is not None:
            raise CtServeError("unavailable", f"ct sandbox serve is gone: {self.dead}", {}, b"")
        id = next(self._ids)
        waiter = _Waiter()
        with self._lock:
            self._waiters[id] = waiter
        header = {**args, "id": id, "op": op}
        if len(body) > _INLINE_WRITE:
            await in_thread(self._write, header, body)
        else:
            self._write(header, body)
        try:
            await waiter.event.wait()
        except BaseException:
            with self._lock:
                still = self._waiters.pop(id, None)
            if still is not None and self.dead is None:
                self._write({"id": next(self._ids), "op": "cancel", "target": id}, b"")
            raise
        answer = waiter.header
        if answer.get("ok"):
            return answer, waiter.body
        error = answer.get("error") or {}
        raise CtServeError(str(error.get("type", "error")), str(error.get("message", "")), answer, waiter.body)

    def _write(self, header: dict[str, Any], body: bytes) -> None:
        h = json.dumps(header).encode("utf-8")
        with self._write_lock:
            try:
                stdin = self.proc.stdin
                assert stdin is not None
                stdin.write(struct.pack(">II", len(h), len(body)) + h)
                if body:
                    stdin.write(body)
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as ex:
                self._die(f"its input closed ({ex})")

    def _read_exact(self, n: int) -> bytes | None:
        stdout = self.proc.stdout
        assert stdout is not None
        chunks = []
        while n > 0:
            chunk = stdout.read(n)
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read_frame(self) -> tuple[dict[str, Any] | None, bytes]:
        prefix = self._read_exact(8)
        if prefix is None:
            return None, b""
        hlen, blen = struct.unpack(">II", prefix)
        h = self._read_exact(hlen)
        b = self._read_exact(blen) if blen else b""
        if h is None or b is None:
            return None, b""
        return json.loads(h.decode("utf-8")), b

    def _read_loop(self) -> None:
        while True:
            header, body = self._read_frame()
            if header is None:
                self._die(f"it exited (code {self.proc.wait()})")
                return
            id = header.get("id")
            if id == 0:
                logger.warning("ct: %s", header.get("notice"))
                continue
            with self._lock:
                waiter = self._waiters.pop(id, None)
            if waiter is not None:
                waiter.header, waiter.body = header, body
                _wake(waiter)

    def _die(self, why: str) -> None:
        if self.dead is None:
            self.dead = why
        with self._lock:
            waiters = list(self._waiters.values())
            self._waiters.clear()
        for w in waiters:
            w.header = {"ok": False, "error": {"type": "unavailable", "message": f"ct sandbox serve is gone: {self.dead}"}}
            _wake(w)


def _wake(waiter: _Waiter) -> None:
    try:
        waiter.wake()
    except RuntimeError:
        # Its event loop has ended: nobody waits any more.
        pass


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Runs `fn` in a thread of its own and waits for it (not cancellable: it finishes). Not
    anyio.to_thread, which needs a newer trio than some Inspect installs have."""
    event = anyio.Event()
    wake = _waker(event)
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as ex:  # noqa: BLE001 - handed to the waiting task
            outcome.append((False, ex))
        try:
            wake()
        except RuntimeError:
            pass

    threading.Thread(target=run, name="inspect-ct-worker", daemon=True).start()
    with anyio.CancelScope(shield=True):
        await event.wait()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


_server: CtServer | None = None
_server_lock = threading.Lock()


def _get_server() -> CtServer:
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            _server = CtServer()
        return _server


async def server() -> CtServer:
    """This process's ct server, started on first use (in a worker thread: ct takes ~0.3 s to start)."""
    current = _server
    if current is not None and current.alive():
        return current
    return await in_thread(_get_server)
