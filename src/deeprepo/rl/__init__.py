"""deeprepo's research stack: what measures and trains orchestrator models.

Rooms, bottom up (each imports only the ones before it, and the core below):

- ``tasks``: repositories with planted bugs and exact ground truth;
- ``plots``: PNG plots of benches and training logs;
- ``policies``: the reference and gaming scripted roots the reward is calibrated against;
- ``env``: the RL environment's engine side: tasks for rollouts, the ``oracle`` worker,
  one rollout (the same Episode ``deeprepo analyze`` runs), the reward;
- ``evals``: ``deeprepo eval`` and ``compare``: results files, summary, statistics;
- ``bench``: ``deeprepo bench``, configurations compared on the same repositories;
- ``train``: SFT and GRPO on the Episode.

The core (``deeprepo`` minus this package) never imports it. Importing it registers the
research models with the core's provider registry: ``oracle`` and the
``scripted/<policy>`` roots of ``policies``. The public names below are imported lazily.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from deeprepo.run import models as _core_models  # noqa: F401  (registers the core's models)

if TYPE_CHECKING:
    from deeprepo.base.chat import ChatModel
    from deeprepo.providers.registry import BuildContext
    from deeprepo.providers.spec import ModelSpec

#: Public name → the module that defines it.
_EXPORTS: dict[str, str] = {
    # tasks
    "GeneratedTask": "deeprepo.rl.tasks",
    "generate_task": "deeprepo.rl.tasks",
    "generate_tasks": "deeprepo.rl.tasks",
    "task_seeds": "deeprepo.rl.tasks",
    "generate_hard_task": "deeprepo.rl.tasks.hard",
    # env
    "Task": "deeprepo.rl.env.tasks",
    "TaskSpec": "deeprepo.rl.env.tasks",
    "generate_tasks_in_memory": "deeprepo.rl.env.tasks",
    "load_tasks": "deeprepo.rl.env.tasks",
    "parse_task_spec": "deeprepo.rl.env.tasks",
    "task_from_generated": "deeprepo.rl.env.tasks",
    "task_from_hard": "deeprepo.rl.env.tasks",
    "Reward": "deeprepo.rl.env.reward",
    "RewardWeights": "deeprepo.rl.env.reward",
    "compute_reward": "deeprepo.rl.env.reward",
    "RolloutOutcome": "deeprepo.rl.env.rollout",
    "run_rollout": "deeprepo.rl.env.rollout",
    "OracleWorker": "deeprepo.rl.env.oracle",
    "make_oracle": "deeprepo.rl.env.oracle",
    "family_hint": "deeprepo.rl.env.oracle_text",
    # policies
    "RESEARCH_POLICIES": "deeprepo.rl.policies",
    "line_shape": "deeprepo.rl.policies.line_shape",
    "upper_bound_policy": "deeprepo.rl.policies.routes_hard",
    "train_shape_table": "deeprepo.rl.policies.routes_oracle",
    # evals
    "EvalOptions": "deeprepo.rl.evals.runner",
    "EvalRun": "deeprepo.rl.evals.runner",
    "run_eval": "deeprepo.rl.evals.runner",
    "RolloutResult": "deeprepo.rl.evals.results",
    "load_results": "deeprepo.rl.evals.results",
    "compare_runs": "deeprepo.rl.evals.compare",
    "Executor": "deeprepo.rl.evals.executor",
    "RayExecutor": "deeprepo.rl.evals.executor",
    "ray_session": "deeprepo.rl.evals.executor",
    "stop_condition": "deeprepo.rl.env.rollout",
    # training (the train extra: torch, transformers, TRL)
    "TrainConfig": "deeprepo.rl.train.config",
    "EpisodeSection": "deeprepo.rl.train.config",
    "GrpoSection": "deeprepo.rl.train.config",
    "build_tiny_model": "deeprepo.rl.train.tiny",
    "build_trainer": "deeprepo.rl.train.grpo",
    "generate_batch": "deeprepo.rl.train.generation",
    "PART_METRICS": "deeprepo.rl.train.rollouts",
    "import_train_stack": "deeprepo.rl.train.models",
    "library_warnings_off": "deeprepo.rl.train.models",
    "load_policy": "deeprepo.rl.train.models",
    "quiet": "deeprepo.rl.train.models",
}

__all__ = [
    "PART_METRICS",
    "RESEARCH_POLICIES",
    "EpisodeSection",
    "EvalOptions",
    "EvalRun",
    "Executor",
    "GeneratedTask",
    "GrpoSection",
    "OracleWorker",
    "RayExecutor",
    "Reward",
    "RewardWeights",
    "RolloutOutcome",
    "RolloutResult",
    "Task",
    "TaskSpec",
    "TrainConfig",
    "build_tiny_model",
    "build_trainer",
    "compare_runs",
    "compute_reward",
    "family_hint",
    "generate_batch",
    "generate_hard_task",
    "generate_task",
    "generate_tasks",
    "generate_tasks_in_memory",
    "import_train_stack",
    "library_warnings_off",
    "line_shape",
    "load_policy",
    "load_results",
    "load_tasks",
    "make_oracle",
    "parse_task_spec",
    "quiet",
    "ray_session",
    "register",
    "run_eval",
    "run_rollout",
    "stop_condition",
    "task_from_generated",
    "task_from_hard",
    "task_seeds",
    "train_shape_table",
    "upper_bound_policy",
]


def _build_oracle(spec: ModelSpec, context: BuildContext) -> ChatModel:
    from deeprepo.base.errors import ConfigError
    from deeprepo.rl.env.oracle import make_oracle

    options = dict(context.options)
    if "ground_truth" not in options:
        raise ConfigError(
            "the oracle worker answers from a task's ground truth: pass ground_truth= "
            "(a list of entries or a path to ground_truth.json), or use --sub static"
        )
    ground_truth = options.pop("ground_truth")
    try:
        return make_oracle(ground_truth, **options)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad oracle worker options: {exc}") from exc


def register() -> None:
    """Register ``oracle`` and the research ``scripted/<policy>`` roots (idempotent)."""
    from deeprepo.providers.registry import BuiltinProvider, register_provider
    from deeprepo.rl import policies

    policies.register()
    register_provider(
        BuiltinProvider(
            "oracle",
            _build_oracle,
            lambda: {
                "oracle": "built-in worker: answers from a generated task's ground truth (eval, RL)"
            },
        )
    )


register()


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
