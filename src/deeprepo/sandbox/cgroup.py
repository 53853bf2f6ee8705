"""One cgroup per kernel: its process tree shares one memory, pids and CPU limit, and dies as one.

Where deeprepo may create cgroups (root, or a delegated cgroup v2 subtree), each
kernel gets its own: ``memory`` (the tree's total, swap included, so 4 children
of 900 MB cannot all live under a 2 GB limit), ``pids`` and ``cpu``. The parent
creates it and hands the child an open ``cgroup.procs`` fd per hierarchy; the
child moves itself in before it reads any cell (writing ``0`` moves the writer),
so every process a cell starts is inside. The parent lists the cgroup's
processes after each cell to stop leftovers and kills them all at the end.

A watchdog process, started with the first cgroup, waits on a pipe that only
deeprepo holds; when deeprepo is gone (``kill -9`` included) it kills whatever is
left in deeprepo's cgroups and removes them. In bwrap mode the pid namespace
already ends with deeprepo; in process mode this is what stops a daemon that a
running cell double-forked.

cgroup v2 (one unified hierarchy) is used where its ``memory`` and ``pids``
controllers can be enabled below deeprepo's own cgroup; otherwise the v1
``memory``, ``pids`` (and ``cpu``) hierarchies where they are mounted writable.
Where neither works, :func:`problem` says why and the kernel runs without one:
``RLIMIT_AS`` per process, ``RLIMIT_NPROC`` per uid, the pid namespace and the
wall clock remain (see docs/security.md).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

__all__ = ["CgroupLimits", "KernelCgroup", "create", "problem"]

_V1_CONTROLLERS = ("memory", "pids", "cpu")
_counter = itertools.count()
_CPU_PERIOD_US = 100_000


class CgroupUnavailable(OSError):
    """No cgroup can be made here; the message says why."""


@dataclass(frozen=True)
class CgroupLimits:
    memory_mb: int
    processes: int
    cpus: float  # CPU time per wall second, e.g. 1.0 = one core; 0 = no limit


@dataclass(frozen=True)
class _Layout:
    version: int
    parents: dict[str, str]  # controller (v2: "unified") -> directory new cgroups go under


class KernelCgroup:
    """The cgroup (one directory per hierarchy) of one kernel."""

    def __init__(self, version: int, dirs: dict[str, str]) -> None:
        self.version = version
        self.dirs = dirs
        self._tasks_fd = -1  # pids.current, opened once: read after every cell

    def join_fds(self) -> list[int]:
        """Open ``cgroup.procs`` of each hierarchy for the child to move itself in (caller closes)."""
        fds: list[int] = []
        try:
            for path in self.dirs.values():
                fds.append(os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def pids(self) -> list[int]:
        """The processes in the cgroup, as pids of deeprepo's pid namespace (none once removed)."""
        if not self.dirs:
            return []
        # os.open/os.read, not open(): read after every cell (processes it left running),
        # where the buffered file object cost more than the read.
        chunks: list[bytes] = []
        try:
            fd = os.open(
                os.path.join(next(iter(self.dirs.values())), "cgroup.procs"),
                os.O_RDONLY | os.O_CLOEXEC,
            )
        except OSError:
            return []
        try:
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            return [int(x) for x in b"".join(chunks).split()]
        except (OSError, ValueError):
            return []
        finally:
            os.close(fd)

    def tasks(self) -> int | None:
        """How many tasks (threads of every process, in sub-cgroups too) the cgroup holds, from
        the pids controller; None where it cannot be read.

        The cheap check after each cell: one ``pread`` on an fd kept open (each read from
        offset 0 shows the count afresh), where listing ``cgroup.procs`` costs a path walk
        through the cgroup file system (60-250 us here). ``cgroup.procs`` itself cannot be
        kept open: cgroup v1 serves a re-read of an open fd from a cached list."""
        fd = self._tasks_fd
        if fd < 0:
            directory = self.dirs.get("unified", self.dirs.get("pids"))
            if directory is None:
                return None
            try:
                fd = os.open(os.path.join(directory, "pids.current"), os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            self._tasks_fd = fd
        try:
            return int(os.pread(fd, 64, 0))
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL every process in the cgroup, forks that race the kill included."""
        kill_file = os.path.join(self.dirs.get("unified", ""), "cgroup.kill")
        if self.version == 2 and os.path.exists(kill_file):
            with contextlib.suppress(OSError):
                with open(kill_file, "w") as f:
                    f.write("1")
                return
        for _ in range(20):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self, wait_s: float = 0.5) -> None:
        """Kill what is left and delete the directories (retried while dying processes leave)."""
        self.kill()
        fd, self._tasks_fd = self._tasks_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        deadline = time.monotonic() + wait_s
        for path in reversed(list(self.dirs.values())):
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break  # a later run's sweep removes it
                    time.sleep(0.005)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _own_paths() -> dict[str, str]:
    """This process's cgroup per controller (v2: key "unified") from /proc/self/cgroup."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            num, controllers, path = line.rstrip("\n").split(":", 2)
            if num == "0" and controllers == "":
                out["unified"] = path
            for name in controllers.split(","):
                if name:
                    out[name] = path
    return out


def _mounts() -> dict[str, str]:
    """Mount points of writable cgroup hierarchies: controller (v2: "unified") -> path."""
    out: dict[str, str] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 6 or len(rfields) < 3 or fields[3] != "/":
                continue  # a bind of part of a hierarchy: our path inside it is unknown
            mount_opts, fstype, super_opts = fields[5].split(","), rfields[0], rfields[2].split(",")
            if "ro" in mount_opts:
                continue
            if fstype == "cgroup2":
                out.setdefault("unified", fields[4])
            elif fstype == "cgroup":
                for name in _V1_CONTROLLERS:
                    if name in super_opts:
                        out.setdefault(name, fields[4])
    return out


def _v2_parent(mount: str, own: str) -> str:
    parent = os.path.join(mount, own.lstrip("/"))
    with open(os.path.join(parent, "cgroup.controllers")) as f:
        available = set(f.read().split())
    if not {"memory", "pids"} <= available:
        raise CgroupUnavailable(
            f"cgroup v2 at {parent} offers no memory/pids controllers to delegate"
        )
    with open(os.path.join(parent, "cgroup.subtree_control")) as f:
        enabled = set(f.read().split())
    wanted = [c for c in ("memory", "pids", "cpu") if c in available and c not in enabled]
    failure = ""
    # One at a time: cpu may refuse (realtime tasks) where memory and pids would not.
    for controller in wanted:
        try:
            _write(os.path.join(parent, "cgroup.subtree_control"), f"+{controller}")
            enabled.add(controller)
        except OSError as exc:  # EBUSY: processes live in this cgroup (no internal processes)
            failure = failure or exc.strerror or str(exc)
    if {"memory", "pids"} - enabled:
        raise CgroupUnavailable(f"cannot enable memory/pids controllers below {parent} ({failure})")
    return parent


@functools.lru_cache(maxsize=1)
def _layout() -> _Layout:
    if not os.path.exists("/proc/self/cgroup"):
        raise CgroupUnavailable("no cgroups on this system")
    own, mounts = _own_paths(), _mounts()
    errors: list[str] = []
    if "unified" in mounts and "unified" in own:
        # Below our own cgroup, else (root, whose own cgroup holds processes and so cannot
        # delegate controllers) below the hierarchy's root, which that rule exempts.
        for base in dict.fromkeys([own["unified"], "/"]):
            try:
                parent = _v2_parent(mounts["unified"], base)
                _probe(parent)
                return _Layout(2, {"unified": parent})
            except OSError as exc:
                errors.append(
                    str(exc) if isinstance(exc, CgroupUnavailable) else f"cgroup v2: {exc}"
                )
    if "memory" in mounts and "pids" in mounts:
        parents = {
            name: os.path.join(mounts[name], own.get(name, "/").lstrip("/"))
            for name in _V1_CONTROLLERS
            if name in mounts
        }
        try:
            for parent in parents.values():
                _probe(parent)
            return _Layout(1, parents)
        except OSError as exc:
            errors.append(f"cgroup v1: {exc.strerror or exc}")
    raise CgroupUnavailable(
        "; ".join(errors) or "no writable cgroup hierarchy with memory and pids controllers"
    )


def _probe(parent: str) -> None:
    """Fail unless we can create a cgroup under ``parent``; sweep what dead runs left there."""
    test = os.path.join(parent, f"{_prefix()}probe")
    os.mkdir(test)
    os.rmdir(test)
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if name.startswith("deeprepo-") and not name.startswith(_prefix()):
                pid = name.split("-")[1]
                if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(parent, name))


