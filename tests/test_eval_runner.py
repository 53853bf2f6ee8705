"""``deeprepo eval``: the summary format, results.jsonl, task specs and task directories."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from budget_case import assert_stopped_on_the_budget, expert_over_http, run_max_cost_eval
from typer.testing import CliRunner

from deeprepo.base.errors import UsageError
from deeprepo.cli.app import app
from deeprepo.rl.env.rollout import stop_condition
from deeprepo.rl.env.tasks import load_tasks, parse_task_spec
from deeprepo.rl.evals.results import RolloutResult, load_results
from deeprepo.rl.evals.summary import format_duration, format_summary, summarize

SEED_PRINTOUT = """\
Environment: deeprepo-orchestration
Model: Qwen/Qwen3-30B-A3B-Instruct-2507
Provider: https://api.pinference.ai/api/v1
Examples: 3
Rollouts per example: 2

Rewards:
reward: avg - 0.785, std - 0.100
r1: [0.636, 0.9, 0.85]
r2: [0.887, 0.7, 0.738]
delegation_reward: avg - 0.785, std - 0.100
r1: [0.636, 0.9, 0.85]
r2: [0.887, 0.7, 0.738]
num_turns: avg - 8.667, std - 4.422
r1: [18.0, 5.0, 5.0]
r2: [7.0, 9.0, 8.0]
Info:
is_truncated: avg - 0.000, std - 0.000
stop_conditions: episode_done: 1.000
Timing:
generation: min - 20s, mean - 34s, max - 1m
Usage:
input_tokens (avg): 14598.500
output_tokens (avg): 2200.333
"""


def test_summary_reproduces_the_seed_printout_exactly() -> None:
    rewards = [[0.636, 0.9, 0.85], [0.887, 0.7, 0.738]]
    turns = [[18, 5, 5], [7, 9, 8]]
    seconds = [[59.6, 20.4, 30.0], [35.0, 31.0, 28.0]]  # mean 34.0
    inputs = [[14000, 15000, 14591], [14600, 14600, 14800]]  # mean 14598.5
    outputs = [[2200, 2200, 2202], [2200, 2200, 2200]]  # mean 2200.333
    results = [
        RolloutResult(
            example_id=f"ex-{i}",
            rollout=k,
            reward=rewards[k][i],
            parts={"delegation_reward": rewards[k][i]},
            num_turns=turns[k][i],
            stop_condition="episode_done",
            generation_seconds=seconds[k][i],
            input_tokens=inputs[k][i],
            output_tokens=outputs[k][i],
        )
        # completion order differs from example order: the rows must not care
        for k in (1, 0)
        for i in (2, 0, 1)
    ]
    summary = summarize(results, ["ex-0", "ex-1", "ex-2"])
    header = [
        ("Environment", "deeprepo-orchestration"),
        ("Model", "Qwen/Qwen3-30B-A3B-Instruct-2507"),
        ("Provider", "https://api.pinference.ai/api/v1"),
        ("Examples", "3"),
        ("Rollouts per example", "2"),
    ]
    assert format_summary(summary, header) == SEED_PRINTOUT


def test_summary_stop_conditions_truncation_and_missing_rollouts() -> None:
    results = [
        RolloutResult("a", 0, 1.0, stop_condition="episode_done", generation_seconds=0.12),
        RolloutResult("a", 1, 0.5, stop_condition="max_turns_reached", is_truncated=True,
                      generation_seconds=65.0),
        RolloutResult("b", 0, 0.25, stop_condition="episode_done", generation_seconds=3.25),
        RolloutResult("c", 0, 0.0, stop_condition="error", generation_seconds=1.0),
    ]  # fmt: skip
    text = format_summary(summarize(results), sections=False)
    assert "stop_conditions: episode_done: 0.500, max_turns_reached: 0.250, error: 0.250" in text
    assert "is_truncated: avg - 0.250, std - 0.433" in text
    assert "generation: min - 120ms, mean - 17s, max - 1m 5s" in text
    assert "r2: [0.5, nan, nan]" in text
    assert "Rewards:" not in text


def test_stop_reasons_map_to_conditions() -> None:
    assert stop_condition("answer_ready") == ("episode_done", False)
    assert stop_condition("max_turns") == ("max_turns_reached", True)
    assert stop_condition("budget") == ("budget", True)
    assert stop_condition("timeout") == ("timeout", True)
    assert stop_condition("error") == ("error", False)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.1204, "120ms"), (3.25, "3.2s"), (4.0, "4s"), (20.4, "20s"), (60.4, "1m"), (65, "1m 5s"),
     (3720, "1h 2m")],
)  # fmt: skip
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_task_spec_parsing() -> None:
    spec = parse_task_spec("small:seed=3:lang=js:n=10")
    assert (spec.size, spec.seed, spec.lang, spec.n) == ("small", 3, "js", 10)
    assert parse_task_spec("medium:seed=7") == parse_task_spec("medium:seed=7:lang=python")
    for bad, message in [
        ("huge:seed=1", "start with a size"),
        ("small:seed=x", "must be integers"),
        ("small:colour=red", "key=value with key one of"),
        ("small:lang=cobol", "lang must be one of"),
        ("small:n=0", "at least 1"),
        ("small:seed=1:seed=2", "given twice"),
    ]:
        with pytest.raises(UsageError, match=message):
            parse_task_spec(bad)


def test_tasks_load_from_a_generated_directory(tmp_path: Path) -> None:
    from deeprepo.rl.tasks.generator import generate_tasks

    generate_tasks(tmp_path, seed=1, n=2, size="small", lang="python")
    tasks = load_tasks(tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    assert [t.id for t in tasks] == [e["id"] for e in index]
    assert tasks[0].metadata["size"] == "small"
    assert tasks[0].ground_truth and all("file" in e for e in tasks[0].ground_truth)
    assert all(e["file"] in tasks[0].files for e in tasks[0].ground_truth)
    assert len(load_tasks(tmp_path, n=1)) == 1
    with pytest.raises(UsageError, match="no task directories"):
        load_tasks(tmp_path / tasks[0].id / "repo")


# DESIGN §8, line by line; other lines (part blocks, section titles) may come between.
DESIGN_LINES = [
    r"reward: avg - \d\.\d{3}, std - \d\.\d{3}",
    r"r1: \[\d(\.\d{1,3})?, \d(\.\d{1,3})?\]",
    r"r2: \[\d(\.\d{1,3})?, \d(\.\d{1,3})?\]",
    r"num_turns: avg - \d+\.\d{3}, std - \d+\.\d{3}",
    r"is_truncated: avg - 0\.000, std - 0\.000",
    r"stop_conditions: episode_done: 1\.000",
    r"generation: min - \d+(ms|s|\.\ds), mean - \d+(ms|s|\.\ds), max - \d+(ms|s|\.\ds)",
    r"input_tokens \(avg\): \d+\.\d{3}",
    r"output_tokens \(avg\): \d+\.\d{3}",
]


@pytest.mark.e2e
def test_eval_cli_prints_the_summary_and_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", "--model", "scripted/expert", "-n", "2", "-r", "2",
         "--generate", "small:seed=1", "--out", str(out), "--sandbox", "process"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    pos = 0
    for pattern in DESIGN_LINES:
        while pos < len(lines) and not re.fullmatch(pattern, lines[pos]):
            pos += 1
        assert pos < len(lines), f"no line matching {pattern!r} in order:\n{result.stdout}"
    for part in ("quality_reward", "coverage_reward", "delegation_reward", "efficiency_reward",
                 "redundancy_penalty"):  # fmt: skip
        assert any(line.startswith(f"{part}: avg - ") for line in lines), part

    rows = load_results(out)
    assert len(rows) == 4
    assert [(r.example_id, r.rollout) for r in rows] == [
        (rows[0].example_id, 0), (rows[0].example_id, 1),
        (rows[2].example_id, 0), (rows[2].example_id, 1),
    ]  # fmt: skip
    for r in rows:
        assert r.model == "scripted/expert"
        assert r.stop_condition == "episode_done" and not r.is_truncated
        assert r.num_turns == 3 == len(r.trajectory)
        assert r.trajectory[0]["index"] == 1 and "reply" in r.trajectory[0]
        assert r.sub_calls > 0 and r.input_tokens > 0 and r.output_tokens > 0
        assert r.parts["coverage_reward"] == 1.0
        assert 0.8 <= r.reward <= 1.0
        assert r.extra["sub_model"] == "oracle"
    # the printed figures are the file's figures
    mean = sum(r.reward for r in rows) / 4
    assert f"reward: avg - {mean:.3f}," in result.stdout
    r1 = f"r1: [{round(rows[0].reward, 3)}, {round(rows[2].reward, 3)}]"
    assert r1 in lines
    assert (out / "summary.txt").read_text() == result.stdout
    described = json.loads((out / "eval.json").read_text())
    assert described["reward_weights"]["quality"] > 0
    assert described["http_client"] == "fast"  # the default, recorded with the figures


@pytest.mark.e2e
def test_rollouts_are_reproducible_and_differ_between_rollout_indices(tmp_path: Path) -> None:
    args = [
        "eval",
        "-n",
        "1",
        "-r",
        "2",
        "--generate",
        "small:seed=2",
        "--sandbox",
        "process",
        "-q",
    ]
    a = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    b = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert a.exit_code == b.exit_code == 0, a.output + b.output
    ra, rb = load_results(tmp_path / "a"), load_results(tmp_path / "b")
    assert [r.reward for r in ra] == [r.reward for r in rb]
    assert [r.extra["worker_seed"] for r in ra] == [r.extra["worker_seed"] for r in rb]
    assert ra[0].extra["worker_seed"] != ra[1].extra["worker_seed"]


def test_eval_cli_rejects_bad_options(tmp_path: Path) -> None:
    runner = CliRunner()
    both = runner.invoke(
        app, ["eval", "--tasks", str(tmp_path), "--generate", "small", "--out", str(tmp_path / "x")]
    )
    assert isinstance(both.exception, UsageError)
    assert "exactly one of --tasks" in str(both.exception)
    bad = runner.invoke(app, ["eval", "--generate", "tiny:seed=1", "--out", str(tmp_path / "y")])
    assert isinstance(bad.exception, UsageError) and "start with a size" in str(bad.exception)


@pytest.mark.e2e
def test_eval_runs_tasks_from_a_directory_and_records_failed_rollouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeprepo.rl.evals import runner
    from deeprepo.rl.tasks.generator import generate_tasks

    generate_tasks(tmp_path / "tasks", seed=3, n=2, size="small", lang="js")
    real = runner.run_rollout
    calls: list[int] = []

    async def flaky(task: object, **kw: object) -> object:
        calls.append(1)
        if kw["rollout_index"] == 1:
            raise RuntimeError("kernel exploded")
        return await real(task, **kw)  # type: ignore[arg-type,unused-ignore]

    monkeypatch.setattr(runner, "run_rollout", flaky)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", "--tasks", str(tmp_path / "tasks"), "-r", "2", "--out", str(out), "-q",
         "--sandbox", "process"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = load_results(out)
    assert len(calls) == len(rows) == 4  # both tasks of the directory, 2 rollouts each
    failed = [r for r in rows if r.rollout == 1]
    assert all(r.stop_condition == "error" and r.reward == 0.0 for r in failed)
    assert "kernel exploded" in failed[0].extra["stop_detail"]
    assert all(r.stop_condition == "episode_done" for r in rows if r.rollout == 0)
    assert "stop_conditions: episode_done: 0.500, error: 0.500" in result.stdout
    assert "r2: [0.0, 0.0]" in result.stdout


@pytest.mark.e2e
def test_eval_drives_a_provider_root_over_the_loopback_server(tmp_path: Path) -> None:
    """``--model openai/<m> --base-url``: the root is a real OpenAI-compatible client, served
    the scripted expert's replies with real usage blocks."""
    from deeprepo.testing.loopback import LoopbackServer

    with LoopbackServer(reply_fn=expert_over_http(), ttl_s=60) as srv:
        result = CliRunner().invoke(
            app,
            ["eval", "--model", "openai/expert-over-http", "--base-url", srv.openai_base_url,
             "-n", "1", "-r", "2", "--generate", "small:seed=1", "--out", str(tmp_path), "-q",
             "--sandbox", "process"],
        )  # fmt: skip
        requests, base_url = srv.request_count, srv.openai_base_url
    assert result.exit_code == 0, result.output
    rows = load_results(tmp_path)
    assert [r.num_turns for r in rows] == [3, 3] and requests == 6
    assert all(r.model == "openai/expert-over-http" for r in rows)
    assert all(r.input_tokens == 3000 and r.output_tokens == 300 for r in rows)
    assert all(r.stop_condition == "episode_done" and r.reward > 0.8 for r in rows)
    assert f"Provider: {base_url}" in result.stdout
    assert "input_tokens (avg): 3000.000" in result.stdout


