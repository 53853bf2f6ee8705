"""Where an evaluation's rollouts and a bench's cells run: here, or as Ray tasks.

The runners (``evals.runner``, ``bench.runner``) keep their own pool: the concurrency
gate, the cost cap, the results file, resume. They hand each unit of work, a module-level
coroutine function and picklable arguments, to an :class:`Executor`. The local one awaits
it in this process, as the runners always did; :class:`RayExecutor` runs it in a Ray
worker (``asyncio.run`` there) and awaits its result here, so the files the runner writes
are the same either way.

Ray is an optional extra (``pip install 'deeprepo[ray]'``), imported only when asked for.
A Ray instance started here binds to 127.0.0.1 only, has no dashboard and sends no usage
statistics; one this process did not start (``--address``, or one already initialised) is
used and left running.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from deeprepo.base.errors import DeeprepoError, UsageError

__all__ = [
    "EXECUTORS",
    "Executor",
    "RayExecutor",
    "RemoteTaskError",
    "local_ray_options",
    "make_executor",
]

T = TypeVar("T")

EXECUTORS = ("local", "ray")
INSTALL_HINT = "pip install 'deeprepo[ray]' (or pip install ray)"


class RemoteTaskError(DeeprepoError):
    """A Ray task died or could not run (its worker crashed, the cluster went away)."""


class Executor:
    """Runs each unit of work in this process (the default, ``--executor local``)."""

    name = "local"
    #: True when the work runs in another process: the runner then ships its inputs
    #: (no shared model clients, kernel pool or budget object) and takes results back.
    remote = False

    def start(self) -> None:
        """Get ready to run work (nothing to do here)."""

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(*args)``."""
        return await fn(*args)

    def close(self) -> None:
        """Release what the executor holds (nothing, here)."""


def local_ray_options(num_cpus: int, temp_dir: Path | None = None) -> dict[str, Any]:
    """``ray.init`` keywords of a Ray instance started on this machine: loopback only, no
    dashboard, ``num_cpus`` workers, its files under ``temp_dir`` (Ray's default else)."""
    options: dict[str, Any] = {
        "num_cpus": num_cpus,
        "include_dashboard": False,
        "_node_ip_address": "127.0.0.1",
        "log_to_driver": False,
    }
    if temp_dir is not None:
        options["_temp_dir"] = str(temp_dir)
    return options


def _call_here(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """The body of every Ray task: call ``fn``; a coroutine runs on a fresh event loop."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


class RayExecutor(Executor):
    """Runs each unit of work as one Ray task (one CPU, never retried: a task whose worker
    dies fails its unit, which the runner records as it records a local failure)."""

    name = "ray"
    remote = True

    def __init__(self, address: str | None = None, num_cpus: int = 2) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self._started = False  # this executor called ray.init, so it shuts Ray down
        self._task: Any = None

    def start(self) -> None:
        """Connect to ``address``, reuse a Ray already initialised in this process, or start
        a local one; a missing Ray is a :class:`UsageError` that says how to install it."""
        if self._task is not None:
            return
        # Read when Ray starts: no usage report is ever sent from here.
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        try:
            import ray
        except ImportError:
            raise UsageError(f"--executor ray needs Ray: {INSTALL_HINT}") from None
        if not ray.is_initialized():
            if self.address is not None:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(**local_ray_options(self.num_cpus))
            self._started = True
        self._task = ray.remote(num_cpus=1, max_retries=0)(_call_here)

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` in a Ray worker and await its result here. Cancelling this
        (Ctrl-C) cancels the task and kills its worker, and with it the worker's kernel."""
        import ray
        from ray.exceptions import RayError, RayTaskError

        self.start()
        ref = self._task.remote(fn, args)
        try:
            result: T = await ref
        except asyncio.CancelledError:
            ray.cancel(ref, force=True)
            raise
        except RayTaskError as exc:
            # The work itself raised: raise what it raised, as the local executor would.
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, Exception) else exc) from None
        except RayError as exc:
            detail = " ".join(str(exc).split())[:300]
            raise RemoteTaskError(
                f"the Ray task running {getattr(fn, '__name__', fn)} failed: {detail}"
            ) from None
        return result

    def close(self) -> None:
        """Shut down the Ray instance this executor started (one it joined keeps running)."""
        if self._started:
            import ray

            ray.shutdown()
            self._started = False
        self._task = None


def make_executor(name: str, address: str | None = None, parallelism: int = 2) -> Executor:
    """The executor of ``--executor NAME [--address ADDR]``; a local Ray gets
    ``parallelism`` CPUs (the command's concurrency). Checks the choice, starts nothing."""
    if name not in EXECUTORS:
        raise UsageError(f"--executor must be one of {', '.join(EXECUTORS)}, not {name!r}")
    if name == "local":
        if address is not None:
            raise UsageError("--address needs --executor ray (it names a Ray cluster)")
        return Executor()
    try:
        import ray  # noqa: F401
    except ImportError:
        raise UsageError(f"--executor ray needs Ray: {INSTALL_HINT}") from None
    return RayExecutor(address, max(1, parallelism))
