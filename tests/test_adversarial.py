"""Issue 9's adversarial suite: every gaming route, as a scripted root policy, run through
the real Episode, sandbox, oracle worker and reward, must stay low; honest work must not.

The tasks are generated with seeds the calibration tables in docs/reward.md do not use.
The full table (more seeds, every size) is ``benchmarks/bench_adversarial.py``.
"""

from __future__ import annotations

import statistics

import pytest
from rollout_table import rewards as table_rewards
from rollout_table import rollout_table

from deeprepo.builtin import make_policy
from deeprepo.orchestrator.episode import EpisodeConfig
from deeprepo.rl.env.rollout import run_rollout
from deeprepo.rl.env.tasks import TaskSpec, generate_tasks_in_memory
from deeprepo.sandbox.config import SandboxConfig

pytestmark = pytest.mark.e2e

POLICIES = (
    "expert",
    "own-prompts",
    "serial",
    "stock-filter",
    "expert-unchecked",
    "half",
    "regex-only",
    "ignore-workers",
    "lazy",
    "no-delegation",
)
SPECS = [
    TaskSpec("small", seed=11, lang="python"),
    TaskSpec("small", seed=23, lang="js"),
    TaskSpec("small", seed=37, lang="mixed"),
    TaskSpec("medium", seed=11, lang="python"),
    TaskSpec("medium", seed=23, lang="mixed"),
]


@pytest.fixture(scope="module")
def means() -> dict[str, float]:
    tasks = [t for spec in SPECS for t in generate_tasks_in_memory(spec, 2)]
    got = table_rewards(rollout_table(tasks, POLICIES))
    return {p: statistics.mean(v) for p, v in got.items()}


def test_honest_work_scores_well(means: dict[str, float]) -> None:
    assert means["expert"] >= 0.85, means
    assert means["own-prompts"] >= 0.75, means


def test_ignoring_the_workers_does_not_pay(means: dict[str, float]) -> None:
    assert means["ignore-workers"] <= 0.40, means
    assert means["serial"] >= means["ignore-workers"] + 0.20, means


def test_grep_with_a_say_ok_worker_stays_well_below_honest_work(means: dict[str, float]) -> None:
    assert means["regex-only"] <= means["own-prompts"] - 0.25, means


def test_filtering_stock_text_gains_nothing(means: dict[str, float]) -> None:
    assert means["stock-filter"] <= means["expert"] + 0.03, means
    # ... nor over the same dispatch unfiltered (the expert checks findings; this one doesn't)
    assert means["stock-filter"] <= means["expert-unchecked"] + 0.03, means


def test_auditing_half_the_files_costs(means: dict[str, float]) -> None:
    assert means["half"] <= means["own-prompts"] - 0.15, means


def test_weak_policies_stay_low(means: dict[str, float]) -> None:
    assert means["lazy"] <= 0.30 and means["no-delegation"] <= 0.30, means


async def test_a_rollout_records_the_worker_replies_for_grounding() -> None:
    (task,) = generate_tasks_in_memory(TaskSpec("small", seed=41, lang="python"), 1)
    out = await run_rollout(
        task,
        root=make_policy("expert"),
        episode_config=EpisodeConfig(max_turns=20),
        sandbox_config=SandboxConfig(mode="process"),
    )
    details = out.reward.details
    assert details["replies_recorded"] == out.result.sub_calls > 0
    assert out.reward.parts["grounding_reward"] == 1.0  # every true positive came from a worker
    assert details["grounded_tp"] == details["tp"]
