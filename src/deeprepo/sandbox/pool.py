"""Starting child interpreters, talking to them, and a warm pool of them.

A pooled child has started its interpreter, loaded its helpers and said "ready"
before any codebase is known; ``Kernel.start`` then only sends the payload. The
pool holds plain ``Popen`` objects and file descriptors, not asyncio objects, so
one pool serves any event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import TracebackType

from deeprepo.base.errors import SandboxError
from deeprepo.sandbox import cgroup, protocol, seccomp
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import (
    child_command,
    child_env,
    process_drop_args,
    protect_parent,
    python_executable,
    resolve_mode,
    sandbox_ids,
    seccomp_program,
)
from deeprepo.sandbox.procs import descendants, kill_all

_REFILL_DELAY_S = 0.05
_PIPE_SIZE = 1 << 20  # a 1 MiB pipe moves a codebase in fewer wake-ups


@dataclass
class SpawnedChild:
    """A started child and the parent's ends of its pipes (not yet attached to a loop)."""

    proc: subprocess.Popen[bytes]
    mode: str
    rpc_read: int  # child -> parent messages
    rpc_write: int  # parent -> child messages
    stray_read: int  # the child's fds 1 and 2
    tmpdir: str | None  # process mode: the private dir (cwd, HOME, TMPDIR)
    group: cgroup.KernelCgroup | None = None  # the kernel's cgroup, where one can be made
    closed: bool = field(default=False)
    kernel_pid: int | None = None  # the interpreter's pid (in bwrap mode, inside bwrap's tree)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """Kill the child's whole process group (in bwrap mode, its pid namespace goes with it)
        and everything in its cgroup."""
        if self.group is not None:
            self.group.kill()  # the whole tree, the kernel included
        elif self.mode != "bwrap" and self.proc.poll() is None:
            # Stopped first, the kernel forks no more while its tree is killed; once dead,
            # its children would be re-parented out of reach.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.proc.pid, signal.SIGSTOP)
            kill_all(lambda: descendants(self.proc.pid), wait_s=0.2)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def note_kernel(self) -> None:
        """Remember the kernel interpreter's pid; call once it has said "ready", before any cell."""
        if self.group is not None:
            pids = self.group.pids()
            self.kernel_pid = pids[0] if len(pids) == 1 else None
        elif self.mode == "bwrap":
            # bwrap -> its init (pid 1 of the sandbox) -> the kernel, its only child so far
            inits = descendants(self.proc.pid, depth=1)
            kids = descendants(inits[0], depth=1) if len(inits) == 1 else []
            self.kernel_pid = kids[0] if len(kids) == 1 else None
        else:
            self.kernel_pid = self.proc.pid

    def _tree(self) -> list[int]:
        """Every process the kernel's code may have started (not bwrap, its init or the kernel)."""
        if self.group is not None:
            return [p for p in self.group.pids() if p != self.kernel_pid]
        if self.kernel_pid is None:
            return []
        if self.mode == "bwrap":
            # In its pid namespace every orphan is re-parented to bwrap's init: the whole tree
            # below bwrap is the sandbox, whatever setsid() or double forks the cell did.
            skip = {self.kernel_pid, *descendants(self.proc.pid, depth=1)}
            return [p for p in descendants(self.proc.pid) if p not in skip]
        return descendants(self.kernel_pid)

    def stop_leftovers(self) -> int:
        """SIGKILL every process a finished cell left running; how many there were."""
        if self.kernel_pid is None or self.proc.poll() is not None:
            return 0
        return kill_all(self._tree)

    def release(self) -> None:
        """Close the parent's fds (those not handed to transports) and remove the temp dir."""
        if self.closed:
            return
        self.closed = True
        for fd in (self.rpc_read, self.rpc_write, self.stray_read):
            if fd >= 0:  # -1: handed over to an event-loop transport, which closes it
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.group is not None:
            self.group.remove()
        self.remove_tmpdir()

    def remove_tmpdir(self) -> None:
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    with contextlib.suppress(AttributeError, OSError):
        import fcntl

        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    return r, w


