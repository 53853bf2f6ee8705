"""The rules of the RL reward (rl/env/reward.py), one per test, through its public functions
(``compute_reward``, ``grounded_entries``, ``DispatchStats``): written to kill the mutants that
survived the older tests (docs/testing.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from deeprepo.base.finding import Finding
from deeprepo.base.prompts import file_audit_prompt
from deeprepo.base.records import RunResult, Turn
from deeprepo.findings.coverage import CoverageIndex
from deeprepo.findings.grading import parse_ground_truth
from deeprepo.rl.env.reward import DispatchStats, RewardWeights, compute_reward, grounded_entries


def module(name: str, n: int = 40) -> str:
    return "\n".join(f"value_{name}_{i} = compute_{name}(arg_{i}, {i})" for i in range(n)) + "\n"


FILES = {"app/a.py": module("a"), "app/b.py": module("b")}
GT: list[dict[str, Any]] = [
    {"id": "a", "file": "app/a.py", "start_line": 20, "end_line": 22, "cwe": "CWE-89"},
    {"id": "b", "file": "app/b.py", "start_line": 20, "end_line": 22, "cwe": "CWE-89"},
]
TRUE = [
    Finding("app/a.py", 20, 20, "sql-injection", "CWE-89", "high", "t"),
    Finding("app/b.py", 20, 20, "sql-injection", "CWE-89", "high", "t"),
]


def turn(index: int, **tokens: int) -> Turn:
    counts = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0}
    counts |= {"cache_write_tokens": 0, **tokens}
    return Turn(
        index=index, reply="", code_blocks=[], output="", error=None, sub_calls=0,
        findings_added=0, answer_ready=False, cost_usd=0.0, seconds=0.0, **counts,
    )  # fmt: skip


def result(findings: list[Finding], prompts: list[str], turns: list[Turn]) -> RunResult:
    return RunResult(
        answer="r", incomplete=False, stop_reason="answer_ready", stop_detail="",
        findings=findings, turns=turns, sub_calls=len(prompts), files_covered=[],
        coverable_files=0, usage=[], total_cost_usd=0.0, wall_seconds=1.0, root_model="t",
        sub_model="o", sandbox_mode="process", sent_prompts=prompts,
        batch_sizes=[len(prompts)] if prompts else [],
    )  # fmt: skip


AUDIT = [file_audit_prompt(p, t) for p, t in FILES.items()]


def test_cache_read_and_write_tokens_are_root_tokens() -> None:
    """The root's token budget counts every token it was sent or wrote, cached ones too."""
    cached = [turn(1, input_tokens=10, output_tokens=20, cache_read_tokens=300_000,
                   cache_write_tokens=4_000)]  # fmt: skip
    plain = [turn(1, input_tokens=10, output_tokens=20)]
    heavy = compute_reward(result(TRUE, AUDIT, cached), GT, FILES)
    light = compute_reward(result(TRUE, AUDIT, plain), GT, FILES)
    assert heavy.details["root_tokens"] == 304_030
    assert light.details["root_tokens"] == 30
    assert heavy.parts["efficiency_reward"] < light.parts["efficiency_reward"]
    writes = [turn(1, cache_write_tokens=300_000)]
    assert compute_reward(result(TRUE, AUDIT, writes), GT, FILES).details["root_tokens"] == 300_000


def test_the_total_never_goes_below_zero() -> None:
    """Penalties larger than what was earned give 0, not a negative reward."""
    r = compute_reward(result([], [], [turn(1)]), GT, FILES)
    assert r.parts["zero_delegation_penalty"] == 1.0 and r.total == 0.0


def test_the_total_never_goes_above_one() -> None:
    """Weights that sum past 1 cannot push a perfect run's reward past 1."""
    heavy = RewardWeights(quality=1.0, coverage=1.0)
    r = compute_reward(result(TRUE, AUDIT, [turn(1, input_tokens=10)]), GT, FILES, heavy)
    assert r.details["gate"] == 1.0 and r.total == 1.0


@pytest.mark.parametrize(
    ("line", "grounded"),
    [(16, False), (17, True), (20, True), (22, True), (25, True), (26, False)],
)
def test_a_worker_line_within_tolerance_of_the_bug_grounds_it(line: int, grounded: bool) -> None:
    """A worker's reply grounds a bug when it names a line within tolerance (3 here) of the
    bug's range, in the bug's file."""
    entries = parse_ground_truth(GT)
    replies = [("prompt", f'{{"file": "app/a.py", "line": {line}}}')]
    ids = grounded_entries(replies, entries, CoverageIndex(FILES), tolerance=3)
    assert ids == ({"a"} if grounded else set())


def test_an_unnamed_line_grounds_only_bugs_in_files_the_prompt_showed() -> None:
    """A reply that names no file grounds the bugs of the files whose content its prompt
    carried, never those of a file it did not show."""
    entries = parse_ground_truth(GT)
    index = CoverageIndex(FILES)
    only_a = [(AUDIT[0], "Line 21: user input reaches the query")]
    assert grounded_entries(only_a, entries, index, tolerance=3) == {"a"}
    both = [(AUDIT[0] + "\n" + AUDIT[1], '[{"line": 21}]')]
    assert grounded_entries(both, entries, index, tolerance=3) == {"a", "b"}
    nothing = [("Audit the payment flow, no code here", "line 21")]
    assert grounded_entries(nothing, entries, index, tolerance=3) == set()


def test_grounding_scales_the_gate_between_the_floor_and_one() -> None:
    """With worker replies recorded, the gate is quality x (floor + (1 - floor) x share of
    the true positives a worker reported)."""
    run = result(TRUE, AUDIT, [turn(1, input_tokens=10)])
    half = [(AUDIT[0], '{"line": 21}')]
    r = compute_reward(run, GT, FILES, replies=half)
    assert r.parts["grounding_reward"] == 0.5 and r.details["gate"] == 0.75
    assert compute_reward(run, GT, FILES, replies=[]).details["gate"] == 0.5


@pytest.mark.parametrize(
    ("repeated", "duplicates", "redundancy"),
    [(5, 1, 0.5), (1, 3, 0.75), (0, 0, 0.0), (10, 4, 1.0)],
)
def test_redundancy_is_the_larger_of_the_line_and_prompt_shares(
    repeated: int, duplicates: int, redundancy: float
) -> None:
    """Redundancy: repeated lines / shown lines or duplicate prompts / prompts, the larger."""
    stats = DispatchStats(
        covered=frozenset(), prompts=4, content_prompts=4, shown_lines=10, distinct_lines=10,
        duplicate_prompts=duplicates, repeated_lines=repeated,
    )  # fmt: skip
    assert stats.redundancy == redundancy


def test_redundancy_of_nothing_sent_is_zero() -> None:
    """No prompt and no shown line: nothing was repeated."""
    stats = DispatchStats(frozenset(), 0, 0, 0, 0, 0)
    assert stats.redundancy == 0.0
    assert replace(stats, prompts=2, duplicate_prompts=1).redundancy == 0.5
