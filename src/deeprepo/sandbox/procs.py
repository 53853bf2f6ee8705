"""Finding and killing a kernel's processes from the parent, through /proc.

Used where the kernel has no cgroup: after each cell the parent stops whatever
the cell left running. In bwrap mode the whole sandbox is the tree below bwrap
(orphans are re-parented to the sandbox's init, never out of it); in process
mode a grandchild that called ``setsid()`` and whose parent exited is re-parented
outside the tree, out of reach (see docs/security.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's), from /proc/PID/task/TID/children."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
    return out


def _children_by_scan(pid: int) -> list[int]:
    """The same by reading every process's parent (kernels without CONFIG_PROC_CHILDREN)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[1] == pid:
                out.append(int(name))
    return out


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])


_HAS_CHILDREN_FILE = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def descendants(pid: int, depth: int | None = None) -> list[int]:
    """Every process below ``pid`` (``depth`` levels; None: all), parents before children."""
    find = _children if _HAS_CHILDREN_FILE else _children_by_scan
    out: list[int] = []
    level = [pid]
    seen = {pid}
    while level and (depth is None or depth > 0):
        nxt = []
        for p in level:
            for child in find(p):
                if child not in seen:
                    seen.add(child)
                    nxt.append(child)
        out += nxt
        level = nxt
        if depth is not None:
            depth -= 1
    return out


def kill_all(list_pids: Callable[[], list[int]], wait_s: float = 0.5) -> int:
    """SIGKILL what ``list_pids`` returns until it lists no live process; how many were killed.

    Listed again after each round, so processes forked while the kill ran are caught too,
    and waited for (up to ``wait_s``), so a slow death is not counted again later.
    """
    killed: set[int] = set()
    deadline = time.monotonic() + wait_s
    while True:
        live = [p for p in list_pids() if (st := _stat(p)) is not None and st[0] not in "ZX"]
        fresh = [p for p in live if p not in killed]
        for pid in fresh:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        if not live or time.monotonic() > deadline:
            return len(killed)
        if not fresh:
            time.sleep(0.001)
