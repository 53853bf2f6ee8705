"""A warm pool of child interpreters for one isolation setup.

A pooled child has started its interpreter, loaded its helpers and said "ready"
before any codebase is known; ``Kernel.start`` then only sends the payload. The
pool holds plain ``Popen`` objects and file descriptors, not asyncio objects, so
one pool serves any event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import threading
from concurrent.futures import Future

from deeprepo.base.closing import Closing
from deeprepo.sandbox import cgroup
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import resolve_mode
from deeprepo.sandbox.spawn import SpawnedChild, submit_spawn

_REFILL_DELAY_S = 0.05


def pool_key(mode: str, config: SandboxConfig) -> tuple[str, int, cgroup.CgroupLimits]:
    """What a pre-started child was set up with: a kernel may use it only if its own matches."""
    return (mode, config.tmp_size_mb, config.cgroup_limits())


class KernelPool(Closing):
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
        futures = [submit_spawn(*self.key()) for _ in range(max(0, missing))]
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

    def open(self) -> None:
        """Entering a ``with`` block fills the pool."""
        self.fill()
