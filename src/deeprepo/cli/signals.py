"""Running a command's async work so that SIGTERM stops it as the first Ctrl-C does.

asyncio's runner turns the first SIGINT into a cancellation of the main task (the episode,
the bench, the eval ends ``interrupted`` and writes what it has) and a cancellation that
escapes into KeyboardInterrupt. :func:`run_interruptible` gives SIGTERM (``kill``, a
supervisor, a CI timeout) the same two effects. It also stops a job that a
non-interactive shell started with ``&``: such a job ignores SIGINT (POSIX), and asyncio
then installs no SIGINT handler at all. Outside a loop, ``cli.app.main`` turns SIGTERM
into KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

__all__ = ["run_interruptible"]

T = TypeVar("T")


def run_interruptible(coro: Coroutine[Any, Any, T], on_stop: Callable[[], None] | None = None) -> T:
    """``asyncio.run(coro)``, where SIGTERM cancels ``coro``'s task as Ctrl-C does, and a
    cancellation it causes that escapes ``coro`` is raised as KeyboardInterrupt.

    ``on_stop`` is called once, at once, on the first Ctrl-C or SIGTERM (the command says
    "stopping…" while the work winds down and writes what it has)."""
    terminated = False
    told = False

    def tell() -> None:
        nonlocal told
        if on_stop is not None and not told:
            told = True
            on_stop()

    async def main() -> T:
        nonlocal terminated
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def on_sigterm() -> None:
            nonlocal terminated
            terminated = True
            tell()
            if task is not None:
                task.cancel()

        try:
            loop.add_signal_handler(signal.SIGTERM, on_sigterm)
            installed = True
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            installed = False
        # asyncio's runner has installed its SIGINT handler (first Ctrl-C cancels the task,
        # the second raises): it is wrapped, so the line comes before the winding down.
        runner_sigint = signal.getsignal(signal.SIGINT) if installed else None
        wrapped = False
        if on_stop is not None and callable(runner_sigint):
            forward = runner_sigint

            def on_sigint(signum: int, frame: FrameType | None) -> None:
                tell()
                forward(signum, frame)

            signal.signal(signal.SIGINT, on_sigint)
            wrapped = True
        try:
            return await coro
        finally:
            if wrapped:
                signal.signal(signal.SIGINT, runner_sigint)
            if installed:
                loop.remove_signal_handler(signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if terminated:
            raise KeyboardInterrupt from None
        raise
    finally:
        coro.close()  # a no-op once it ran; closes it when the loop never started it
        if previous is not None and signal.getsignal(signal.SIGTERM) is not previous:
            try:
                signal.signal(signal.SIGTERM, previous)  # remove_signal_handler left SIG_DFL
            except ValueError:  # not the main thread: nothing was installed
                pass
