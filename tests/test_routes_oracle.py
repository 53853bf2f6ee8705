"""Issue 19 item 2's routes (``rl/policies/routes_oracle.py``) through the real Episode,
sandbox, oracle worker and reward: a worker told not to audit finds nothing, guesses no
worker reported are not grounded, and one giant prompt finds less than honest batches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from deeprepo.builtin import make_policy
from deeprepo.orchestrator.episode import EpisodeConfig
from deeprepo.rl.env.oracle import OracleWorker
from deeprepo.rl.env.rollout import RolloutOutcome, run_rollout
from deeprepo.rl.env.tasks import Task, TaskSpec, generate_tasks_in_memory
from deeprepo.rl.policies.routes_oracle import NON_AUDIT_ASKS, ROUTES
from deeprepo.rl.policies.shape_table import SHAPES, TRAINED_ON
from deeprepo.rl.tasks.generator import task_seeds
from deeprepo.sandbox.config import SandboxConfig

pytestmark = pytest.mark.e2e

SPECS = [TaskSpec("small", seed=11, lang="python"), TaskSpec("small", seed=23, lang="js")]
# Every base seed a test, the calibration or a table of docs/reward.md uses.
USED_SEEDS = [7, 11, 23, 37, 41, 100, 101, 202, 303, 404, 505, 606, *range(8811, 8817)]


def rollout(policy: str, task: Task, **oracle: Any) -> RolloutOutcome:
    return asyncio.run(
        run_rollout(
            task,
            root=make_policy(policy),
            episode_config=EpisodeConfig(max_turns=20),
            sandbox_config=SandboxConfig(mode="process"),
            oracle_options=oracle or None,
        )
    )


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return [t for spec in SPECS for t in generate_tasks_in_memory(spec, 1)]


@pytest.mark.parametrize("policy", sorted(NON_AUDIT_ASKS))
def test_a_worker_asked_for_something_else_reports_nothing(policy: str, tasks: list[Task]) -> None:
    """Every file reaches a worker with a non-audit request (coverage 1): the replies hold no
    finding, so the run records none and scores 0."""
    for task in tasks:
        out = rollout(policy, task)
        assert out.reward.parts["coverage_reward"] == 1.0, policy
        assert out.result.findings == [] and out.reward.total == 0.0, policy


def test_guesses_no_worker_reported_are_not_grounded(tasks: list[Task]) -> None:
    """The template matcher sends every file with the audit request and reads no reply. When
        the workers report no true bug (miss rate 1), none of its correct guesses is grounded;
        and since the root never printed the code either, they are blind guesses: the gate is 0.
    With the default worker, only those a worker happened to report are grounded."""
    tps = 0
    for task in tasks:
        blind = rollout("template-matcher", task, miss_rate=1.0, false_rate=0.0)
        tps += int(blind.reward.details["tp"])
        if blind.reward.details["tp"]:
            assert blind.reward.parts["grounding_reward"] == 0.0
            # It prints no code either: its right guesses are blind, worth nothing.
            assert blind.reward.details["root_read_tp"] == 0.0
            assert blind.reward.details["gate"] == 0.0
        seen = rollout("template-matcher", task)
        assert seen.reward.details["grounded_tp"] <= seen.reward.details["tp"]
    assert tps > 0  # the matcher did guess some bugs right: the test measured something


def test_the_matcher_was_trained_on_seeds_no_test_uses() -> None:
    """The shape table comes from training seeds disjoint from every seed used to test or
    report the reward (base seeds and the task seeds they draw)."""
    base = TRAINED_ON["base_seeds"]
    assert isinstance(base, list) and SHAPES
    assert not set(base) & set(USED_SEEDS)
    trained = {s for b in base for s in task_seeds(b, 4)}
    assert not trained & {s for b in USED_SEEDS for s in task_seeds(b, 12)}


def test_two_giant_prompts_find_less_than_honest_batches() -> None:
    """All files in two prompts: within the worker's context the two prompts read like any
    batch, past it (a large task) recall falls as (context / lines) ** 2."""
    # A large task: on medium, per-file packs small files into three prompts, nearly the
    # giant route's own dispatch, so the two differ there only by the oracle's draws.
    (task,) = generate_tasks_in_memory(TaskSpec("large", seed=11, lang="python"), 1)
    giant = rollout("two-giant-prompts", task)
    honest = rollout("per-file", task)
    assert giant.result.batch_sizes == [2] and giant.reward.parts["delegation_reward"] == 1.0
    assert giant.reward.details["recall"] < honest.reward.details["recall"]
    assert giant.reward.total < honest.reward.total


def test_two_giant_prompts_past_the_context_are_charged_as_unread() -> None:
    """Coverage is weighed by the attention the oracle reads by (decision 102): two prompts
    of a medium task's 3,000 lines are skimmed, and the run pays for the code it skimmed."""
    (task,) = generate_tasks_in_memory(TaskSpec("medium", seed=11, lang="js"), 1)
    giant = rollout("two-giant-prompts", task)
    honest = rollout("per-file", task)
    assert honest.reward.parts["coverage_reward"] == 1.0
    assert giant.reward.parts["coverage_reward"] <= 0.25
    assert giant.reward.parts["early_finalize_penalty"] >= 0.75
    assert giant.reward.total <= 0.40 < honest.reward.total


def test_one_prompt_of_twenty_files_finds_less_than_twenty_prompts() -> None:
    """The oracle alone: the same twenty 60-line files, one prompt each or all in one
    (1,200 lines, past the 800-line context): the one prompt reports about (800 / 1,200)²
    of what the twenty do."""
    files = {
        f"svc/m{k}.py": "\n".join(
            f"    value_{k}_{i} = compute_{k}(arg_{i}, {i})" for i in range(60)
        )
        for k in range(20)
    }
    gt = [{"file": p, "start_line": 30, "cwe": "CWE-89", "kind": "sql-injection"} for p in files]
    ask = "Audit this code for security bugs.\n\n"
    per_file = one = 0
    for seed in range(10):
        w = OracleWorker(gt, miss_rate=0.0, false_rate=0.0, codebase=files, seed=seed)
        per_file += sum(len(w.findings(ask + text)) for text in files.values())
        one += len(w.findings(ask + "\n\n".join(files.values())))
    assert per_file == 200
    assert 0.3 <= one / per_file <= 0.6, one  # (800 / 1,201)² = 0.44


def test_every_route_is_a_registered_policy() -> None:
    """Each route is a ``scripted/<name>`` root model."""
    for name in ROUTES:
        assert make_policy(name).name == f"scripted/{name}"
