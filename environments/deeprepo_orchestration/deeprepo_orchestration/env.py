"""The env: one deeprepo Episode per rollout, the trainee model in the root's seat.

``run`` opens the seat's interaction, wraps it as deeprepo's root model
(:class:`~deeprepo_orchestration.root.InteractionRoot`) and hands it to
:func:`deeprepo.rl.env.rollout.run_rollout`, which runs the engine's own Episode (turn
loop, prompts, code-block parser, sandbox kernel, sub-LLM dispatcher) with the ``oracle``
worker (or ``static``, or any provider) and scores it with deeprepo's reward. Nothing of
the engine is re-implemented here: this module only translates the outcome onto the
verifiers trace (reward, one metric per reward part, stop condition, turn counts).

Settings (``--env.<field>``): ``sub``, ``sub_base_url``, ``sub_concurrency``,
``max_turns``, ``max_sub_calls``, ``episode_timeout``, ``sandbox``, ``cell_timeout``,
``output_limit``, ``oracle_seed``, ``oracle_miss_rate``, ``oracle_false_rate`` and
``reward_weights``. The seat is ``root`` (``--env.root.*``); it runs deeprepo's
in-process chat harness on the local ``subprocess`` runtime unless told otherwise.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field, field_validator

from deeprepo import ConfigError, EpisodeConfig, RunLimits, SandboxConfig
from deeprepo.rl import RewardWeights, RolloutOutcome, run_rollout
from deeprepo_orchestration.root import InteractionRoot
from deeprepo_orchestration.taskset import OrchestrationData, repository

__all__ = ["REWARD_NAME", "OrchestrationEnv", "OrchestrationEnvConfig", "record_outcome"]

REWARD_NAME = "orchestration"
"""The trace's one reward: deeprepo's total (quality-gated parts minus penalties, in [0, 1])."""

TASKSET_ID = "deeprepo-orchestration"


class OrchestrationEnvConfig(vf.EnvConfig):
    """``--env.*``: the root seat, the sub-model and the Episode's limits."""

    # No harness pinned: an unpinned seat takes the taskset package's own harness
    # (DirectChatHarness). Pinning it here would import this package while it loads.
    root: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The seat the trainee plays: deeprepo's root orchestrator."""

    sub: str = "oracle"
    """Sub-LLM worker: ``oracle`` (answers from the task's ground truth), ``static``, or a
    deeprepo provider spec such as ``openai/gpt-5-mini`` (keys from the environment)."""
    sub_base_url: str | None = None
    """Base URL of an OpenAI-compatible server for a provider ``sub``."""
    sub_concurrency: int = Field(16, ge=1)
    max_turns: int = Field(20, ge=1)
    """deeprepo's turn limit (then one last turn to submit); the seat's own
    ``--env.root.max-turns`` is a hard verifiers limit on top."""
    max_sub_calls: int | None = Field(2000, ge=0)
    episode_timeout: float | None = Field(None, gt=0)
    """Wall-clock seconds for the whole Episode (``timeout`` is verifiers' own block)."""
    sandbox: Literal["auto", "bwrap", "process"] = "auto"
    cell_timeout: float = Field(120.0, gt=0)
    """Seconds one code block may run in the sandbox kernel."""
    output_limit: int = Field(8192, ge=256)
    """Characters of REPL output the root sees per turn (head and tail kept)."""
    oracle_seed: int = 0
    """Seed of the oracle worker's misses and false findings (per task, not per rollout,
    so the rollouts of one group differ only by what the root did)."""
    oracle_miss_rate: float | None = Field(None, ge=0, le=1)
    oracle_false_rate: float | None = Field(None, ge=0)
    """False findings per 1,000 non-trivial lines the oracle is shown (default 0.1)."""
    reward_weights: dict[str, float] = Field(default_factory=dict)
    """Overrides of ``deeprepo.rl.env.reward.RewardWeights`` (e.g. ``{"quality": 0.5}``)."""

    @field_validator("reward_weights")
    @classmethod
    def _known_weights(cls, value: dict[str, float]) -> dict[str, float]:
        try:
            RewardWeights.from_dict(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    def limits(self) -> RunLimits:
        return RunLimits(
            max_turns=self.max_turns,
            max_sub_calls=self.max_sub_calls,
            timeout_s=self.episode_timeout,
            sub_concurrency=self.sub_concurrency,
            cell_timeout_s=self.cell_timeout,
            output_limit=self.output_limit,
        )

    def episode_config(self, prompt: str) -> EpisodeConfig:
        # The interaction caches nothing and retries nothing, so ask for neither.
        return self.limits().episode_config(EpisodeConfig(prompt=prompt, cache_root_prompt=False))

    def sandbox_config(self) -> SandboxConfig:
        return self.limits().sandbox_config(self.sandbox)

    def oracle_options(self) -> dict[str, float]:
        options: dict[str, float] = {}
        if self.oracle_miss_rate is not None:
            options["miss_rate"] = self.oracle_miss_rate
        if self.oracle_false_rate is not None:
            options["false_rate"] = self.oracle_false_rate
        return options


class OrchestrationEnv(vf.Env[OrchestrationEnvConfig]):
    """Runs deeprepo's Episode with the seat's model as the root."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data = task.data
        if not isinstance(data, OrchestrationData):
            raise TypeError(
                f"{type(self).__name__} runs deeprepo-orchestration tasks, got "
                f"{type(data).__name__}; set --env.taskset.id {TASKSET_ID}"
            )
        repo, index = repository(data.seed, data.size, data.lang)
        c = self.config
        async with agents.root.interaction(task) as interaction:
            model = interaction.trace.agent.config.model or "verifiers"
            root = InteractionRoot(interaction, name=str(model))
            outcome = await run_rollout(
                repo,
                root=root,
                sub_spec=c.sub,
                sub_base_url=c.sub_base_url,
                limits=c.limits(),
                seed=c.oracle_seed,
                episode_config=c.episode_config(data.prompt_name),
                sandbox_config=c.sandbox_config(),
                weights=RewardWeights.from_dict(c.reward_weights),
                oracle_options=c.oracle_options(),
                coverage_index=index,
            )
            # Inside the block: the rollout's own scoring runs when the interaction closes.
            record_outcome(interaction.trace, outcome)


def record_outcome(trace: Any, outcome: RolloutOutcome) -> None:
    """Put a rollout's reward, metrics and stop condition on a verifiers trace.

    The stop condition uses the names ``deeprepo eval`` prints (``episode_done``,
    ``max_turns_reached``, ``budget``, ``timeout``, ``error``); a stop verifiers already
    set (a seat limit, a ``@stop``) is kept.
    """
    r = outcome.result
    trace.record_reward(REWARD_NAME, outcome.reward.total, 1.0)
    metrics: dict[str, float] = dict(outcome.reward.parts)
    metrics.update(
        {
            "num_turns": float(r.num_turns),
            "is_truncated": float(outcome.is_truncated),
            "incomplete": float(r.incomplete),
            "sub_calls": float(r.sub_calls),
            "findings": float(len(r.findings)),
            "files_covered": float(len(r.files_covered)),
            "coverable_files": float(r.coverable_files),
            "root_input_tokens": float(sum(t.input_tokens + t.cache_read_tokens for t in r.turns)),
            "root_output_tokens": float(sum(t.output_tokens for t in r.turns)),
            "episode_seconds": outcome.seconds,
        }
    )
    if r.behaviour is not None:  # the counts as metrics; the label goes in info
        b = r.behaviour
        for key in ("llm_query_calls", "llm_batch_calls", "files_read_by_root"):
            metrics[key] = float(getattr(b, key))
        metrics["files_sent_to_workers"] = float(b.files_sent_to_workers)
        metrics["turns_with_sub_calls"] = float(b.turns_with_sub_calls)
    for key in ("precision", "recall", "f1"):
        if key in outcome.reward.details:
            metrics[key] = outcome.reward.details[key]
    trace.record_metrics({k: v for k, v in metrics.items() if math.isfinite(v)})
    trace.info["deeprepo"] = {
        "task_id": outcome.task_id,
        "stop_reason": r.stop_reason,
        "stop_detail": r.stop_detail,
        "sub_model": r.sub_model,
        "sandbox_mode": r.sandbox_mode,
        "worker_seed": outcome.worker_seed,
        "batch_sizes": list(r.batch_sizes),
        "behaviour": r.behaviour.to_dict() if r.behaviour else {},
        "files_covered": list(r.files_covered),
        "findings": [f.to_dict() for f in r.findings],
        "answer": r.answer,
    }
    trace.stop(outcome.stop_condition)
