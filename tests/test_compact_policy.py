"""``scripted/compact``: the expert's method in replies a small model can learn to write.

It must keep most of the full expert's reward (≥ 0.85 of it) on small generated tasks with
the oracle worker, in replies of at most ~1,000 tokens each, estimated without a tokenizer as
characters / 3.5 (code tokenizes denser than prose's ~4 characters a token).
"""

from __future__ import annotations

import asyncio
import statistics

import pytest
from clihelp import ROOT
from rollout_table import rollout_table

from deeprepo.base import prompts
from deeprepo.base.chat import ChatRequest, Message
from deeprepo.builtin import make_policy
from deeprepo.builtin.scripted import FINAL, POLICIES
from deeprepo.rl.env.rollout import RolloutOutcome
from deeprepo.rl.env.tasks import TaskSpec, generate_tasks_in_memory
from deeprepo.rl.policies import compact
from deeprepo.rl.train.config import SftSection, TasksSection, TrainConfig
from deeprepo.rl.train.sft import expert_examples

MAX_TURN_TOKENS = 1000


def estimated_tokens(text: str) -> float:
    return len(text) / 3.5


# 27 tasks: compact records what one prompt reported without the expert's checks, so its
# reward rides on the worker's false and misplaced findings; over 9 tasks that drew it from
# 0.76 to 1.0 of the expert's, over these 27 it is 0.86 (0.97 before issue 19's round four,
# whose decoys, line for line their bugs, draw more false findings).
SPECS = [
    TaskSpec("small", seed=seed, lang=lang)
    for seed in range(41, 50)
    for lang in ("python", "js", "mixed")
]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[RolloutOutcome]]:
    tasks = [t for spec in SPECS for t in generate_tasks_in_memory(spec, 1)]
    return rollout_table(tasks, ("expert", "compact", "brief"), concurrency=4)


def test_compact_is_registered_with_its_final_turn() -> None:
    assert POLICIES["compact"] == compact.COMPACT
    assert FINAL["compact"] == compact.COMPACT_FINAL


@pytest.mark.e2e
def test_compact_keeps_most_of_the_experts_reward(
    outcomes: dict[str, list[RolloutOutcome]],
) -> None:
    expert = statistics.mean(o.reward.total for o in outcomes["expert"])
    mine = statistics.mean(o.reward.total for o in outcomes["compact"])
    assert expert >= 0.75, expert  # the reference itself works on these tasks
    assert mine >= 0.85 * expert, (mine, expert)
    for o in outcomes["compact"]:
        result = o.result
        assert [t.error for t in result.turns] == [None] * len(result.turns)
        assert result.stop_reason == "answer_ready"
        assert len(result.turns) == len(compact.COMPACT)
        # Every file reached a worker, in parallel batches of prompts with code in them.
        assert o.reward.parts["coverage_reward"] == 1.0
        # Its checks are short re-queries (under the 5 lines a content prompt needs): on a
        # task with four checks to sixteen file prompts they are a fifth of its prompts.
        assert o.reward.details["batch_share"] >= 0.9
        assert o.reward.parts["delegation_reward"] >= 0.75
        # A check that re-shows a doubtful line's file alone: 0.06-0.11 on a few of these
        # tasks, as the expert's own checks (up to 0.2 on them).
        assert o.reward.parts["redundancy_penalty"] <= 0.2
    # Over the tasks, as the expert: batched content prompts, next to no blind re-sends.
    parts = [o.reward.parts for o in outcomes["compact"]]
    assert statistics.mean(p["delegation_reward"] for p in parts) >= 0.9
    assert statistics.mean(p["redundancy_penalty"] for p in parts) <= 0.05


@pytest.mark.e2e
def test_compact_replies_are_short(outcomes: dict[str, list[RolloutOutcome]]) -> None:
    replies = [t.reply for o in outcomes["compact"] for t in o.result.turns]
    assert max(estimated_tokens(r) for r in replies) <= MAX_TURN_TOKENS
    expert = [t.reply for o in outcomes["expert"] for t in o.result.turns]
    assert max(estimated_tokens(r) for r in expert) > 4 * MAX_TURN_TOKENS  # what it replaces


def test_the_final_turn_reply_is_short_and_submits() -> None:
    request = ChatRequest(
        (
            Message("user", "start"),
            Message("assistant", "x"),
            Message("user", prompts.FINAL_TURN_NOTE),
        )
    )
    completion = asyncio.run(make_policy("compact").complete(request))
    assert estimated_tokens(completion.text) <= MAX_TURN_TOKENS
    assert "set_answer(" in completion.text


@pytest.mark.e2e
def test_compact_runs_make_sft_examples_of_short_turns() -> None:
    sft = SftSection(expert="scripted/compact", tasks=TasksSection(n=2, seed=7), max_turns=8)
    config = TrainConfig(episode={"sandbox": "process"}, sft=sft)
    examples, reward = expert_examples(sft, config)
    assert len(examples) == 2 and reward > 0.5
    for example in examples:
        assistant = [m["content"] for m in example["messages"] if m["role"] == "assistant"]
        assert len(assistant) == len(compact.COMPACT)
        assert all(estimated_tokens(a) <= MAX_TURN_TOKENS for a in assistant)
        assert example["meta"]["root"] == "scripted/compact"


@pytest.mark.e2e
def test_brief_submits_in_one_short_turn_and_keeps_most_of_the_reward(
    outcomes: dict[str, list[RolloutOutcome]],
) -> None:
    # scripted/brief: what issue 21's CPU run warm-starts a 135M model on (docs/training.md).
    expert = statistics.mean(o.reward.total for o in outcomes["expert"])
    mine = statistics.mean(o.reward.total for o in outcomes["brief"])
    assert mine >= 0.6 * expert, (mine, expert)
    for o in outcomes["brief"]:
        (turn,) = o.result.turns
        assert turn.error is None and o.result.stop_reason == "answer_ready"
        assert estimated_tokens(turn.reply) <= 300
        assert o.reward.parts["coverage_reward"] == 1.0


def test_the_cpu_learning_config_warm_starts_on_brief_with_lora_and_a_time_budget() -> None:
    from deeprepo.rl.train.config import load_config

    config = load_config(ROOT / "configs" / "learn-cpu.toml", need="grpo")
    assert config.sft is not None and config.grpo is not None
    assert config.sft.expert == "scripted/brief" and config.model.lora
    assert config.grpo.max_seconds is not None and config.grpo.max_seconds <= 2 * 3600
    assert config.episode.max_new_tokens >= estimated_tokens(compact.BRIEF[0]) * 1.2
    # The warm start and the evaluation tasks never meet the GRPO tasks' seeds.
    assert config.sft.tasks.seed != config.tasks.seed
