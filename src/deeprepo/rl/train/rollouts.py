"""GRPO rollouts: deeprepo's own episode, run by the policy, scored by the discovery reward.

:class:`EpisodeRollouts` is the ``rollout_func`` handed to TRL's ``GRPOTrainer``. TRL calls
it with one prompt per completion it wants (each task id repeated ``group_size`` times); for
each it runs :func:`deeprepo.rl.env.run_rollout` (the Episode of ``analyze`` and ``eval``,
the sandbox kernel, the ``oracle`` worker, ``compute_reward``) with a :class:`PolicyRoot`
as root, all rollouts of the step concurrently with their generations batched (by
transformers on the policy itself, or by TRL's colocated vLLM engine when ``use_vllm``). It returns
the token sequences (``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask``: model
tokens 1, environment tokens 0, which TRL uses as the loss mask) and, as extra fields, the
reward and its parts, which the reward functions of :func:`reward_functions` read back.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deeprepo.base.errors import ConfigError
from deeprepo.base.records import RunResult
from deeprepo.orchestrator.episode import EpisodeConfig
from deeprepo.rl.env.reward import PARTS, PENALTIES, part_metric
from deeprepo.rl.env.rollout import RolloutOutcome, run_rollout
from deeprepo.rl.env.tasks import Task
from deeprepo.rl.train.config import EpisodeSection
from deeprepo.rl.train.generation import Generated, generate_batch, generate_vllm
from deeprepo.rl.train.policy import ChatFrame, GenerationQueue, PolicyRoot, TokenTrace
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.pool import KernelPool

__all__ = [
    "PART_METRICS",
    "EpisodeRollouts",
    "RolloutRecord",
    "StepStats",
    "format_score",
    "reward_functions",
]

#: The reward's parts and penalties as metric names (``quality_reward``, …).
PART_METRICS: tuple[str, ...] = tuple(part_metric(p) for p in (*PARTS, *PENALTIES))


def format_score(result: RunResult) -> float:
    """Mean over turns of: half for a reply with a code block, half more if it ran cleanly.

    0 for a run with no turn. A shaping term for policies too weak to find anything yet;
    the discovery reward is reported beside it, never replaced by it.
    """
    if not result.turns:
        return 0.0
    score = 0.0
    for turn in result.turns:
        if turn.code_blocks:
            score += 0.5 + (0.5 if turn.error is None else 0.0)
    return score / len(result.turns)


@dataclass(frozen=True)
class RolloutRecord:
    """One rollout: the Episode's outcome, the policy's tokens, the training reward."""

    outcome: RolloutOutcome
    trace: TokenTrace
    format: float
    reward: float  # discovery reward + format_weight × format


@dataclass
class StepStats:
    """The figures of one step's rollouts, for ``train_log.jsonl``."""

    rollouts: int = 0
    reward_mean: float = 0.0
    reward_std: float = 0.0
    group_reward_std_mean: float = 0.0  # GRPO learns only from groups whose rewards differ
    groups_with_variance: int = 0
    groups: int = 0
    discovery_mean: float = 0.0
    format_mean: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    turns_mean: float = 0.0
    tokens: int = 0
    model_tokens: int = 0
    env_tokens: int = 0
    truncated_replies: int = 0
    zero_delegation_rate: float = 0.0
    stop_reasons: dict[str, int] = field(default_factory=dict)
    rollout_seconds: float = 0.0
    generate_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in vars(self).items() if k != "parts"}
        data.update(self.parts)
        return data


def _std(values: Sequence[float]) -> float:
    return statistics.pstdev(values) if len(values) > 1 else 0.0