def spawn_child(
    mode: str, tmp_size_mb: int = 256, limits: cgroup.CgroupLimits | None = None
) -> SpawnedChild:
    """Start one child interpreter in ``mode`` ("process" or "bwrap"); it waits for its init.

    With ``limits``, the child joins a cgroup of its own that holds them, where this
    machine lets deeprepo make one (see ``cgroup.py``).
    """
    p2c_r, p2c_w = _pipe()
    c2p_r, c2p_w = _pipe()
    stray_r, stray_w = os.pipe()
    tmpdir = tempfile.mkdtemp(prefix="deeprepo-kernel-") if mode == "process" else None
    group: cgroup.KernelCgroup | None = None
    extra_fds: list[int] = []
    try:
        if tmpdir is not None:
            protect_parent()
            if "--drop-to" in process_drop_args(python_executable()):
                os.chown(tmpdir, *sandbox_ids())
        if limits is not None and cgroup.problem() is None:
            with contextlib.suppress(OSError):
                group = cgroup.create(limits)
        cgroup_fds = tuple(group.join_fds()) if group is not None else ()
        extra_fds += cgroup_fds
        program = seccomp_program()
        filter_fd = seccomp.program_fd(program) if program is not None else None
        if filter_fd is not None:
            extra_fds.append(filter_fd)
        argv = child_command(
            mode,
            p2c_r,
            c2p_w,
            tmp_size_mb,
            seccomp_fd=filter_fd,
            cgroup_fds=cgroup_fds,
            tmpdir=tmpdir,
        )
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stray_w,
            stderr=stray_w,
            pass_fds=(p2c_r, c2p_w, *extra_fds),
            cwd=tmpdir or "/",
            env=child_env(tmpdir or "/tmp"),
            start_new_session=True,  # one process group to kill
            close_fds=True,
        )
    except OSError as exc:
        for fd in (p2c_w, c2p_r, stray_r):
            os.close(fd)
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
        if group is not None:
            group.remove(wait_s=0)
        raise SandboxError(
            f"could not start the sandbox kernel ({exc}); try --sandbox process"
        ) from exc
    finally:
        for fd in (p2c_r, c2p_w, stray_w, *extra_fds):
            os.close(fd)
    return SpawnedChild(proc, mode, c2p_r, p2c_w, stray_r, tmpdir, group)


class _Spawner:
    """One long-lived thread that starts every child.

    Linux sends a child's parent-death signal (``PR_SET_PDEATHSIG``, which the child
    and bwrap's ``--die-with-parent`` use) when the *thread* that forked it ends, so
    children must not be started from short-lived threads: this one lives as long
    as the process.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], SpawnedChild], Future[SpawnedChild]]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(
        self, mode: str, tmp_size_mb: int, limits: cgroup.CgroupLimits | None = None
    ) -> Future[SpawnedChild]:
        future: Future[SpawnedChild] = Future()
        self._queue.put((lambda: spawn_child(mode, tmp_size_mb, limits), future))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="deeprepo-spawner", daemon=True
                )
                self._thread.start()
        return future

    def _run(self) -> None:
        while True:
            fn, future = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)


_SPAWNER = _Spawner()


def start_child(
    mode: str, tmp_size_mb: int = 256, limits: cgroup.CgroupLimits | None = None
) -> SpawnedChild:
    """Start a child (from the spawner thread) and wait for it."""
    return _SPAWNER.submit(mode, tmp_size_mb, limits).result()


async def start_child_async(
    mode: str, tmp_size_mb: int = 256, limits: cgroup.CgroupLimits | None = None
) -> SpawnedChild:
    """Start a child (from the spawner thread) without blocking the event loop."""
    return await asyncio.wrap_future(_SPAWNER.submit(mode, tmp_size_mb, limits))


def pool_key(mode: str, config: SandboxConfig) -> tuple[str, int, cgroup.CgroupLimits]:
    """What a pre-started child was set up with: a kernel may use it only if its own matches."""
    return (mode, config.tmp_size_mb, config.cgroup_limits())


class KernelPool:
    """Pre-started child interpreters for one isolation setup.

    ``Kernel.start(..., pool=pool)`` takes one and the pool starts a replacement
    in the background. Close the pool (or use it as a context manager) to kill the
    idle children.
    """

    def __init__(self, config: SandboxConfig | None = None, size: int = 2) -> None:
        self.config = config or SandboxConfig()
        self.size = max(0, size)
        self.isolation = resolve_mode(self.config.mode)
        self._idle: list[SpawnedChild] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pending = 0

    @property
    def mode(self) -> str:
        return self.isolation.mode

    def key(self) -> tuple[str, int, cgroup.CgroupLimits]:
        """What a kernel's config must match to use this pool's children."""
        return pool_key(self.isolation.mode, self.config)

    def fill(self) -> None:
        """Start children until ``size`` are idle, and wait for them."""
        for future in self._request_missing():
            future.result()

    def _request_missing(self) -> list[Future[SpawnedChild]]:
        with self._lock:
            if self._closed:
                return []
            missing = self.size - len(self._idle) - self._pending
            self._pending += max(0, missing)
        futures = [_SPAWNER.submit(*self.key()) for _ in range(max(0, missing))]
        for future in futures:
            future.add_done_callback(self._arrived)
        return futures

    def _arrived(self, future: Future[SpawnedChild]) -> None:
        with self._lock:
            self._pending -= 1
            if future.exception() is not None:
                return  # the next Kernel.start spawns directly and reports the error
            child = future.result()
            if not self._closed:
                self._idle.append(child)
                return
        child.kill()
        child.release()

    def take(self) -> SpawnedChild | None:
        """An idle live child, or None; replacements start in the background."""
        found: SpawnedChild | None = None
        with self._lock:
            while self._idle and found is None:
                child = self._idle.pop(0)
                if child.alive():
                    found = child
                else:
                    child.release()
        if found is None:
            self._request_missing()
        else:
            # Starting the replacement right away would compete (GIL, fork) with the start
            # of the kernel that just took this child; a short delay keeps that start fast.
            timer = threading.Timer(_REFILL_DELAY_S, self._request_missing)
            timer.daemon = True
            timer.start()
        return found

    def close(self) -> None:
        """Kill and reap the idle children."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=5)
            child.release()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> KernelPool:
        self.fill()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# ---------------------------------------------------------------------- an attached child

