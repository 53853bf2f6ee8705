"""One RL rollout: one Episode over one task, scored by the reward.

The Episode is imported, never copied: a rollout is exactly what ``deeprepo analyze``
runs, with the ``oracle`` worker (by default) answering from the task's ground truth.
The oracle's seed is derived from ``(seed, task id, rollout index)``, so every rollout
is reproducible and the rollouts of one example differ from one another. The worker's
replies are recorded on the way (``RecordingModel``) so the reward can tell findings a
worker reported from findings the root wrote on its own (``grounding``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from deeprepo.base.chat import ChatModel, ChatRequest, Completion
from deeprepo.base.records import RunResult
from deeprepo.findings.coverage import CoverageIndex
from deeprepo.orchestrator.episode import Episode, EpisodeConfig
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.registry import HttpClient
from deeprepo.providers.spec import parse_model_spec
from deeprepo.rl.env.reward import Reward, RewardWeights, compute_reward
from deeprepo.rl.env.tasks import Task, budget_instruction
from deeprepo.run.models import build_model
from deeprepo.run.wiring import CallSettings, RunLimits, wire
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.pool import KernelPool

__all__ = [
    "STOP_CONDITIONS",
    "RecordingModel",
    "RolloutOutcome",
    "build_sub_model",
    "derive_seed",
    "run_rollout",
    "stop_condition",
]


# Episode stop reason → the stop condition the summary reports, and whether it truncates.
STOP_CONDITIONS: dict[str, tuple[str, bool]] = {
    "answer_ready": ("episode_done", False),
    "max_turns": ("max_turns_reached", True),
    "budget": ("budget", True),
    "timeout": ("timeout", True),
    "error": ("error", False),
}


def stop_condition(stop_reason: str) -> tuple[str, bool]:
    """``(condition, is_truncated)`` for an Episode stop reason; unknown ones pass through.

    Runs stopped by the turn limit, the budget or the clock were cut off before their
    answer, so they count as truncated; an error is a failure, not a truncation.
    """
    return STOP_CONDITIONS.get(stop_reason, (stop_reason or "unknown", False))


class RecordingModel:
    """Wraps a sub-model and keeps every ``(prompt, reply)`` it answered, in call order;
    closing it leaves the wrapped model to its owner."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.replies: list[tuple[str, str]] = []

    @property
    def name(self) -> str:
        return self.model.name

    async def complete(self, request: ChatRequest) -> Completion:
        completion = await self.model.complete(request)
        prompt = request.last_user_text()
        self.replies.append((prompt, completion.text))
        return completion

    async def aclose(self) -> None:
        return None