def step_stats(records: Sequence[RolloutRecord], group_keys: Sequence[str]) -> StepStats:
    """Aggregate one step's rollouts; ``group_keys`` says which group each belongs to."""
    rewards = [r.reward for r in records]
    groups: dict[str, list[float]] = {}
    for key, reward in zip(group_keys, rewards, strict=True):
        groups.setdefault(key, []).append(reward)
    group_stds = [_std(v) for v in groups.values()]
    stops: dict[str, int] = {}
    for r in records:
        stops[r.outcome.result.stop_reason] = stops.get(r.outcome.result.stop_reason, 0) + 1
    n = len(records)
    return StepStats(
        rollouts=n,
        reward_mean=statistics.fmean(rewards),
        reward_std=_std(rewards),
        group_reward_std_mean=statistics.fmean(group_stds),
        groups_with_variance=sum(1 for s in group_stds if s > 1e-9),
        groups=len(groups),
        discovery_mean=statistics.fmean(r.outcome.reward.total for r in records),
        format_mean=statistics.fmean(r.format for r in records),
        parts={
            name: statistics.fmean(float(r.outcome.reward.parts.get(name, 0.0)) for r in records)
            for name in PART_METRICS
        },
        turns_mean=statistics.fmean(r.outcome.result.num_turns for r in records),
        tokens=sum(r.trace.length for r in records),
        model_tokens=sum(r.trace.model_tokens for r in records),
        env_tokens=sum(len(r.trace.completion_ids) - r.trace.model_tokens for r in records),
        truncated_replies=sum(r.trace.truncated_replies for r in records),
        zero_delegation_rate=sum(
            1 for r in records if r.outcome.reward.parts.get("zero_delegation_penalty", 0) >= 1
        )
        / n,
        stop_reasons=stops,
    )


