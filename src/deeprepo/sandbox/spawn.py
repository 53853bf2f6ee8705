"""Starting child interpreters: the command, the pipes, the cgroup, and the thread that forks.

A started child has its interpreter up, its helpers loaded, and waits for its init
message; ``SpawnedChild`` holds the ``Popen`` and the parent's ends of its pipes (plain
file descriptors, no asyncio objects, so a pooled child serves any event loop) and
knows how to find and kill the kernel's processes.
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
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from deeprepo.base.errors import SandboxError
from deeprepo.sandbox import cgroup, seccomp
from deeprepo.sandbox.isolation import (
    child_command,
    child_env,
    process_drop_args,
    protect_parent,
    python_executable,
    sandbox_ids,
    seccomp_program,
)
from deeprepo.sandbox.procs import descendants, kill_all

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
    kernel_tasks: int | None = None  # the cgroup's task count when the kernel alone was in it

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
            self.kernel_tasks = self.group.tasks() if self.kernel_pid is not None else None
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
        # The kernel's threads alone, as before the first cell: no process to list. Any
        # process (or thread) a cell left counts here, so the list below is read; the count
        # cannot drop under the kernel's own threads without the kernel losing one of them.
        tasks = self.kernel_tasks
        if self.group is not None and tasks is not None and self.group.tasks() == tasks:
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


def submit_spawn(
    mode: str, tmp_size_mb: int = 256, limits: cgroup.CgroupLimits | None = None
) -> Future[SpawnedChild]:
    """Start a child from the spawner thread; its future."""
    return _SPAWNER.submit(mode, tmp_size_mb, limits)


async def start_child_async(
    mode: str, tmp_size_mb: int = 256, limits: cgroup.CgroupLimits | None = None
) -> SpawnedChild:
    """Start a child (from the spawner thread) without blocking the event loop."""
    return await asyncio.wrap_future(submit_spawn(mode, tmp_size_mb, limits))