@pytest.mark.e2e
def test_eval_max_cost_stops_the_evaluation_on_its_budget(tmp_path: Path) -> None:
    """``--max-cost`` caps the spend of all rollouts together, as analyze's caps one run: the
    calls stop once it is spent (never more than the calls in flight over it), rollouts not
    started then are not run, and the evaluation says so and exits incomplete (3)."""
    result, requests = run_max_cost_eval(tmp_path)
    assert_stopped_on_the_budget(tmp_path, result, requests)


@pytest.mark.e2e
def test_eval_limits_reach_every_rollout(tmp_path: Path) -> None:
    """``--max-sub-calls`` bounds each rollout as it bounds an analysis run."""
    result = CliRunner().invoke(
        app,
        ["eval", "-n", "1", "-r", "2", "--generate", "small:seed=1", "--out", str(tmp_path),
         "-q", "--sandbox", "process", "--max-sub-calls", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = load_results(tmp_path)
    assert [r.sub_calls for r in rows] == [1, 1]
    assert all(r.extra["stop_reason"] in ("answer_ready", "budget") for r in rows)


@pytest.mark.e2e
def test_a_kernel_that_fails_to_start_fails_its_rollout_and_never_hangs_the_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child dies joining its cgroup (as it did with ENODEV when another process swept
    the cgroup): every rollout is recorded as an error with the child's message, and the
    evaluation ends."""
    import os

    from deeprepo.rl.tasks.generator import generate_tasks
    from deeprepo.sandbox import cgroup

    if cgroup.problem() is not None:
        pytest.skip(f"needs a cgroup: {cgroup.problem()}")
    generate_tasks(tmp_path / "tasks", seed=4, n=2, size="small", lang="python")
    # An fd the child cannot write: its join fails as an ENODEV would, and it exits 70.
    monkeypatch.setattr(
        cgroup.KernelCgroup, "join_fds", lambda self: [os.open(os.devnull, os.O_RDONLY)]
    )
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", "--tasks", str(tmp_path / "tasks"), "-r", "2", "--out", str(out), "-q",
         "--sandbox", "process"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # nothing succeeded: the eval says so and ends
    assert "every rollout (4) failed" in result.output
    rows = load_results(out)
    assert len(rows) == 4 and all(r.stop_condition == "error" for r in rows)
    assert "joining the kernel's cgroup" in rows[0].extra["stop_detail"]