def derive_seed(seed: int, example: str, rollout: int) -> int:
    """A 63-bit seed for one rollout of one example, stable across runs and machines."""
    digest = hashlib.sha256(f"{seed}\0{example}\0{rollout}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class RolloutOutcome:
    """What one rollout produced: the Episode's result, its reward and its timing."""

    task_id: str
    rollout: int
    result: RunResult
    reward: Reward
    seconds: float  # the Episode
    worker_seed: int
    reward_seconds: float = 0.0  # scoring it

    @property
    def stop_condition(self) -> str:
        return stop_condition(self.result.stop_reason)[0]

    @property
    def is_truncated(self) -> bool:
        return stop_condition(self.result.stop_reason)[1]


def build_sub_model(
    spec: str,
    task: Task,
    *,
    worker_seed: int,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    oracle_options: Mapping[str, Any] | None = None,
    timeout_s: float = 600.0,
    http_client: HttpClient = "fast",
) -> ChatModel:
    """The sub-worker for one rollout: ``oracle`` (from the task's ground truth, seeded),
    ``static``, or any provider spec."""
    parsed = parse_model_spec(spec, base_url)
    options: dict[str, object] | None = None
    if parsed.provider == "oracle":
        options = {
            "ground_truth": task.ground_truth,
            "codebase": task.files,
            "seed": worker_seed,
            **dict(oracle_options or {}),
        }
    return build_model(
        parsed,
        role="sub",
        env=env,
        timeout_s=timeout_s,
        builtin_kwargs=options,
        http_client=http_client,
    )


async def run_rollout(
    task: Task,
    *,
    root: ChatModel,
    sub_spec: str = "oracle",
    sub: ChatModel | None = None,
    rollout_index: int = 0,
    seed: int = 0,
    limits: RunLimits | None = None,
    episode_config: EpisodeConfig | None = None,
    sandbox_config: SandboxConfig | None = None,
    prices: PriceTable | None = None,
    weights: RewardWeights | None = None,
    sub_base_url: str | None = None,
    oracle_options: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    coverage_index: CoverageIndex | None = None,
    pool: KernelPool | None = None,
    parent: Budget | None = None,
    sub_cache: ResponseCache | None = None,
) -> RolloutOutcome:
    """Run one Episode of ``root`` over ``task`` and score it.

    The run is wired as every run is (:func:`deeprepo.run.wiring.wire`): ``limits`` bound
    it (turns, wall clock, sub-calls, their concurrency; without it, ``episode_config``'s
    turns and clock and no sub-call limit), ``parent`` is an evaluation's budget over all
    its rollouts (its cost cap), ``sub_cache`` answers repeated sub-calls, and the call
    timeout and backoff come from ``env``. ``episode_config`` gives the rest of the
    Episode's settings (prompt, temperature, ...); ``sandbox_config`` the kernel's (else
    the limits' cell timeout and output size).

    ``root`` (and ``sub`` when given) belong to the caller, who may share them across
    concurrent rollouts and closes them; a sub-model built here from ``sub_spec`` is
    closed here. Usage is metered per rollout (a fresh ledger each time).

    A task with a sub-call budget (the hard tier) holds the run to it (the smaller of it and
    ``limits.max_sub_calls``), and the root is told it in its first message.
    """
    base = episode_config or EpisodeConfig()
    if limits is None:
        limits = RunLimits(max_turns=base.max_turns, timeout_s=base.timeout_s, max_sub_calls=None)
    task_budget = task.sub_call_budget
    if task_budget is not None:
        held = limits.max_sub_calls
        limits = replace(
            limits, max_sub_calls=task_budget if held is None else min(held, task_budget)
        )
        if base.task is None:
            base = replace(base, task=budget_instruction(limits.max_sub_calls or task_budget))
    environ = os.environ if env is None else env
    calls = CallSettings.from_env(environ)
    worker_seed = derive_seed(seed, task.id, rollout_index)
    own_sub = sub is None
    sub_model = sub or build_sub_model(
        sub_spec,
        task,
        worker_seed=worker_seed,
        base_url=sub_base_url,
        env=environ,
        oracle_options=oracle_options,
        timeout_s=calls.sdk_timeout_s,
        http_client=calls.http_client,
    )
    recorder = RecordingModel(sub_model)
    wiring = wire(
        root,
        recorder,
        limits=limits,
        prices=prices or PriceTable.load(),
        calls=calls,
        ledger=Ledger(parent=parent.ledger if parent is not None else None),
        parent=parent,
        sub_cache=sub_cache,
    )
    episode = Episode(
        task.get_codebase(),
        root=wiring.root,
        dispatcher=wiring.dispatcher,
        ledger=wiring.ledger,
        config=limits.episode_config(base),
        sandbox=sandbox_config or limits.sandbox_config(),
        pool=pool,
    )
    started = time.perf_counter()
    try:
        result = await episode.run()
    finally:
        if own_sub:
            await sub_model.aclose()
    seconds = time.perf_counter() - started
    scoring = time.perf_counter()
    reward = compute_reward(
        result,
        task.ground_truth,
        task.files,
        weights,
        index=coverage_index,
        replies=recorder.replies,
        sub_call_budget=task_budget,
    )
    return RolloutOutcome(
        task_id=task.id,
        rollout=rollout_index,
        result=result,
        reward=reward,
        seconds=seconds,
        worker_seed=worker_seed,
        reward_seconds=time.perf_counter() - scoring,
    )
