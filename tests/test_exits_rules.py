"""The rules that decide a run's exit code and whether it is complete (cli/exits.py,
base/records.py ``RunResult.complete``), one per test (docs/testing.md)."""

from __future__ import annotations

from typing import Any

import pytest

from deeprepo.base.records import RunResult
from deeprepo.cli import exits


def result(**kw: Any) -> RunResult:
    base: dict[str, Any] = dict(
        answer="# Report", incomplete=False, stop_reason="answer_ready", stop_detail="",
        findings=[], turns=[], sub_calls=3, files_covered=["a.py"], coverable_files=1, usage=[],
        total_cost_usd=0.0, wall_seconds=1.0, root_model="r", sub_model="s",
        sandbox_mode="process",
    )  # fmt: skip
    return RunResult(**{**base, **kw})


@pytest.mark.parametrize(
    ("answered", "failed", "complete", "code"),
    [
        (3, 2, True, exits.OK),
        (1, 1, True, exits.OK),
        (3, 2, False, exits.INCOMPLETE),
        (1, 5, False, exits.INCOMPLETE),
    ],
)
def test_partial_worker_failure_is_not_an_error(
    answered: int, failed: int, complete: bool, code: int
) -> None:
    """Some worker calls failed, others answered: the run analysed something, so its exit
    code says only whether it is complete (0 or 3), never 1."""
    r = result(sub_calls=answered, sub_calls_failed=failed, unaudited=[] if complete else ["a"])
    assert exits.for_result(r) == code


@pytest.mark.parametrize("failed", [1, 7])
def test_every_worker_call_failing_is_an_error(failed: int) -> None:
    """No worker call answered and at least one failed: nothing was analysed, exit 1."""
    assert exits.for_result(result(sub_calls=0, sub_calls_failed=failed)) == exits.ERROR


def test_no_worker_call_at_all_is_not_an_error() -> None:
    """A run that asked no worker (and so none failed) exits on its completeness."""
    assert exits.for_result(result(sub_calls=0, sub_calls_failed=0)) == exits.OK
    r = result(sub_calls=0, sub_calls_failed=0, unaudited=["a.py"])
    assert exits.for_result(r) == exits.INCOMPLETE


def test_an_interrupted_run_exits_130_whatever_else_happened() -> None:
    """Ctrl-C or SIGTERM wins over every other outcome: exit 130."""
    r = result(stop_reason="interrupted", sub_calls=0, sub_calls_failed=4, incomplete=True)
    assert exits.for_result(r) == exits.INTERRUPTED


def test_a_root_error_exits_1_even_with_the_answer_set() -> None:
    """A run stopped on an error exits 1 even when the answer was set before it."""
    assert exits.for_result(result(stop_reason="error")) == exits.ERROR


@pytest.mark.parametrize(
    ("kw", "complete"),
    [
        ({}, True),
        ({"incomplete": True}, False),
        ({"unaudited": ["a.py"]}, False),
        ({"stop_reason": "interrupted"}, False),
        ({"stop_reason": "max_turns"}, True),  # answered on the final turn, all audited
    ],
)
def test_complete_means_answered_all_audited_and_not_interrupted(
    kw: dict[str, Any], complete: bool
) -> None:
    """Complete: the answer set, every audit-set file audited, and the run not interrupted."""
    assert result(**kw).complete is complete


def test_the_exit_codes_are_the_documented_numbers() -> None:
    """Scripts test these numbers: 0, 1, 2, 3 and 130, as --help says."""
    assert (exits.OK, exits.ERROR, exits.USAGE, exits.INCOMPLETE, exits.INTERRUPTED) == (
        0, 1, 2, 3, 130,
    )  # fmt: skip
    for n in ("0 complete", "1 stopped on an error", "2 bad usage", "3 incomplete", "130"):
        assert n in exits.EXIT_CODES_HELP
