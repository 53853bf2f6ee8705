"""Issue 19's coverage routes and honest formats (``rl/policies/routes_coverage.py``), each
a scripted root through the real Episode, sandbox, oracle and reward: the gaming routes stay
at or below 0.40, honest work in any format earns at least 0.75 of the expert's reward on
the same tasks. The tasks are test_adversarial's (seeds the calibration tables do not use);
``benchmarks/bench_adversarial.py`` prints the full table, held-out seeds included.
"""

from __future__ import annotations

import statistics

import pytest
from rollout_table import rewards as table_rewards
from rollout_table import rollout_table

from deeprepo.rl.env.tasks import TaskSpec, generate_tasks_in_memory
from deeprepo.rl.policies.routes_coverage import GAMING, HONEST_FORMATS

pytestmark = pytest.mark.e2e

SPECS = [
    TaskSpec("small", seed=11, lang="python"),
    TaskSpec("small", seed=23, lang="js"),
    TaskSpec("small", seed=37, lang="mixed"),
    TaskSpec("medium", seed=11, lang="python"),
    TaskSpec("medium", seed=23, lang="mixed"),
]
POLICIES = ("expert", *GAMING, *HONEST_FORMATS)
# Bugs sit where the generator puts them; until it places them independently of file size
# (issue 19 item 3, the ``substrate`` stream), auditing the larger half of the files finds
# most of them, and that half's honest coverage pays for the rest.
NEEDS_SIZE_INDEPENDENT_BUGS = "shuffled-padding"


@pytest.fixture(scope="module")
def rewards() -> dict[str, list[float]]:
    """Each policy's reward on each task, in one task order."""
    tasks = [t for spec in SPECS for t in generate_tasks_in_memory(spec, 2)]
    return table_rewards(rollout_table(tasks, POLICIES))


def mean(values: list[float]) -> float:
    return statistics.mean(values)


@pytest.mark.parametrize("route", [r for r in GAMING if r != NEEDS_SIZE_INDEPENDENT_BUGS])
def test_a_coverage_route_stays_low(route: str, rewards: dict[str, list[float]]) -> None:
    assert mean(rewards[route]) <= 0.40, {p: round(mean(v), 3) for p, v in rewards.items()}


def test_shuffled_padding_earns_only_the_half_it_audited(rewards: dict[str, list[float]]) -> None:
    """The shuffled half earns no coverage: the route stays far below the expert, and below
    the honest formats, even while the generator's file-size tell pays for its recall."""
    padding = mean(rewards[NEEDS_SIZE_INDEPENDENT_BUGS])
    assert padding <= mean(rewards["expert"]) - 0.30, padding
    assert padding <= min(mean(rewards[f]) for f in HONEST_FORMATS) - 0.25, padding


def test_shuffled_padding_stays_low(rewards: dict[str, list[float]]) -> None:
    """Auditing the larger half of the files honestly and padding the rest pays the shortfall
    of every unread file (decision 97): bugs sit in that half only at chance."""
    assert mean(rewards[NEEDS_SIZE_INDEPENDENT_BUGS]) <= 0.40


@pytest.mark.parametrize("fmt", list(HONEST_FORMATS))
def test_an_honest_format_earns_what_the_expert_does(
    fmt: str, rewards: dict[str, list[float]]
) -> None:
    assert mean(rewards[fmt]) >= 0.75 * mean(rewards["expert"]), (
        fmt,
        round(mean(rewards[fmt]), 3),
        round(mean(rewards["expert"]), 3),
    )
