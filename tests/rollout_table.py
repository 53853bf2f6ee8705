"""Many scripted rollouts at once, for the tests that compare policies' rewards on the same
tasks (the adversarial suite, the routes of issue 19, the compact expert): each task's
coverage index is built once, every (policy, task) runs through the real Episode, process
sandbox, oracle and reward, ``concurrency`` at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from deeprepo.base.chat import ChatModel
from deeprepo.builtin import make_policy
from deeprepo.findings.coverage import CoverageIndex
from deeprepo.orchestrator.episode import EpisodeConfig
from deeprepo.rl.env.rollout import RolloutOutcome, run_rollout
from deeprepo.rl.env.tasks import Task
from deeprepo.sandbox.config import SandboxConfig


def _policy_root(policy: str, task: Task) -> ChatModel:
    return make_policy(policy)


def rollout_table(
    tasks: list[Task],
    policies: Iterable[str],
    *,
    root: Callable[[str, Task], ChatModel] = _policy_root,
    concurrency: int = 8,
) -> dict[str, list[RolloutOutcome]]:
    """Each policy's outcome on each task, in the order of ``tasks``."""
    names = list(policies)
    indexes = {t.id: CoverageIndex(t.files) for t in tasks}

    async def go() -> dict[str, list[RolloutOutcome]]:
        gate = asyncio.Semaphore(concurrency)

        async def one(policy: str, task: Task) -> RolloutOutcome:
            async with gate:
                return await run_rollout(
                    task,
                    root=root(policy, task),
                    episode_config=EpisodeConfig(max_turns=20),
                    sandbox_config=SandboxConfig(mode="process"),
                    coverage_index=indexes[task.id],
                )

        runs = [(p, t) for p in names for t in tasks]
        done = await asyncio.gather(*(one(p, t) for p, t in runs))
        out: dict[str, list[RolloutOutcome]] = {p: [] for p in names}
        for (p, _t), outcome in zip(runs, done, strict=True):
            out[p].append(outcome)
        return out

    return asyncio.run(go())


def rewards(outcomes: dict[str, list[RolloutOutcome]]) -> dict[str, list[float]]:
    """The reward totals of :func:`rollout_table`'s outcomes."""
    return {p: [o.reward.total for o in v] for p, v in outcomes.items()}
