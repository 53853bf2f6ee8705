"""The hard tier (issue 19 item 4): big repositories, exact ground truth, logic bugs, flows
across modules, and a sub-call budget the environment enforces."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deeprepo.base.chat import ChatRequest, Completion
from deeprepo.base.errors import UsageError
from deeprepo.builtin import make_policy
from deeprepo.orchestrator.episode import EpisodeConfig
from deeprepo.rl.env.rollout import RecordingModel, build_sub_model, run_rollout
from deeprepo.rl.env.tasks import (
    BUDGET_KEY,
    TaskSpec,
    generate_tasks_in_memory,
    load_tasks,
    parse_task_spec,
)
from deeprepo.rl.tasks.hard import (
    HARD_FILES,
    LINES_PER_CALL,
    HardTask,
    code_lines,
    generate_hard_task,
    generate_hard_tasks,
    sub_call_budget,
)
from deeprepo.rl.tasks.hard_flows import authz_flows
from deeprepo.sandbox.config import SandboxConfig

_LOGIC = {"missing-authorization", "off-by-one", "race-condition"}


@pytest.fixture(scope="module")
def hard_tasks() -> list[HardTask]:
    return [generate_hard_task(seed, lang) for seed in (3, 4) for lang in ("python", "js")]


def test_same_seed_same_bytes() -> None:
    a, b = generate_hard_task(5, "js"), generate_hard_task(5, "js")
    assert a == b
    assert a.task.files != generate_hard_task(6, "js").task.files


def test_size_budget_and_bug_mix(hard_tasks: list[HardTask]) -> None:
    for hard in hard_tasks:
        task = hard.task
        budget = hard.sub_call_budget
        lo, hi = HARD_FILES
        assert lo <= len(task.files) <= hi, task.task_id
        # Fewer calls than files, and too few to show every line at 800 lines a prompt.
        assert budget < len(task.files) // 4
        assert budget * 800 < code_lines(task.files)
        assert budget == sub_call_budget(task.files)
        bugs = task.bugs
        assert len(bugs) >= 5 and task.decoys
        assert sum(e.kind in _LOGIC for e in bugs) >= len(bugs) // 3, task.task_id
        assert any(e.cross_file for e in bugs), task.task_id
        # Authorisation logic split across a route and the helper it asks.
        assert any(e.cross_file and e.kind in _LOGIC for e in bugs), task.task_id
    assert LINES_PER_CALL > 800


def test_ground_truth_points_at_real_lines(hard_tasks: list[HardTask]) -> None:
    for hard in hard_tasks:
        task = hard.task
        for e in task.ground_truth:
            lines = task.files[e.file].split("\n")
            assert 1 <= e.start_line <= e.sink_line <= e.end_line <= len(lines), e
            assert lines[e.sink_line - 1].strip(), e
            for r in e.related:
                source = task.files[r.file].split("\n")[r.line - 1]
                # The route reads the request value, or hands the helper the caller.
                assert "req" in source or "user" in source, (e.id, source)


def test_authorisation_flows_are_data_and_read_alike() -> None:
    for lang in ("python", "js"):
        flows = authz_flows(lang)
        assert {s.vulnerable for s in flows} == {True, False}
        assert all(s.source is not None and "⟦source⟧" in s.source.code for s in flows)
        assert all(s.block.code.count("⟦sink⟧") == 1 for s in flows)


def test_flows_pass_through_helpers_in_other_modules(hard_tasks: list[HardTask]) -> None:
    """Some routes reach their sink through a helper defined in a third module."""
    through_hop = 0
    for hard in hard_tasks:
        task = hard.task
        defined = {
            m.group(1): path
            for path, text in task.files.items()
            for m in re.finditer(r"(?:def |function )(\w+)\(", text)
        }
        for e in task.bugs:
            if not e.cross_file:
                continue
            r = e.related[0]
            near = "\n".join(task.files[r.file].split("\n")[r.line - 1 : r.line + 3])
            called = {m.group(1) for m in re.finditer(r"(\w+)\(", near)}
            if any(defined.get(c) not in (None, r.file, e.file) for c in called):
                through_hop += 1
    assert through_hop >= 2


def test_spec_and_disk_carry_the_budget(tmp_path: Path) -> None:
    assert parse_task_spec("hard:seed=3:lang=js") == TaskSpec("hard", 3, "js")
    with pytest.raises(UsageError, match="lang must be one of python, js"):
        parse_task_spec("hard:lang=mixed")
    with pytest.raises(UsageError, match="hard tier is synthetic only"):
        parse_task_spec("hard:seed=3:substrate=real")
    [mem] = generate_tasks_in_memory(TaskSpec("hard", 9, "python"))
    assert mem.sub_call_budget == mem.metadata[BUDGET_KEY] > 0
    assert any("sub-call budget" in n for n in mem.get_codebase().metadata.notes)
    generate_hard_tasks(tmp_path, seed=9, n=1, lang="python")
    [disk] = load_tasks(tmp_path)
    assert disk.files == mem.files and disk.sub_call_budget == mem.sub_call_budget
    # Without index.json the task's own task.json still gives the budget.
    (tmp_path / "index.json").unlink()
    [bare] = load_tasks(tmp_path)
    assert bare.sub_call_budget == mem.sub_call_budget
    assert any("sub-call budget" in n for n in bare.get_codebase().metadata.notes)
    (tmp_path / mem.id / "task.json").write_text('{"sub_call_budget": 0}')
    with pytest.raises(UsageError, match="sub_call_budget must be a whole number"):
        load_tasks(tmp_path)


def test_cli_generates_the_hard_tier(tmp_path: Path) -> None:
    from deeprepo.cli.tasks_cmd import tasks_app

    result = CliRunner().invoke(
        tasks_app, ["generate", "--seed", "2", "--size", "hard", "--lang", "js", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    [line] = json.loads((tmp_path / "index.json").read_text())
    assert line["size"] == "hard" and line["sub_call_budget"] > 0
    task_json = json.loads((tmp_path / line["id"] / "task.json").read_text())
    assert task_json == {"sub_call_budget": line["sub_call_budget"]}


@pytest.mark.e2e
def test_a_rollout_is_held_to_the_budget_and_told_it() -> None:
    [task] = generate_tasks_in_memory(TaskSpec("hard", 1, "python"))
    budget = task.sub_call_budget
    assert budget is not None
    recorder = RecordingModel(build_sub_model("oracle", task, worker_seed=1))
    expert = make_policy("expert")
    seen: list[str] = []

    class Listening:
        name = expert.name

        async def complete(self, request: ChatRequest) -> Completion:
            seen.append(request.messages[0].content)
            return await expert.complete(request)

        async def aclose(self) -> None:
            return None

    outcome = asyncio.run(
        run_rollout(
            task,
            root=Listening(),
            sub=recorder,
            episode_config=EpisodeConfig(max_turns=20),
            sandbox_config=SandboxConfig(mode="process"),
        )
    )
    result = outcome.result
    assert result.sub_calls <= budget < len(task.files)
    assert result.sub_calls_refused > 0  # the expert asks for more than the budget allows
    assert len(recorder.replies) == result.sub_calls
    assert f"You may make {budget} worker calls" in seen[0]


def test_a_bench_on_the_hard_tier_is_held_to_the_budget(tmp_path: Path) -> None:
    from deeprepo.rl.bench.config import RepoSpec
    from deeprepo.rl.bench.repos import held_sub_calls, resolve_repos

    [repo] = resolve_repos([RepoSpec(generate="hard:seed=2:lang=js")], tmp_path, tmp_path)
    budget = json.loads((repo.path.parent / "task.json").read_text())["sub_call_budget"]
    assert held_sub_calls(2000, repo.path) == budget
    assert held_sub_calls(None, repo.path) == budget
    assert held_sub_calls(1, repo.path) == 1
    # An ordinary repository keeps the configured limit.
    plain = tmp_path / "plain"
    plain.mkdir()
    assert held_sub_calls(2000, plain) == 2000
