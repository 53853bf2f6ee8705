"""Seeded rollouts of the scripted expert with the oracle earn the rewards recorded here.

Speed work on the rollout path (the oracle's prompt index, the kernel's encoding, the
expert's program) must not move a reward: these values were recorded before that work
(main @af8d345) and every change since must reproduce them exactly.
"""

from __future__ import annotations

import asyncio

import pytest

from deeprepo import EpisodeConfig, SandboxConfig, make_policy
from deeprepo.rl import TaskSpec, generate_tasks_in_memory, run_rollout

# task id / rollout index -> (reward total rounded to 1e-9, stop reason, findings)
RECORDED = {  # re-pinned by issue 19's tells rounds four and five (callers, shared lines, hosts)
    "small-python-1272686665/0": (1.0, "answer_ready", 1),
    "small-python-1272686665/1": (1.0, "answer_ready", 1),
    "small-python-511025150/0": (1.0, "answer_ready", 2),
    "small-python-511025150/1": (1.0, "answer_ready", 2),
    "small-mixed-2035525362/0": (1.0, "answer_ready", 3),
    "small-mixed-2035525362/1": (1.0, "answer_ready", 3),
    "small-mixed-695425564/0": (1.0, "answer_ready", 2),
    "small-mixed-695425564/1": (1.0, "answer_ready", 2),
    "small-js-1337671202/0": (1.0, "answer_ready", 2),
    "small-js-548563996/0": (1.0, "answer_ready", 3),
}


async def _rewards() -> dict[str, tuple[float, str, int]]:
    out: dict[str, tuple[float, str, int]] = {}
    root = make_policy("expert")
    for lang, seed, rollouts in (("python", 3, 2), ("mixed", 7, 2), ("js", 5, 1)):
        for task in generate_tasks_in_memory(TaskSpec("small", seed=seed, lang=lang), 2):
            for k in range(rollouts):
                o = await run_rollout(
                    task,
                    root=root,
                    rollout_index=k,
                    seed=seed,
                    episode_config=EpisodeConfig(max_turns=20),
                    sandbox_config=SandboxConfig(mode="process"),
                )
                out[f"{task.id}/{k}"] = (
                    round(o.reward.total, 9),
                    o.result.stop_reason,
                    len(o.result.findings),
                )
    return out


@pytest.mark.e2e  # 10 rollouts, each an Episode in a kernel: ~10 s
@pytest.mark.filterwarnings("ignore:deeprepo. --sandbox process:RuntimeWarning")
def test_seeded_rollouts_earn_the_recorded_rewards() -> None:
    assert asyncio.run(_rewards()) == RECORDED
