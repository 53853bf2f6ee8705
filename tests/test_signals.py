"""SIGTERM stops a command's async work as the first Ctrl-C does (``cli/signals.py``)."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
from types import FrameType

import pytest

from deeprepo.cli.signals import run_interruptible


def _marker(signum: int, frame: FrameType | None) -> None:  # a handler to see restored
    raise AssertionError("not expected to run")


@pytest.fixture
def sigterm_marker() -> object:
    before = signal.signal(signal.SIGTERM, _marker)
    yield _marker
    signal.signal(signal.SIGTERM, before)


async def _term_then_wait() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.sleep(30)


def test_sigterm_cancels_the_task_which_can_end_with_what_it_has(sigterm_marker: object) -> None:
    async def episode() -> str:
        try:
            await _term_then_wait()
        except asyncio.CancelledError:
            return "interrupted"  # as the episode does: ends, writes what it has
        return "ran to the end"

    assert run_interruptible(episode()) == "interrupted"
    assert signal.getsignal(signal.SIGTERM) is sigterm_marker


def test_a_cancellation_nobody_handles_is_a_keyboard_interrupt(sigterm_marker: object) -> None:
    # As asyncio does for Ctrl-C outside the episode (loading, writing): one "interrupted"
    # line and exit 130 in the command, never a CancelledError traceback.
    with pytest.raises(KeyboardInterrupt):
        run_interruptible(_term_then_wait())
    assert signal.getsignal(signal.SIGTERM) is sigterm_marker


def test_a_plain_run_returns_its_value_and_leaves_sigterm_as_it_was(
    sigterm_marker: object,
) -> None:
    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    assert run_interruptible(work()) == 7
    assert signal.getsignal(signal.SIGTERM) is sigterm_marker


def test_a_coroutine_the_loop_never_started_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(main: object) -> None:
        assert inspect.iscoroutine(main)
        main.close()
        raise RuntimeError("no loop today")

    async def work() -> int:
        return 1

    coro = work()
    monkeypatch.setattr(asyncio, "run", refuse)
    with pytest.raises(RuntimeError):
        run_interruptible(coro)
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED
