"""The load phase of a run, off the event loop: SIGTERM, Ctrl-C and ``--timeout`` act on it.

Loading a repository (the walk, the entry points, the architecture pass) is synchronous
work on untrusted text. Run on the event loop, it blocks the loop, so the SIGTERM handler
(:mod:`deeprepo.cli.signals`) and the run's clock wait for it however long it takes. Here
it runs in a daemon thread and the loop awaits it: a cancellation (SIGTERM, Ctrl-C) ends
the await at once, and the daemon thread never holds the process open; past the run's
``--timeout`` the load is abandoned and :class:`LoadTimeout` says so.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from deeprepo.base.errors import DeeprepoError

__all__ = ["LoadTimeout", "run_load"]

T = TypeVar("T")


class LoadTimeout(DeeprepoError):
    """The load ran past the run's ``--timeout``: nothing was audited."""

    exit_code = 3  # cli.exits.INCOMPLETE: a timeout, not an error


async def run_load(work: Callable[[], T], timeout_s: float | None) -> tuple[T, float]:
    """``work()`` in a daemon thread, awaited: ``(its result, seconds it took)``.

    Raises what ``work`` raised, :class:`LoadTimeout` past ``timeout_s``, and
    ``CancelledError`` as soon as the awaiting task is cancelled.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    started = time.monotonic()

    def settle(result: T | None, exc: BaseException | None) -> None:
        if done.done():  # abandoned: a timeout or a cancellation came first
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        try:
            result = work()
        except BaseException as exc:  # handed to the awaiting task, which raises it
            outcome: tuple[T | None, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: nobody waits for this load any more
            pass

    threading.Thread(target=target, name="deeprepo-load", daemon=True).start()
    try:
        result = await asyncio.wait_for(asyncio.shield(done), timeout_s)
    except TimeoutError:
        raise LoadTimeout(
            f"loading the repository ran past --timeout {timeout_s:g}s (a very large or "
            "hostile repository?); nothing was audited and no report was written: raise "
            "--timeout, or analyse a subfolder"
        ) from None
    return result, time.monotonic() - started
