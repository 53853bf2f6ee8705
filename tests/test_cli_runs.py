"""``deeprepo runs`` over real runs of the CLI: what analyze and baseline log, what list,
show and export print, and that the log never changes or fails a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clihelp import EXAMPLE, ROOT, loopback_analyze_args, run_cli
from test_runlog import fake_run

from deeprepo.base.chat import Usage
from deeprepo.report.calls import read_calls
from deeprepo.report.trajectory import read_trajectory
from deeprepo.runlog import RunRecorder
from deeprepo.testing.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.e2e

KEYS = {"ANTHROPIC_API_KEY": "test-root-key", "OPENROUTER_API_KEY": "test-sub-key"}
PRICES = {
    "models": {
        "anthropic/test-root": {
            "input": 5.0,
            "output": 25.0,
            "cache_read": 0.5,
            "cache_write": 6.25,
        },
        "openrouter/test/sub": {"input": 0.12, "output": 0.48},
    }
}
ROOT_LATENCY_S = 0.6
DISPATCH = (
    "Audit everything.\n\n```python\n"
    "paths = sorted(codebase)\n"
    "replies = llm_batch([file_audit_prompt(p) for p in paths])\n"
    "print(len(replies))\n```\n"
)
ANSWER = "Done.\n\n```python\nset_answer('# Report\\n\\nnothing to add')\n```\n"


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # Keys only for runs whose models point at the loopback server: with a key set, a run
    # without --root/--sub would pick a real provider.
    keys = KEYS if any("127.0.0.1" in a for a in args) else {}
    return run_cli(*args, env={"DEEPREPO_HOME": str(home), **keys, **env})


def runs_json(home: Path) -> list[dict[str, Any]]:
    proc = cli(home, "runs", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    data: list[dict[str, Any]] = json.loads(proc.stdout)
    return data


def export(home: Path, ref: str) -> dict[str, Any]:
    proc = cli(home, "runs", "export", ref)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def reply_fn(route: str, body: dict[str, Any]) -> Reply:
    """Root: turns 1 and 2 send every file to the workers, turn 3 answers."""
    if route == "anthropic":
        turn = (len(body["messages"]) + 1) // 2
        usage = Usage(
            input_tokens=1000 * turn, output_tokens=40 + turn, cache_read_tokens=100 * turn
        )
        return Reply(DISPATCH if turn < 3 else ANSWER, usage=usage, delay_s=ROOT_LATENCY_S)
    return Reply('{"findings": []}', usage=Usage(input_tokens=700, output_tokens=30))


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(reply_fn=reply_fn, ttl_s=180.0) as srv:
        yield srv


def write_prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES))
    return path


def test_an_offline_run_is_logged_listed_shown_and_exported(tmp_path: Path) -> None:
    home, out = tmp_path / "home", tmp_path / "run"
    proc = cli(home, "runs", "list")
    assert proc.returncode == 0 and "no runs logged yet" in proc.stderr
    proc = cli(home, "analyze", str(EXAMPLE), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (home / "runs.sqlite").is_file()
    metrics = json.loads((out / "metrics.json").read_text())

    (run,) = runs_json(home)
    assert f"Run log: {run['id']} (deeprepo runs show {run['id']})" in proc.stdout
    assert run["mode"] == "rlm" and run["status"] == "complete" and run["process_gone"] is False
    assert run["out_dir"] == str(out) and run["repo"] == str(EXAMPLE)
    assert (run["root_model"], run["sub_model"], run["offline"]) == (
        "scripted/expert",
        "static",
        True,
    )
    assert (run["turns"], run["sub_calls"], run["findings"]) == (
        metrics["turns"],
        metrics["sub_calls"],
        metrics["findings"],
    )
    assert run["cost_usd"] == metrics["total_cost_usd"] == 0.0

    listed = cli(home, "runs", "list").stdout
    assert run["id"] in listed and "vulnapi" in listed and "scripted/expert" in listed

    shown = cli(home, "runs", "show", run["id"][:6])
    assert shown.returncode == 0, shown.stderr
    assert f"run {run['id']} · rlm · complete" in shown.stdout
    assert "the calls add up to the ledger" in shown.stdout

    target = tmp_path / "exports" / "run.json"  # the folder is created
    proc = cli(home, "runs", "export", str(out), "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(target.read_text())
    assert data["run"]["id"] == run["id"] and data["run"]["metrics"] == metrics
    turns = [r for r in read_trajectory(out / "trajectory.jsonl") if r["type"] == "turn"]
    assert [t["idx"] for t in data["turns"]] == [t["index"] for t in turns]
    assert [t["reply"] for t in data["turns"]] == [t["reply"] for t in turns]
    assert [t["code_blocks"] for t in data["turns"]] == [t["code_blocks"] for t in turns]
    calls = read_calls(out / "calls.jsonl")
    assert len(data["calls"]) == len(calls) == metrics["turns"] + metrics["sub_calls"]
    assert [c["prompt"] for c in data["calls"]] == [c["prompt"] for c in calls]
    by_model = lambda u: (u["role"], u["model"])  # noqa: E731
    assert sorted(data["usage"], key=by_model) == sorted(metrics["usage"], key=by_model)
    assert export(home, run["id"]) == data

    # --no-log skips the log for one run (DEEPREPO_NO_LOG=1: test_runlog).
    proc = cli(home, "analyze", str(EXAMPLE), "--out", str(tmp_path / "r2"), "--no-log")
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in runs_json(home)] == [run["id"]]


def test_an_unknown_run_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for args in (("show", "abc"), ("export", "abc")):
        proc = cli(home, "runs", *args)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [
            "error: no run 'abc': no run has been logged yet (`deeprepo runs list` shows the ids)"
        ]
    recorder = RunRecorder({"DEEPREPO_HOME": str(home)})
    recorder.start(mode="rlm", out_dir=fake_run(tmp_path / "run"), repo=str(EXAMPLE))
    recorder.finish(tmp_path / "run")
    assert len(runs_json(home)) == 1
    proc = cli(home, "runs", "show", "zzz")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "no run 'zzz' in the run log" in proc.stderr
    assert cli(home, "runs", "export", "zzz").returncode == 2
    assert cli(home, "runs", "list", "--limit", "0").returncode == 2


def test_a_model_run_logs_every_call_and_adds_up_to_its_ledger(
    server: LoopbackServer, tmp_path: Path
) -> None:
    home, out = tmp_path / "home", tmp_path / "run"
    args = loopback_analyze_args(server, out, "--prices", str(write_prices(tmp_path)))
    proc = cli(home, *args)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    data = export(home, str(out))
    run = data["run"]
    assert run["status"] == "complete" and run["turns"] == 3 and run["offline"] is False
    assert run["cost_usd"] == metrics["total_cost_usd"] > 0
    files = metrics["codebase"]["files"]
    assert run["sub_calls"] == 2 * files
    roles = [c["role"] for c in data["calls"]]
    assert roles.count("root") == 3 and roles.count("sub") == 2 * files
    ledger = {u["role"]: u for u in metrics["usage"]}
    for role in ("root", "sub"):
        mine = [c for c in data["calls"] if c["role"] == role]
        for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            assert sum(c[k] for c in mine) == ledger[role][k]
            assert run[k] == sum(u[k] for u in metrics["usage"])
        assert sum(c["cost_usd"] for c in mine) == pytest.approx(
            ledger[role]["cost_usd"], abs=1e-12
        )
    assert [t["input_tokens"] for t in data["turns"]] == [1000, 2000, 3000]
    assert all(c["latency_s"] >= ROOT_LATENCY_S for c in data["calls"] if c["role"] == "root")
    assert {c["model"] for c in data["calls"]} == {"anthropic/test-root", "openrouter/test/sub"}

    shown = cli(home, "runs", "show", run["id"], "--calls", "5")
    assert shown.returncode == 0, shown.stderr
    assert "the calls add up to the ledger" in shown.stdout
    assert f"… and {3 + 2 * files - 5:,} more calls" in shown.stdout
    assert f"${metrics['total_cost_usd']:.4f}" in shown.stdout


def test_a_single_call_run_is_logged(server: LoopbackServer, tmp_path: Path) -> None:
    server.enqueue_openai(
        "# Review\n\nNothing found.", usage=Usage(input_tokens=4000, output_tokens=500)
    )
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"openai/test-big": {"input": 2.0, "output": 8.0}}}))
    home, out = tmp_path / "home", tmp_path / "run"
    proc = cli(
        home, "single-call", str(EXAMPLE), "--model", "openai/test-big",
        "--base-url", server.openai_base_url, "--context-tokens", "20000",
        "--prices", str(prices), "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = export(home, str(out))
    assert f"Run log: {data['run']['id']}" in proc.stdout
    assert data["run"]["mode"] == "baseline" and data["run"]["status"] == "complete"
    assert data["run"]["cost_usd"] == pytest.approx((4000 * 2.0 + 500 * 8.0) / 1e6)
    assert len(data["turns"]) == 1 and len(data["calls"]) == 1
    assert (data["calls"][0]["input_tokens"], data["calls"][0]["output_tokens"]) == (4000, 500)
    assert cli(home, "single-call", str(EXAMPLE), "--model", "openai/test-big", "--base-url",
               server.openai_base_url, "--out", str(tmp_path / "r2"), "--no-log").returncode == 0  # fmt: skip
    assert len(runs_json(home)) == 1


def test_a_log_that_cannot_be_written_is_one_warning_and_changes_nothing(tmp_path: Path) -> None:
    logged, unlogged = tmp_path / "logged", tmp_path / "unlogged"
    assert cli(tmp_path / "home", "analyze", str(EXAMPLE), "--out", str(logged)).returncode == 0
    home = tmp_path / "not-a-folder"
    home.write_text("")
    proc = cli(home, "analyze", str(EXAMPLE), "--out", str(unlogged))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "run log not written" in warnings[0], proc.stderr
    assert "Run log:" not in proc.stdout
    assert (unlogged / "findings.json").read_text() == (logged / "findings.json").read_text()
    for name in ("complete", "turns", "sub_calls", "findings", "files_covered"):
        assert (
            json.loads((unlogged / "metrics.json").read_text())[name]
            == json.loads((logged / "metrics.json").read_text())[name]
        )


def test_a_killed_run_stays_running_and_resume_completes_the_same_row(
    server: LoopbackServer, tmp_path: Path
) -> None:
    home, out = tmp_path / "home", tmp_path / "run"
    args = loopback_analyze_args(server, out, "--prices", str(write_prices(tmp_path)))
    env = {**os.environ, **KEYS, "DEEPREPO_HOME": str(home), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", *args], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    trajectory = out / "trajectory.jsonl"
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if trajectory.exists() and any(
                r["type"] == "turn" for r in read_trajectory(trajectory)
            ):
                break
            time.sleep(0.02)
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    (run,) = runs_json(home)
    assert run["status"] == "running" and run["process_gone"] is True and run["ended_at"] is None
    listed = cli(home, "runs", "list")
    assert "running (process gone)" in listed.stdout and "--resume" in listed.stderr

    resumed = cli(home, "analyze", "--resume", str(out), **KEYS)
    assert resumed.returncode == 0, resumed.stderr
    (again,) = runs_json(home)
    assert again["id"] == run["id"] and again["started_at"] == run["started_at"]
    assert again["status"] == "complete" and again["turns"] == 3 and again["ended_at"]
    data = export(home, run["id"])
    assert [t["idx"] for t in data["turns"]] == [1, 2, 3]


def test_repository_and_model_text_is_escaped_in_the_console(tmp_path: Path) -> None:
    repo = tmp_path / "evil[bold red]\x1b[2Jname"
    repo.mkdir()
    (repo / "app.py").write_text("import os\nos.system('ls ' + input())\n")
    home = tmp_path / "home"
    proc = cli(home, "analyze", str(repo), "--out", str(tmp_path / "run"))
    assert proc.returncode in (0, 3), proc.stderr
    for args in (("runs", "list"), ("runs", "show", str(tmp_path / "run"))):
        shown = run_cli(*args, env={"DEEPREPO_HOME": str(home), "COLUMNS": "400"})
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout
        assert "evil[bold red]\\x1b[2Jname" in shown.stdout


def test_an_evaluation_is_one_run_with_a_row_per_rollout(tmp_path: Path) -> None:
    home, out = tmp_path / "home", tmp_path / "eval"
    proc = cli(
        home, "eval", "-n", "2", "-r", "2", "--generate", "small:seed=3", "--out", str(out), "-q"
    )
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (run,) = runs_json(home)
    assert (run["mode"], run["status"], run["root_model"], run["sub_model"]) == (
        "eval", "complete", "scripted/expert", "oracle",
    )  # fmt: skip
    assert run["turns"] == sum(r["num_turns"] for r in results)
    assert run["sub_calls"] == sum(r["sub_calls"] for r in results)
    data = export(home, run["id"])
    assert [(x["example_id"], x["rollout"], x["reward"]) for x in data["rollouts"]] == sorted(
        (r["example_id"], r["rollout"], r["reward"]) for r in results
    )
    assert data["run"]["metrics"]["summary"] == (out / "summary.txt").read_text()
    roots = [u for u in data["usage"] if u["role"] == "root"]
    assert roots[0]["calls"] == run["turns"]
    assert roots[0]["input_tokens"] == sum(
        u["input_tokens"] for r in results for u in r["usage"] if u["role"] == "root"
    )
    shown = cli(home, "runs", "show", run["id"]).stdout
    assert "rollouts" in shown and "ledger (summed over the rollouts)" in shown
    proc = cli(home, "eval", "-n", "1", "-r", "1", "--generate", "small:seed=3", "--out",
               str(tmp_path / "e2"), "-q", "--no-log")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(runs_json(home)) == 1


def test_a_corrupt_log_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "runs.sqlite").write_text("not a database, whatever its name says\n" * 10)
    proc = cli(home, "runs", "list")
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: the run log ") and "move it aside" in line
