"""The taskset: generated repositories with planted bugs and exact ground truth.

Each task names one repository of deeprepo's generator by ``(seed, size, lang)``; the
repository itself is generated when a rollout starts (deterministically, and cached),
so ``load()`` is cheap and a trace records three small fields instead of a whole
repository. The set holds the repositories ``deeprepo tasks generate --seed SEED --n
COUNT`` writes, in the same order (the generator's ``task_seeds``).

Settings, as ``--env.taskset.<field>`` flags or ``[env.taskset]`` TOML keys: ``size``
(``small`` 5-15 files, ``medium`` 30-60, ``large`` 100-300, ``hard`` 100-500 with a
sub-call budget smaller than the file count, which the rollout enforces), ``lang`` (``python``,
``js``, ``mixed``), ``count`` (tasks in the set), ``seed`` (the set's seed) and
``prompt`` (which of deeprepo's root system prompts the model gets).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Literal

import verifiers.v1 as vf
from pydantic import Field, field_validator, model_validator

from deeprepo import ROOT_SYSTEM_PROMPTS, CoverageIndex
from deeprepo.rl import Task as RepoTask
from deeprepo.rl import (
    generate_hard_task,
    generate_task,
    task_from_generated,
    task_from_hard,
    task_seeds,
)

__all__ = [
    "OrchestrationData",
    "OrchestrationTask",
    "OrchestrationTaskset",
    "OrchestrationTasksetConfig",
    "repository",
]


class OrchestrationData(vf.TaskData):
    """One task's wire data: which generated repository, and how the root is prompted."""

    seed: int = 0
    """Generator seed of the repository (``generate_task(seed, size, lang)``)."""
    size: Literal["small", "medium", "large", "hard"] = "small"
    lang: Literal["python", "js", "mixed"] = "python"
    prompt_name: str = "default"
    """Key of ``deeprepo.base.prompts.ROOT_SYSTEM_PROMPTS`` the system prompt came from."""


class OrchestrationTask(vf.Task[OrchestrationData, vf.State, vf.TaskConfig]):
    """A repository to analyse. Scoring is the env's: the reward needs the Episode's
    result (findings, dispatched prompts, turns), which lives in the env's ``run``."""


class OrchestrationTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.*``: which repositories, how many, and the root's prompt."""

    size: Literal["small", "medium", "large", "hard"] = "small"
    """Repository size: small (5-15 files), medium (30-60), large (100-300), or the hard tier
    (100-500, python or js, with a sub-call budget smaller than the file count)."""
    lang: Literal["python", "js", "mixed"] = "python"
    """Language of the generated services (``mixed``: a Python and a JavaScript service)."""
    count: int = Field(100, ge=1)
    """How many tasks the set holds (``-n`` evaluates the first N)."""
    seed: int = 0
    """Seed of the set, as ``deeprepo tasks generate --seed``."""
    prompt: str = "default"
    """The root's system prompt: a key of deeprepo's ``ROOT_SYSTEM_PROMPTS``."""

    @field_validator("prompt")
    @classmethod
    def _known_prompt(cls, value: str) -> str:
        if value not in ROOT_SYSTEM_PROMPTS:
            raise ValueError(
                f"unknown prompt {value!r}; choose one of: {', '.join(ROOT_SYSTEM_PROMPTS)}"
            )
        return value

    @model_validator(mode="after")
    def _hard_is_one_language(self) -> OrchestrationTasksetConfig:
        if self.size == "hard" and self.lang == "mixed":
            raise ValueError("the hard tier is generated in python or js, not mixed")
        return self


class OrchestrationTaskset(vf.Taskset[OrchestrationTask, OrchestrationTasksetConfig]):
    """Generated repositories; the user (the env) opens each conversation."""

    def load(self) -> Iterator[OrchestrationTask]:
        c = self.config
        system = ROOT_SYSTEM_PROMPTS[c.prompt]
        for seed in task_seeds(c.seed, c.count):
            yield OrchestrationTask(
                OrchestrationData(
                    id=f"{c.size}-{c.lang}-{seed}",
                    name=f"deeprepo {c.size} {c.lang} repository, seed {seed}",
                    # No prompt: the Episode writes the first user message (the repository
                    # overview) and sends it as the first turn.
                    prompt=None,
                    system_prompt=system,
                    seed=seed,
                    size=c.size,
                    lang=c.lang,
                    prompt_name=c.prompt,
                ),
                c.task,
            )


@functools.lru_cache(maxsize=64)
def repository(seed: int, size: str, lang: str) -> tuple[RepoTask, CoverageIndex]:
    """The generated repository of a task and its coverage index, built once per process
    (the ``-r`` rollouts of a task and later epochs reuse them)."""
    if size == "hard":
        task = task_from_hard(generate_hard_task(seed, lang))
    else:
        task = task_from_generated(generate_task(seed, size, lang))
    return task, CoverageIndex(task.files)
