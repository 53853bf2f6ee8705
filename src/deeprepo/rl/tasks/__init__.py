"""Tasks with planted bugs and exact ground truth (the generator).

``generate_task(seed, size, lang)`` builds one repository in memory (files +
ground truth) for the RL environment; ``generate_tasks(out_dir, ...)`` writes
many to disk with an ``index.json``. See ``taxonomy`` for the bug kinds and
their CWE families; the code it plants and builds projects from is data, in
``data/<lang>/*.toml`` (read by ``catalogue``).
"""

from deeprepo.rl.tasks.generator import generate_task, generate_tasks, task_seeds
from deeprepo.rl.tasks.spec import (
    LANGS,
    SIZES,
    GeneratedTask,
    GroundTruthEntry,
    Location,
    TaskInfo,
    read_ground_truth,
)
from deeprepo.rl.tasks.taxonomy import BUG_KINDS, BugKind, bug_kind, cwe_family

__all__ = [
    "BUG_KINDS",
    "LANGS",
    "SIZES",
    "BugKind",
    "GeneratedTask",
    "GroundTruthEntry",
    "Location",
    "TaskInfo",
    "bug_kind",
    "cwe_family",
    "generate_task",
    "generate_tasks",
    "read_ground_truth",
    "task_seeds",
]