def problem() -> str | None:
    """None when kernels get a cgroup here (checked once per process), else why not."""
    try:
        _layout()
    except (OSError, ValueError) as exc:
        return str(exc)
    return None


# Run by the watchdog (python -I -S -c): block until deeprepo's end of the pipe closes, then
# empty and remove deeprepo's cgroups. It holds no key and reads nothing else.
_WATCHDOG = """
import os, signal, sys, time
fd, prefix, parents = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
signal.signal(signal.SIGINT, signal.SIG_IGN)
while os.read(fd, 1):
    pass
for _ in range(50):
    left = 0
    for parent in parents:
        try:
            names = [n for n in os.listdir(parent) if n.startswith(prefix)]
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            try:
                pids = open(os.path.join(path, 'cgroup.procs')).read().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(path)
            except OSError:
                left += 1
    if not left:
        break
    time.sleep(0.02)
"""
_watchdog_lock = threading.Lock()
_watchdog: list[int] = []  # deeprepo's end of the watchdog's pipe: open, never written


def _prefix() -> str:
    """This process's cgroup names start so. Per process, not per import: the workers an
    eval or a benchmark forks would otherwise share the parent's names (and counter), and
    the watchdog of the first to exit would empty and remove the others' live cgroups (a
    kernel then failed "joining the kernel's cgroup ([Errno 19] No such device)")."""
    return f"deeprepo-{os.getpid()}-"


