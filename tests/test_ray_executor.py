"""``--executor ray``: evals and benches as Ray tasks give the local executor's results.

One local Ray instance serves the module (its start takes seconds): 2 CPUs, bound to
127.0.0.1, no dashboard, no usage statistics, its files in the test's folder. In-process
runs find it initialised and use it; CLI subprocesses join it with ``--address``. Ray is an
optional extra: without it these tests skip, unless ``DEEPREPO_REQUIRE_RAY=1`` (CI), where
a missing Ray fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from budget_case import assert_stopped_on_the_budget, run_max_cost_eval
from clihelp import EXAMPLE, ROOT, run_cli, sigint_default
from typer.testing import CliRunner

from deeprepo.cli.app import app, main
from deeprepo.rl.evals.executor import RayExecutor, RemoteTaskError, ray_session

pytestmark = pytest.mark.e2e

try:
    import ray
except ImportError:
    if os.environ.get("DEEPREPO_REQUIRE_RAY") == "1":
        raise
    pytest.skip("Ray is not installed (pip install 'deeprepo[ray]')", allow_module_level=True)

SPEC = "small:seed=5"
# scripted/half audits some files and not others, and the oracle's seeded answers vary by
# rollout: rewards differ across tasks and rollouts, so a mixed-up pairing would show.
EVAL = ["eval", "-m", "scripted/half", "-n", "20", "-r", "2", "--generate", SPEC, "--no-log", "-q"]


def _processes_under(folder: Path) -> list[str]:
    """Command lines of live processes that mention ``folder`` (Ray's own daemons do)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in cmd:
            found.append(cmd[:200])
    return found


@contextmanager
def _short(folder: Path, name: str) -> Iterator[Path]:
    """``folder``, or a short link to it for the block: Ray's socket paths under it must fit
    AF_UNIX's ~107 bytes once a session folder and ``sockets/plasma_store`` are added."""
    if len(str(folder)) <= 40:
        yield folder
        return
    link = Path("/tmp") / f"{name}-{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(folder, target_is_directory=True)
    try:
        yield link
    finally:
        link.unlink()


@pytest.fixture(scope="module", autouse=True)
def _ray_env() -> Iterator[None]:
    # Every Ray of this module, and every CLI child that starts or joins one, shares a token
    # given here: a Ray that finds none writes one into ~/.ray, outside the test's folders.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        yield


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _short(tmp_path_factory.mktemp("ray"), "drray") as temp:
        with ray_session(num_cpus=2, temp_dir=temp) as address:
            assert address.startswith("127.0.0.1:")
            yield address
        _no_process_left(temp)


def _no_process_left(temp: Path) -> None:
    deadline = time.monotonic() + 30
    while _processes_under(temp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_under(temp) == [], "Ray left processes behind"


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found = {root}
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _listening_off_loopback() -> list[str]:
    """TCP sockets that this process or its descendants (Ray's daemons and workers) listen
    on, other than loopback ones."""
    pids = _descendants(os.getpid())
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        if not any(f"pid={pid}," in line for pid in pids):
            continue
        host = line.split()[3].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
        if not (host.startswith("127.") or host == "::1"):
            found.append(line)
    return found


def test_a_local_ray_listens_on_loopback_only(ray_address: str) -> None:
    if shutil.which("ss") is None:
        pytest.skip("no ss (iproute2) to list listening sockets")
    assert ray.get(ray.remote(lambda: 1).remote()) == 1  # a worker is up too
    assert _listening_off_loopback() == []


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _timeless(row: dict[str, Any]) -> dict[str, Any]:
    """The record without its timings; reward details to 12 places (a sum over a set can
    differ in its last bit between any two processes: string hashing is per process)."""
    out = {k: v for k, v in row.items() if k != "generation_seconds"}
    out["trajectory"] = [{k: v for k, v in t.items() if k != "seconds"} for t in row["trajectory"]]
    out["reward_details"] = {
        k: round(v, 12) if isinstance(v, float) else v for k, v in row["reward_details"].items()
    }
    return out


def test_eval_on_ray_gives_the_local_rewards(ray_address: str, tmp_path: Path) -> None:
    runner = CliRunner()
    local = runner.invoke(app, [*EVAL, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    on_ray = runner.invoke(app, [*EVAL, "--out", str(tmp_path / "ray"), "--executor", "ray"])
    assert on_ray.exit_code == 0, on_ray.output
    a, b = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert len(a) == len(b) == 40
    rewards = {(r["example_id"], r["rollout"]): r["reward"] for r in a}
    assert {(r["example_id"], r["rollout"]): r["reward"] for r in b} == rewards
    assert len(set(rewards.values())) > 3  # the comparison has teeth
    # The whole record is the same, in the same order, timing aside.
    assert [_timeless(r) for r in a] == [_timeless(r) for r in b]
    summaries = [(tmp_path / d / "summary.txt").read_text().splitlines() for d in ("local", "ray")]
    assert [[ln for ln in s if not ln.startswith("generation:")] for s in summaries] == [
        [ln for ln in summaries[0] if not ln.startswith("generation:")]
    ] * 2
    eval_json = json.loads((tmp_path / "ray" / "eval.json").read_text())
    assert eval_json["executor"] == "ray"


def test_eval_max_cost_holds_on_ray_as_it_does_locally(ray_address: str, tmp_path: Path) -> None:
    """tests/test_eval_runner.py's budget case, on Ray: the same calls pass the cap, the same
    rollout stops on it, the same rollouts never start, the same summary line."""
    result, requests = run_max_cost_eval(tmp_path, "--executor", "ray")
    assert_stopped_on_the_budget(tmp_path, result, requests)


def test_a_dying_ray_task_fails_its_rollout_and_the_eval_goes_on(
    ray_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeprepo.rl.evals import runner
    from deeprepo.rl.evals.runner import EvalOptions, run_eval

    # A lambda travels by value: the Ray worker runs it and dies at once.
    monkeypatch.setattr(runner, "rollout_elsewhere", lambda *args: os._exit(3))
    options = EvalOptions(
        model="scripted/half",
        generate=SPEC,
        n=2,
        rollouts=1,
        out_dir=tmp_path / "out",
        run_log=False,
        executor="ray",
    )
    run = asyncio.run(run_eval(options))
    assert len(run.results) == 2 and len(run.failed) == 2
    assert all(r.stop_condition == "error" and r.reward == 0.0 for r in run.results)
    assert "the Ray task running <lambda> failed" in str(run.first_error)
    assert len(_rows(tmp_path / "out")) == 2  # recorded, as a local failure is


def test_cancelling_a_ray_task_stops_its_worker(ray_address: str) -> None:
    async def cancel_soon() -> None:
        work = asyncio.ensure_future(RayExecutor().run(lambda: time.sleep(600)))
        await asyncio.sleep(2)
        work.cancel()
        with pytest.raises(asyncio.CancelledError):
            await work

    started = time.monotonic()
    asyncio.run(cancel_soon())
    assert time.monotonic() - started < 60
    deadline = time.monotonic() + 30  # the killed worker hands its CPU back
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray.available_resources().get("CPU", 0) == 2


def test_an_exception_in_a_ray_task_is_raised_as_itself(ray_address: str) -> None:
    with pytest.raises(ZeroDivisionError):
        asyncio.run(RayExecutor().run(lambda: 1 / 0))
    with pytest.raises(RemoteTaskError, match="failed"):
        asyncio.run(RayExecutor().run(lambda: os._exit(1)))


TINY = """
[bench]
repetitions = 1
max_concurrent = 2

[[repo]]
path = "{repo}"

[[config]]
name = "expert"
root = "scripted/expert"
sub = "static"

[[config]]
name = "lazy"
root = "scripted/lazy"
sub = "static"
"""


def _cells(out: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((out / "bench.json").read_text())
    keep = ("config", "status", "sub_calls", "turns", "findings", "files_covered", "cost_usd")
    return {c["config"]: {k: c.get(k) for k in keep} for c in data["cells"]}


def test_bench_on_ray_matches_local_and_resumes_on_ray(ray_address: str, tmp_path: Path) -> None:
    toml = tmp_path / "tiny.toml"
    toml.write_text(TINY.format(repo=EXAMPLE))
    local = run_cli("bench", str(toml), "--out", str(tmp_path / "local"), timeout=300)
    assert local.returncode == 0, local.stderr
    out = tmp_path / "ray"
    args = ["bench", str(toml), "--out", str(out), "--executor", "ray", "--address", ray_address]
    proc = run_cli(*args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _cells(out) == _cells(tmp_path / "local")
    assert len(_cells(out)) == 2 and all(c["status"] == "done" for c in _cells(out).values())

    # Resume on Ray: the cell left half-done is the only one run again.
    lazy = out / "runs" / "lazy" / "vulnapi" / "r1" / "metrics.json"
    expert = out / "runs" / "expert" / "vulnapi" / "r1" / "metrics.json"
    m = json.loads(lazy.read_text())
    m["stop_reason"] = "interrupted"
    lazy.write_text(json.dumps(m))
    kept = expert.stat().st_mtime_ns
    proc = run_cli(*args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("start ") == 1 and "start lazy" in proc.stderr
    assert expert.stat().st_mtime_ns == kept
    assert json.loads(lazy.read_text())["stop_reason"] != "interrupted"
    assert json.loads((out / "bench.json").read_text())["totals"]["reused"] == 1


def test_eval_starts_and_stops_its_own_local_ray(tmp_path: Path) -> None:
    # No --address: the command starts a Ray of its own (RAY_TMPDIR puts its files here)
    # and shuts it down, leaving no process behind.
    (tmp_path / "t").mkdir()
    out = tmp_path / "out"
    args = ["eval", "-m", "scripted/half", "-n", "2", "-r", "1", "--generate", SPEC, "--no-log"]
    with _short(tmp_path / "t", "drown") as temp:
        env = {"RAY_TMPDIR": str(temp)}
        proc = run_cli(*args, "--executor", "ray", "-c", "1", "--out", str(out), env=env)
        assert proc.returncode == 0, proc.stderr
        assert len(_rows(out)) == 2
        assert any((temp / "ray").glob("session_*")), "its Ray did not run under RAY_TMPDIR"
        _no_process_left(temp)


def test_ctrl_c_stops_an_eval_on_its_own_ray_and_leaves_no_process(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    out = tmp_path / "out"
    args = ["eval", "-m", "scripted/expert", "-n", "20", "-r", "2", "--generate", SPEC]
    cmd = [sys.executable, "-m", "deeprepo", *args, "--no-log", "--executor", "ray"]
    with _short(tmp_path / "t", "drint") as temp:
        proc = subprocess.Popen(
            [*cmd, "-c", "2", "--out", str(out)],
            cwd=ROOT,
            env=dict(os.environ, RAY_TMPDIR=str(temp)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=sigint_default,
        )
        results = out / "results.jsonl"
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if results.is_file() and results.read_text().count("\n") >= 1:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr
        assert "interrupted; finished rollouts are in results.jsonl" in stderr
        assert 1 <= len(_rows(out)) < 40
        _no_process_left(temp)


def test_executor_choice_is_checked_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    for argv in (
        ["eval", "--generate", SPEC, "--executor", "ray", "--out", str(tmp_path / "e")],
        [
            "bench",
            str(ROOT / "examples/bench/offline.toml"),
            "--executor",
            "ray",
            "--out",
            str(tmp_path / "b"),
        ],
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert "pip install 'deeprepo[ray]'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--generate", SPEC, "--address", "127.0.0.1:1", "--out", str(tmp_path / "a")])
    assert exit_.value.code == 2
    assert "--address needs --executor ray" in capsys.readouterr().err
    assert not (tmp_path / "e").exists() and not (tmp_path / "a").exists()
