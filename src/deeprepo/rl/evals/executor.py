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
import importlib.util
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
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
    "ray_session",
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
        # "local" starts a new instance: None would join RAY_ADDRESS or a `ray start` one
        "address": "local",
        "num_cpus": num_cpus,
        "include_dashboard": False,
        "_node_ip_address": "127.0.0.1",
        "log_to_driver": False,
    }
    if temp_dir is not None:
        options["_temp_dir"] = str(temp_dir)
    return options


# Ray swaps 127.0.0.1 for the machine's outward address and its daemons listen on every
# interface unless "clusters" are off (its switch for laptops): then all of them, and the
# workers, which read the variable when they import Ray, bind to 127.0.0.1 only.
_CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _is_loopback(address: str) -> bool:
    host = address.split("://")[-1].rsplit(":", 1)[0].strip("[]")
    return host == "localhost" or host == "::1" or host.startswith("127.")


@contextmanager
def _loopback_only() -> Iterator[None]:
    """Within: a Ray started or joined here stays on 127.0.0.1 (the switch restored after)."""
    before = os.environ.get(_CLUSTER_SWITCH)
    os.environ[_CLUSTER_SWITCH] = "0"
    constants: Any = sys.modules.get("ray._private.ray_constants")  # read at import: set too
    cluster = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_CLUSTER_SWITCH, None)
        else:
            os.environ[_CLUSTER_SWITCH] = before
        if constants is not None:
            constants.ENABLE_RAY_CLUSTER = cluster


@contextmanager
def ray_session(
    address: str | None = None, num_cpus: int = 2, temp_dir: Path | None = None
) -> Iterator[str]:
    """Ray for the block: join ``address``, or start a local instance (loopback only, no
    dashboard, ``num_cpus`` CPUs, files under ``temp_dir``); shut down on the way out.
    Yields the cluster's address. No usage statistics are ever sent from here."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # read when Ray starts
    try:
        import ray
    except ImportError:
        raise UsageError(f"--executor ray needs Ray: {INSTALL_HINT}") from None
    with ExitStack() as stack:
        if address is None or _is_loopback(address):
            stack.enter_context(_loopback_only())
        if address is None:
            ray.init(**local_ray_options(num_cpus, temp_dir))
        else:
            ray.init(address=address, log_to_driver=False)
        try:
            yield str(ray.get_runtime_context().gcs_address)
        finally:
            ray.shutdown()


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
        self._session = ExitStack()  # the Ray this executor started or joined, if it did
        self._task: Any = None

    def start(self) -> None:
        """Join ``address``, use a Ray already initialised in this process, or start a local
        one; a missing Ray is a :class:`UsageError` that says how to install it."""
        if self._task is not None:
            return
        try:
            import ray
        except ImportError:
            raise UsageError(f"--executor ray needs Ray: {INSTALL_HINT}") from None
        if not ray.is_initialized():
            self._session.enter_context(ray_session(self.address, self.num_cpus))
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
            try:
                ray.cancel(ref, force=True)
            except Exception:  # Ray already shut down: its workers went with it
                pass
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
        """Shut down the Ray this executor started or joined (one it found keeps running)."""
        self._task = None
        self._session.close()


def make_executor(name: str, address: str | None = None, parallelism: int = 2) -> Executor:
    """The executor of ``--executor NAME [--address ADDR]``; a local Ray gets
    ``parallelism`` CPUs (the command's concurrency). Checks the choice, starts nothing."""
    if name not in EXECUTORS:
        raise UsageError(f"--executor must be one of {', '.join(EXECUTORS)}, not {name!r}")
    if name == "local":
        if address is not None:
            raise UsageError("--address needs --executor ray (it names a Ray cluster)")
        return Executor()
    # Found, not imported: Ray reads its settings when first imported (ray_session).
    if importlib.util.find_spec("ray") is None:
        raise UsageError(f"--executor ray needs Ray: {INSTALL_HINT}")
    return RayExecutor(address, max(1, parallelism))