def _after_fork_in_child() -> None:
    """A forked process starts its own watchdog for its own cgroups; the parent's pipe end
    it inherited stays open (so the parent's watchdog also waits for it)."""
    global _watchdog_lock
    _watchdog_lock = threading.Lock()
    _watchdog.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _ensure_watchdog(parents: list[str]) -> None:
    with _watchdog_lock:
        if _watchdog:
            return
        read_fd, write_fd = os.pipe()
        try:
            # posix_spawn, not Popen: deeprepo never waits for it (it outlives deeprepo by
            # design), and a Popen left running warns at exit. Its pipe end becomes fd 3.
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, "3", _prefix(), *parents],
                {},
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_DUP2, read_fd, 3),
                ],
                setsid=True,  # a terminal's Ctrl-C is deeprepo's to handle, not its
            )
        except OSError:
            os.close(write_fd)
            return
        finally:
            os.close(read_fd)
        _watchdog.append(write_fd)


def create(limits: CgroupLimits) -> KernelCgroup:
    """A new cgroup with ``limits``; raises :class:`CgroupUnavailable` (an ``OSError``)."""
    layout = _layout()
    _ensure_watchdog(list(layout.parents.values()))
    name = f"{_prefix()}{next(_counter)}"
    dirs: dict[str, str] = {}
    group = KernelCgroup(layout.version, dirs)  # fills as the directories are made
    try:
        for controller, parent in layout.parents.items():
            path = os.path.join(parent, name)
            os.mkdir(path)
            dirs[controller] = path
        memory = str(limits.memory_mb * 1024 * 1024)
        if layout.version == 2:
            path = dirs["unified"]
            _write(os.path.join(path, "memory.max"), memory)
            _try_write(os.path.join(path, "memory.swap.max"), "0")
            _write(os.path.join(path, "pids.max"), str(limits.processes))
            if limits.cpus > 0:
                quota = int(limits.cpus * _CPU_PERIOD_US)
                _try_write(os.path.join(path, "cpu.max"), f"{quota} {_CPU_PERIOD_US}")
        else:
            _write(os.path.join(dirs["memory"], "memory.limit_in_bytes"), memory)
            _try_write(os.path.join(dirs["memory"], "memory.memsw.limit_in_bytes"), memory)
            _write(os.path.join(dirs["pids"], "pids.max"), str(limits.processes))
            if limits.cpus > 0 and "cpu" in dirs:
                _try_write(os.path.join(dirs["cpu"], "cpu.cfs_period_us"), str(_CPU_PERIOD_US))
                quota = int(limits.cpus * _CPU_PERIOD_US)
                _try_write(os.path.join(dirs["cpu"], "cpu.cfs_quota_us"), str(quota))
    except OSError as exc:
        group.remove(wait_s=0)
        raise CgroupUnavailable(f"could not set up the kernel's cgroup: {exc}") from exc
    return group


def _try_write(path: str, value: str) -> None:
    """Write an optional knob (swap accounting or the cpu controller may be absent)."""
    with contextlib.suppress(OSError):
        _write(path, value)