class EpisodeRollouts:
    """The ``rollout_func``: TRL's prompts (task ids) → deeprepo episodes → token sequences."""

    def __init__(
        self,
        tasks: Sequence[Task],
        tokenizer: Any,
        episode: EpisodeSection,
        *,
        seed: int = 0,
        format_weight: float = 0.0,
        pool: KernelPool | None = None,
        on_rollout: Callable[[RolloutRecord], None] | None = None,
        use_vllm: bool = False,
    ) -> None:
        self.tasks = {t.id: t for t in tasks}
        self.use_vllm = use_vllm
        self.tokenizer = tokenizer
        self.episode = episode
        self.seed = seed
        self.format_weight = format_weight
        self.frame = ChatFrame.from_tokenizer(tokenizer)
        self.sandbox = SandboxConfig(
            mode=episode.sandbox,
            cell_timeout_s=episode.cell_timeout_s,
            output_limit=episode.max_output_chars,
        )
        self.episode_config = EpisodeConfig(
            max_turns=episode.max_turns,
            prompt=episode.prompt,
            max_root_tokens=episode.max_new_tokens,
            temperature=episode.temperature,
            cache_root_prompt=False,
            max_turn_output_chars=episode.max_output_chars,
        )
        self.pool = pool
        self.on_rollout = on_rollout
        self.calls = 0
        self.last_stats: StepStats | None = None
        self.last_records: list[RolloutRecord] = []

    def dataset_rows(self) -> list[dict[str, str]]:
        """One training example per task: the prompt TRL repeats is the task's id."""
        return [{"prompt": task_id} for task_id in self.tasks]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        step = int(trainer.state.global_step)
        if self.use_vllm:
            # GRPOTrainer builds it when use_vllm (grpo_trainer.py:1105-1138) and syncs its
            # weights with the policy's right before calling us (grpo_trainer.py:2200-2205).
            engine = getattr(trainer, "vllm_generation", None)
            if engine is None:
                raise RuntimeError("use_vllm is set but the trainer has no vllm_generation engine")
            return self.run(prompts, None, step=step, engine=engine)
        model = trainer.accelerator.unwrap_model(trainer.model)
        return self.run(prompts, model, step=step)

    def run(
        self, prompts: Sequence[Any], model: Any, *, step: int, engine: Any = None
    ) -> dict[str, list[Any]]:
        """Run one rollout per prompt with ``model`` (or the vLLM ``engine``, when given)
        generating the root's replies; return TRL's fields."""
        ids = [str(p) for p in prompts]
        unknown = sorted(set(ids) - set(self.tasks))
        if unknown:
            raise ValueError(f"rollout prompts must be task ids; unknown: {unknown[:3]}")
        seen: dict[str, int] = {}
        indices: list[int] = []
        for task_id in ids:
            # The worker's seed comes from (seed, task, rollout index): rollouts of a group,
            # and of different steps, meet differently seeded oracle misses.
            k = seen.get(task_id, 0)
            seen[task_id] = k + 1
            indices.append(step * len(ids) + k)
        started = time.perf_counter()
        records, calls = asyncio.run(self._run_all(ids, indices, model, engine))
        self.calls += 1
        stats = step_stats(records, ids)
        stats.rollout_seconds = time.perf_counter() - started
        stats.generate_calls = calls
        self.last_stats, self.last_records = stats, records
        out: dict[str, list[Any]] = {
            "prompt_ids": [r.trace.prompt_ids for r in records],
            "completion_ids": [r.trace.completion_ids for r in records],
            "logprobs": [r.trace.logprobs for r in records],
            "env_mask": [r.trace.env_mask for r in records],
            "deeprepo_reward": [r.outcome.reward.total for r in records],
            "format_reward": [r.format for r in records],
        }
        for name in PART_METRICS:
            out[name] = [float(r.outcome.reward.parts.get(name, 0.0)) for r in records]
        return out

    async def _run_all(
        self, ids: Sequence[str], indices: Sequence[int], model: Any, engine: Any = None
    ) -> tuple[list[RolloutRecord], int]:
        temperature = self.episode.temperature
        eos = self.tokenizer.eos_token_id

        def generate(contexts: list[list[int]], limits: list[int]) -> list[Generated]:
            if engine is not None:
                return generate_vllm(engine, contexts, limits, eos_token_id=eos)
            return generate_batch(model, self.tokenizer, contexts, limits, temperature=temperature)

        queue = GenerationQueue(generate, live=len(ids), threaded=engine is None)
        records = await asyncio.gather(
            *(
                self._one(task_id, index, queue, key)
                for key, (task_id, index) in enumerate(zip(ids, indices, strict=True))
            )
        )
        return list(records), queue.calls

    async def _one(
        self, task_id: str, index: int, queue: GenerationQueue, key: int
    ) -> RolloutRecord:
        root = PolicyRoot(
            tokenizer=self.tokenizer,
            frame=self.frame,
            queue=queue,
            max_new_tokens=self.episode.max_new_tokens,
            max_context_tokens=self.episode.max_context_tokens,
            key=key,
        )
        try:
            outcome = await run_rollout(
                self.tasks[task_id],
                root=root,
                sub_spec=self.episode.worker,
                rollout_index=index,
                seed=self.seed,
                episode_config=self.episode_config,
                sandbox_config=self.sandbox,
                pool=self.pool,
            )
        finally:
            queue.retire()
        if not root.trace.completion_ids:
            raise ConfigError(
                f"task {task_id}: the first prompt alone has {len(root.trace.prompt_ids):,} tokens, "
                f"no room left under episode.max_context_tokens = {self.episode.max_context_tokens:,}"
            )
        fmt = format_score(outcome.result)
        record = RolloutRecord(
            outcome=outcome,
            trace=root.trace,
            format=fmt,
            reward=outcome.reward.total + self.format_weight * fmt,
        )
        if self.on_rollout is not None:
            self.on_rollout(record)
        return record


def reward_functions(format_weight: float) -> tuple[list[Callable[..., list[float]]], list[float]]:
    """TRL reward functions reading the rollout's extra fields, and their weights.

    ``deeprepo`` (the discovery reward, weight 1) and ``format`` (weight ``format_weight``)
    make the training reward; each part and penalty is a weight-0 function, so TRL logs it
    per step without it counting twice.
    """

    def field_reader(key: str, name: str) -> Callable[..., list[float]]:
        def read(**kwargs: Any) -> list[float]:
            return [float(v) for v in kwargs[key]]

        read.__name__ = name
        return read

    funcs = [field_reader("deeprepo_reward", "deeprepo"), field_reader("format_reward", "format")]
    weights = [1.0, format_weight]
    for name in PART_METRICS:
        funcs.append(field_reader(name, name))
        weights.append(0.0)
    return funcs, weights