TIMEOUT = object()  # what Connection.next_line returns when the time is up
_HIGH_WATER = 16 * 1024 * 1024  # queued bytes at which reading the child's messages pauses
_LINE_COST = 64  # what a queued line costs beyond its bytes (a flood of empty lines is not free)


class _Pipe(asyncio.Protocol):
    """Hands a read pipe's bytes and its end to callbacks."""

    def __init__(self, on_data: Callable[[bytes], None], on_end: Callable[[], None]) -> None:
        self.on_data = on_data
        self.on_end = on_end
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_end()


class Connection:
    """A spawned child attached to the running event loop: send lines, read lines and raw output."""

    def __init__(self, child: SpawnedChild, stray_limit: int) -> None:
        self.child = child
        self.lines = protocol.LineSplitter(protocol.MAX_LINE_BYTES)
        self.stray = protocol.MarkedOutput(stray_limit)
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._queued = 0
        self._paused = False
        self._stray_changed = asyncio.Event()
        self._rpc = _Pipe(self._on_rpc, lambda: self._queue.put_nowait(None))
        self._raw = _Pipe(self._on_raw, self._stray_changed.set)
        self._transports: list[asyncio.BaseTransport] = []
        self._writer: asyncio.WriteTransport | None = None

    async def attach(self) -> None:
        """Connect the child's pipes to the running loop (the transports own the fds from here)."""
        loop = asyncio.get_running_loop()
        child = self.child
        rpc_in = os.fdopen(child.rpc_read, "rb", buffering=0)
        child.rpc_read = -1
        transport, _ = await loop.connect_read_pipe(lambda: self._rpc, rpc_in)
        self._transports.append(transport)
        raw_in = os.fdopen(child.stray_read, "rb", buffering=0)
        child.stray_read = -1
        transport, _ = await loop.connect_read_pipe(lambda: self._raw, raw_in)
        self._transports.append(transport)
        rpc_out = os.fdopen(child.rpc_write, "wb", buffering=0)
        child.rpc_write = -1
        writer, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, rpc_out)
        self._transports.append(writer)
        self._writer = writer

    def _on_rpc(self, data: bytes) -> None:
        for line in self.lines.feed(data):
            self._queue.put_nowait(line)
            self._queued += len(line) + _LINE_COST
        if self._queued > _HIGH_WATER and not self._paused and self._rpc.transport is not None:
            self._paused = True  # a flooding child must not fill the parent's memory
            self._rpc.transport.pause_reading()

    def _on_raw(self, data: bytes) -> None:
        if self.stray.feed(data):
            self._stray_changed.set()

    def send(self, line: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(line)

    def backlog(self) -> int:
        """Bytes sent to the child that it has not read yet (beyond what the pipe holds)."""
        return self._writer.get_write_buffer_size() if self._writer is not None else 0

    async def next_line(self, timeout: float) -> bytes | object | None:
        """The next line, None at end of stream, or ``TIMEOUT``."""
        queue = self._queue
        if queue.empty():
            if timeout <= 0:
                return TIMEOUT
            try:
                line = await asyncio.wait_for(queue.get(), timeout)
            except TimeoutError:
                return TIMEOUT
        else:
            line = queue.get_nowait()
        if line is None:
            queue.put_nowait(None)  # stay at end of stream
            return None
        self._queued -= len(line) + _LINE_COST
        if self._paused and self._queued < _HIGH_WATER // 2 and self._rpc.transport is not None:
            self._paused = False
            self._rpc.transport.resume_reading()
        return line

    async def raw_output(self, cell_id: int, timeout: float) -> str:
        """The raw fd 1/2 output of cell ``cell_id``, once its end mark is in (or the wait is over)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.stray.has(cell_id):
            self._stray_changed.clear()
            try:
                await asyncio.wait_for(self._stray_changed.wait(), deadline - loop.time())
            except TimeoutError:
                break
        return self.stray.take(cell_id)

    def kill(self) -> None:
        self.child.kill()

    async def reap(self, timeout: float = 5.0) -> int | None:
        """Wait for the child to exit; its return code, or None if it would not."""
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while self.child.proc.poll() is None:
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.child.proc.returncode

    async def close(self) -> None:
        """Close the pipes, reap the child and remove its temp dir."""
        for transport in self._transports:
            transport.close()
        self._transports.clear()
        self._writer = None
        await self.reap()
        self.child.release()
