"""The RL environment's engine side: tasks, one rollout, and the reward (DESIGN §7).

``run_rollout(task, root=...)`` runs one Episode (the very loop ``deeprepo analyze`` runs)
over a task with the ``oracle`` worker and scores it with ``compute_reward``. The
``verifiers`` package in ``environments/`` and ``deeprepo eval`` are thin layers over it.
"""

from deeprepo.rl.env.dispatch import DispatchStats, dispatch_stats, source_files
from deeprepo.rl.env.reward import (
    PARTS,
    PENALTIES,
    Reward,
    RewardWeights,
    compute_reward,
    part_metric,
)
from deeprepo.rl.env.rollout import RolloutOutcome, build_sub_model, derive_seed, run_rollout
from deeprepo.rl.env.tasks import (
    Task,
    TaskSpec,
    codebase_from_files,
    generate_tasks_in_memory,
    load_task_dir,
    load_tasks,
    parse_task_spec,
)

__all__ = [
    "PARTS",
    "PENALTIES",
    "DispatchStats",
    "Reward",
    "RewardWeights",
    "RolloutOutcome",
    "Task",
    "TaskSpec",
    "build_sub_model",
    "codebase_from_files",
    "compute_reward",
    "derive_seed",
    "dispatch_stats",
    "generate_tasks_in_memory",
    "load_task_dir",
    "load_tasks",
    "parse_task_spec",
    "part_metric",
    "run_rollout",
    "source_files",
]
