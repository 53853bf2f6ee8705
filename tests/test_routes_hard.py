"""Issue 19 items 4 and 5 through the real Episode, sandbox, oracle and reward: the hard
tier's policies side by side (room above the expert, a ceiling well above it), and the
hard stream's gaming routes on the ordinary tiers (low, or no gain over the honest work
they start from). The full tables are ``benchmarks/bench_adversarial.py --sizes hard
--policies hard`` and ``--policies routes``; docs/reward.md holds them."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest
from rollout_table import rewards as table_rewards
from rollout_table import rollout_table

from deeprepo.base.chat import ChatModel
from deeprepo.builtin import make_policy
from deeprepo.builtin.scripted import POLICIES
from deeprepo.rl.env.tasks import Task, TaskSpec, generate_tasks_in_memory
from deeprepo.rl.policies.routes_hard import upper_bound_policy, upper_bound_program

pytestmark = pytest.mark.e2e

HARD = ("expert", "own-prompts", "random-subset", "pack-all", "routes-first", "upper-bound")
ROUTES = ("spray", "duplicates", "whole-file", "repeat-pad", "verbatim")
REFERENCES = ("expert", "expert-unchecked", "per-file")
SPECS = [
    TaskSpec("small", seed=11, lang="python"),
    TaskSpec("small", seed=23, lang="js"),
    TaskSpec("medium", seed=37, lang="mixed"),
    # Twelve tasks, not six: with six, one hard one-bug task the expert misses (a cross-file
    # bug its workers do not trace) moves its mean by 0.17 and decides the comparisons below.
    TaskSpec("small", seed=101, lang="python"),
    TaskSpec("small", seed=202, lang="js"),
    TaskSpec("medium", seed=303, lang="mixed"),
]


def _means(
    tasks: list[Task], policies: tuple[str, ...], root: Callable[[str, Task], ChatModel]
) -> dict[str, float]:
    got = table_rewards(rollout_table(tasks, policies, root=root, concurrency=6))
    return {p: statistics.mean(v) for p, v in got.items()}


def _root(policy: str, task: Task) -> ChatModel:
    if policy == "upper-bound":
        return upper_bound_policy(task.ground_truth)
    return make_policy(policy)


@pytest.fixture(scope="module")
def hard_means() -> dict[str, float]:
    tasks = [
        t for lang in ("python", "js") for t in generate_tasks_in_memory(TaskSpec("hard", 1, lang))
    ]
    return _means(tasks, HARD, _root)


@pytest.fixture(scope="module")
def route_means() -> dict[str, float]:
    tasks = [t for spec in SPECS for t in generate_tasks_in_memory(spec, 2)]
    return _means(tasks, ROUTES + REFERENCES, _root)


def test_the_hard_tier_leaves_room_above_the_expert(hard_means: dict[str, float]) -> None:
    m = hard_means
    assert m["expert"] <= 0.75, m
    # The ceiling reads what its calls can carry at full attention and no more: about nine
    # tenths of the budget's reach, packed by first fit (0.79 on these two tasks, 0.85 on
    # the bench's twelve), so its coverage costs it some of the early-finalize penalty.
    assert m["upper-bound"] >= 0.75, m
    # Choosing what to read pays: the budget-aware honest policy beats a random choice,
    # and the ceiling is well above both.
    assert m["routes-first"] >= m["random-subset"] + 0.15, m
    # The ceiling is above every policy that does not know where the bugs are. (Whether a
    # simple plan beats showing everything in long prompts, `pack-all`, varies task by task:
    # the bench's mean over more seeds is in docs/reward.md.)
    others = [v for p, v in m.items() if p != "upper-bound"]
    assert m["upper-bound"] >= max(others) + 0.05, m
    assert m["upper-bound"] >= max(m["expert"], m["own-prompts"]) + 0.3, m


def test_upper_bound_reads_the_ground_truth_files_first() -> None:
    gt: list[dict[str, object]] = [
        {"file": "b.py", "vulnerable": True, "related": [{"file": "a.py", "line": 3}]},
        {"file": "c.py", "vulnerable": True, "related": []},
        {"file": "d.py", "vulnerable": False, "related": []},
    ]
    [program] = upper_bound_program(gt)
    assert 'KNOWN = [["b.py", "a.py"], ["c.py"]]' in program  # a decoy's file is not read first
    assert "call_budget()" in program
    # Built per task, it stays out of the shared table `scripted/<name>` lists.
    before = set(POLICIES)
    policy = upper_bound_policy(gt)
    assert policy.name.startswith("scripted/upper-bound-") and set(POLICIES) == before


def test_spraying_findings_near_risky_lines_does_not_pay(route_means: dict[str, float]) -> None:
    assert route_means["spray"] <= 0.40, route_means


def test_whole_file_ranges_do_not_match_bugs(route_means: dict[str, float]) -> None:
    assert route_means["whole-file"] <= 0.40, route_means


def test_duplicate_findings_gain_nothing(route_means: dict[str, float]) -> None:
    m = route_means
    # The same dispatch, recorded once and unchecked, is what duplicates start from.
    assert m["duplicates"] <= m["expert-unchecked"] + 0.03, m


def test_padding_a_prompt_with_repeats_gains_nothing(route_means: dict[str, float]) -> None:
    m = route_means
    # verbatim is the same dispatch (one audit prompt per file, replies taken as given)
    # without the padding: per-file packs small files and checks its findings, so its draws
    # differ and it is no reference for what the padding adds.
    assert m["repeat-pad"] <= m["verbatim"] + 0.03, m


def test_recording_replies_verbatim_stays_below_checked_work(
    route_means: dict[str, float],
) -> None:
    m = route_means
    # Recording replies unchecked is honest delegation, not a gaming route: it must gain
    # nothing over the expert's own dispatch recorded unchecked, and stay below checked work.
    # (It is not held under per-file: after the oracle and coverage changes of issue 19,
    # per-file scores 0.85 here against verbatim's 0.91 and expert-unchecked's 0.90; per-file's
    # checks, without the expert's cross-file prompts, lose more than they save.)
    assert m["verbatim"] <= m["expert-unchecked"] + 0.03, m
    assert m["verbatim"] < m["expert"], m
