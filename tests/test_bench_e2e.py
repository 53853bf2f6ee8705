"""``deeprepo bench`` end to end: the offline example with ground-truth columns, resume,
partial benches, and cost equality with the runs' ledgers against the loopback server."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from clihelp import ROOT, run_cli, sigint_default

from deeprepo.base.chat import Usage
from deeprepo.testing.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.e2e

OFFLINE = ROOT / "examples" / "bench" / "offline.toml"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _bench(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "bench.json").read_text())
    return data


def _metrics_files(out: Path) -> list[Path]:
    return sorted((out / "runs").glob("*/*/r*/metrics.json"))


def test_offline_example_end_to_end_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    proc = run_cli("bench", str(OFFLINE), "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = _bench(out)
    configs = {c["name"]: c for c in data["configs"]}
    assert list(configs) == ["expert", "lazy", "half", "baseline"]
    assert data["complete"] and data["totals"]["runs"] == 4 and data["totals"]["reused"] == 0
    # Each cell is a normal run folder; the bench reads its figures back from them.
    assert len(_metrics_files(out)) == 4
    for c in data["cells"]:
        m = json.loads((Path(c["dir"]) / "metrics.json").read_text())
        assert c["sub_calls"] == m["sub_calls"] and c["turns"] == m["turns"]
        assert c["findings"] == len(json.loads((Path(c["dir"]) / "findings.json").read_text()))
    # Ground truth of the bundled example: every configuration is graded.
    assert configs["expert"]["grading"]["f1"] == 1.0
    assert configs["lazy"]["grading"]["recall"] == 0.0 and configs["lazy"]["grading"]["fn"] == 5
    half = configs["half"]["grading"]
    assert 0 < half["recall"] < 1 and half["tp"] + half["fn"] == 5
    assert "sql-injection" in configs["expert"]["grading"]["per_family"]
    assert (
        configs["baseline"]["sub_calls_mean"] is None or configs["baseline"]["mode"] == "baseline"
    )
    assert configs["expert"]["files_covered_mean"] > configs["half"]["files_covered_mean"] > 0
    assert configs["lazy"]["complete_runs"] == 0 and configs["expert"]["complete_runs"] == 1
    assert configs["lazy"]["unique_finds"] == 0 and configs["half"]["unique_finds"] == 0
    assert all(c["behaviour"] == "-" or isinstance(c["behaviour"], str) for c in configs.values())
    assert data["totals"]["cost_usd"] == 0.0  # built-in models are free
    md = (out / "bench.md").read_text()
    for heading in ("## Configurations", "## Against ground truth", "### Per CWE family",
                    "## Economics (projection)"):  # fmt: skip
        assert heading in md
    assert "complete · 4 of 4 cells finished" in md
    width, height = _png_size(out / "bench.png")
    assert 400 <= width <= 3000 and 300 <= height <= 3000
    assert "[4/4]" in proc.stderr and "F1" in proc.stdout

    # Rerun: every cell is finished, so no run is made and the folders are untouched.
    stamps = {p: p.stat().st_mtime_ns for p in _metrics_files(out)}
    proc = run_cli("bench", str(OFFLINE), "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _bench(out)["totals"]["reused"] == 4
    assert {p: p.stat().st_mtime_ns for p in _metrics_files(out)} == stamps
    assert "start " not in proc.stderr

    # A cell left half-done (its metrics say it was interrupted) is the only one run again.
    lazy = out / "runs" / "lazy" / "vulnapi" / "r1" / "metrics.json"
    m = json.loads(lazy.read_text())
    m["stop_reason"] = "interrupted"
    lazy.write_text(json.dumps(m))
    proc = run_cli("bench", str(OFFLINE), "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = _bench(out)
    assert data["totals"]["reused"] == 3 and data["totals"]["runs"] == 4
    assert proc.stderr.count("start ") == 1 and "start lazy" in proc.stderr
    changed = [p for p in _metrics_files(out) if p.stat().st_mtime_ns != stamps[p]]
    assert changed == [lazy]

    # Every run now labels its behaviour; bench reads the label from each run's metrics.json,
    # and shows "-" for a run folder written before the label existed.
    assert json.loads(lazy.read_text())["behaviour"]["label"] == "no-delegation"
    expert = out / "runs" / "expert" / "vulnapi" / "r1" / "metrics.json"
    m = json.loads(expert.read_text())
    m["behaviour"] = {"label": "delegator"}
    expert.write_text(json.dumps(m))
    m = json.loads(lazy.read_text())
    del m["behaviour"]
    lazy.write_text(json.dumps(m))
    proc = run_cli("bench", str(OFFLINE), "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    configs = {c["name"]: c for c in _bench(out)["configs"]}
    assert configs["expert"]["behaviour"] == "delegator" and configs["lazy"]["behaviour"] == "-"
    assert "| delegator |" in (out / "bench.md").read_text()

    # plot bench redraws the PNG from the folder.
    png = tmp_path / "again.png"
    proc = run_cli("plot", "bench", str(out), "-o", str(png))
    assert proc.returncode == 0, proc.stderr
    assert _png_size(png)[0] >= 400


def test_failed_cells_are_reported_and_the_bench_is_partial(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    """A model that errors fails its cell; the others finish; exit code 3, failure listed."""
    loopback.add_rule("", Reply(status=400, error_message="model not found"), route="openai")
    toml = tmp_path / "b.toml"
    toml.write_text(
        f"""
[[repo]]
path = "{ROOT / "examples" / "vulnapi"}"
[[config]]
name = "expert"
root = "scripted/expert"
sub = "static"
[[config]]
name = "broken"
mode = "baseline"
model = "openai/missing"
base_url = "{loopback.openai_base_url}"
"""
    )
    out = tmp_path / "bench"
    proc = run_cli("bench", str(toml), "--out", str(out), env={"DEEPREPO_RETRY_BASE_S": "0"})
    assert proc.returncode == 3, proc.stderr
    data = _bench(out)
    cells = {c["config"]: c for c in data["cells"]}
    assert cells["expert"]["status"] == "done"
    assert cells["broken"]["status"] == "failed" and "error" in cells["broken"]["reason"]
    assert not data["complete"] and data["totals"]["failed"] == 1
    md = (out / "bench.md").read_text()
    assert "PARTIAL · 1 of 2 cells finished: 1 failed" in md
    assert "## Cells without a finished run" in md


def test_bad_toml_and_missing_keys_are_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[repo]]\npath = "x"\n[[config]]\nname = "a"\nroot = "scripted/expert"\n')
    proc = run_cli("bench", str(bad), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "needs root" in proc.stderr
    proc = run_cli("bench", str(ROOT / "examples" / "bench" / "three-way.toml"),
                   "--out", str(tmp_path / "o2"))  # fmt: skip
    assert proc.returncode == 2
    assert "ANTHROPIC_API_KEY" in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert not (tmp_path / "o2").exists()  # nothing ran, no folder made
    bad.write_text(
        f'[[repo]]\npath = "{ROOT / "examples" / "vulnapi"}"\n'
        '[[config]]\nname = "a"\nroot = "scripted/expert"\nsub = "static"\nprompt = "terse"\n'
    )
    proc = run_cli("bench", str(bad), "--out", str(tmp_path / "o3"))
    assert proc.returncode == 2 and "config 'a': unknown --prompt 'terse'" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and not (tmp_path / "o3").exists()
    bad.write_text(
        '[[repo]]\npath = "gone"\n[[config]]\nname = "a"\nroot = "scripted/expert"\nsub = "static"\n'
    )
    proc = run_cli("bench", str(bad), "--out", str(tmp_path / "o4"))
    assert proc.returncode == 2 and "repo[1].path gone is not a directory" in proc.stderr
    assert not (tmp_path / "o4").exists()


PRICES = {
    "models": {
        "anthropic/test-root-a": {
            "input": 5.0,
            "output": 25.0,
            "cache_read": 0.5,
            "cache_write": 6.25,
        },
        "anthropic/test-root-b": {
            "input": 3.0,
            "output": 15.0,
            "cache_read": 0.3,
            "cache_write": 3.75,
        },
        "openrouter/test/sub": {"input": 0.12, "output": 0.48},
        "openai/test-big": {"input": 2.0, "output": 8.0},
        "openai/test-judge": {"input": 1.0, "output": 4.0},
    }
}
ROOT_USAGE = Usage(input_tokens=3000, output_tokens=400, cache_read_tokens=0, cache_write_tokens=0)
SUB_USAGE = Usage(input_tokens=1000, output_tokens=50)
BIG_USAGE = Usage(input_tokens=9000, output_tokens=700)
JUDGE_USAGE = Usage(input_tokens=2500, output_tokens=120)
ROOT_PROGRAM = (
    "One turn.\n\n```python\npaths = sorted(codebase)\n"
    "replies = llm_batch([file_audit_prompt(p) for p in paths])\n"
    "print(len(replies))\nset_answer('# Report\\nDone.')\n```\n"
)
WORKER = '{"findings": [{"line": 3, "kind": "sql-injection", "cwe": "CWE-89", "severity": "high", "title": "t"}]}'
BASELINE = '```json\n{"findings": [{"file": "vulnapi/models.py", "line": 32, "cwe": "CWE-89", "kind": "sql-injection", "severity": "high", "title": "sqli"}]}\n```'
JUDGE = '{"accuracy": 7, "depth": 6, "coverage": 8, "actionability": 5, "clarity": 9, "overall": 7, "rationale": "ok"}'


def _price(model: str, u: Usage) -> float:
    p = PRICES["models"][model]
    return (
        u.input_tokens * p["input"]
        + u.output_tokens * p["output"]
        + u.cache_read_tokens * p.get("cache_read", p["input"])
        + u.cache_write_tokens * p.get("cache_write", p["input"])
    ) / 1e6


def _reply(route: str, body: dict[str, Any]) -> Reply:
    model = str(body.get("model", ""))
    if route == "anthropic":
        return Reply(ROOT_PROGRAM, usage=ROOT_USAGE)
    if model == "test-big":
        return Reply(BASELINE, usage=BIG_USAGE)
    if model == "test-judge":
        return Reply(JUDGE, usage=JUDGE_USAGE)
    return Reply(WORKER, usage=SUB_USAGE)


def test_bench_costs_equal_the_runs_ledgers_and_the_judge_is_apart(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.reply_fn = _reply
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    a, o = loopback.anthropic_base_url, loopback.openai_base_url
    toml = tmp_path / "priced.toml"
    toml.write_text(
        f"""
[bench]
repetitions = 2
max_concurrent = 3
max_cost = 50.0
prices = "prices.json"
[[repo]]
path = "{ROOT / "examples" / "vulnapi"}"
[[config]]
name = "root-a"
root = "anthropic/test-root-a"
root_base_url = "{a}"
sub = "openrouter/test/sub"
sub_base_url = "{o}"
[[config]]
name = "root-b"
root = "anthropic/test-root-b"
root_base_url = "{a}"
sub = "openrouter/test/sub"
sub_base_url = "{o}"
prompt = "exhaustive"
[[config]]
name = "single-call"
mode = "baseline"
model = "openai/test-big"
base_url = "{o}"
"""
    )
    out = tmp_path / "bench"
    proc = run_cli(
        "bench", str(toml), "--out", str(out),
        "--judge", "openai/test-judge", "--judge-base-url", o,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = _bench(out)
    assert data["totals"]["runs"] == 6

    # The truth of each run's cost is its own ledger (the trajectory's end record).
    ledgers: dict[str, list[dict[str, Any]]] = {}
    for c in data["cells"]:
        lines = (Path(c["dir"]) / "trajectory.jsonl").read_text().splitlines()
        end = json.loads(lines[-1])
        m = json.loads((Path(c["dir"]) / "metrics.json").read_text())
        ledger_cost = sum(r["cost_usd"] for r in m["usage"])
        assert c["cost_usd"] == pytest.approx(ledger_cost, abs=1e-12)
        if "ledger" in end:
            assert sum(r["cost_usd"] for r in end["ledger"]) == pytest.approx(
                ledger_cost, abs=1e-12
            )
        ledgers.setdefault(c["config"], []).append(m)
    total = sum(sum(r["cost_usd"] for r in m["usage"]) for ms in ledgers.values() for m in ms)
    assert data["totals"]["cost_usd"] == pytest.approx(total, abs=1e-12)

    # And the ledgers are the prices times the usage the server reported.
    files = ledgers["root-a"][0]["sub_calls"]
    assert files > 0
    configs = {c["name"]: c for c in data["configs"]}
    for name, model in (("root-a", "anthropic/test-root-a"), ("root-b", "anthropic/test-root-b")):
        cost = configs[name]["cost"]
        assert cost["root_usd"] == pytest.approx(2 * _price(model, ROOT_USAGE), abs=1e-12)
        sub = 2 * files * _price("openrouter/test/sub", SUB_USAGE)
        assert cost["sub_usd"] == pytest.approx(sub, abs=1e-12)
        assert cost["total_usd"] == pytest.approx(cost["root_usd"] + sub, abs=1e-12)
        e = configs[name]["economics"]
        assert e["runs"] == 2 and e["measured_sub_calls"] == 2 * files
        row = next(r for r in e["rows"] if r["sub_calls"] == 1000)
        assert row["sub_cost_usd"] == pytest.approx(1000 * _price("openrouter/test/sub", SUB_USAGE))
        assert row["root_cost_usd"] == pytest.approx(_price(model, ROOT_USAGE))
    base = configs["single-call"]["cost"]
    assert base["total_usd"] == pytest.approx(2 * _price("openai/test-big", BIG_USAGE), abs=1e-12)
    assert configs["single-call"]["grading"]["tp"] == 2  # the SQL injection, twice

    # The judge graded all six reports; its cost is recorded apart from the runs'.
    judge_cost = 6 * _price("openai/test-judge", JUDGE_USAGE)
    assert data["totals"]["judge_cost_usd"] == pytest.approx(judge_cost, abs=1e-12)
    assert configs["root-a"]["judge"]["overall_mean"] == 7.0
    assert data["totals"]["cost_usd"] == pytest.approx(total, abs=1e-12)  # judge not in it
    assert (
        len([r for r in loopback.requests_for("openai") if "test-judge" in json.dumps(r.body)]) == 6
    )
    assert "## Judge (openai/test-judge)" in (out / "bench.md").read_text()

    # A rerun reuses every cell and every verdict: no model is called again.
    before = loopback.request_count
    proc = run_cli("bench", str(toml), "--out", str(out), "--judge", "openai/test-judge",
                   "--judge-base-url", o, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert loopback.request_count == before
    again = _bench(out)
    assert again["totals"]["reused"] == 6
    assert again["totals"]["cost_usd"] == pytest.approx(data["totals"]["cost_usd"], abs=1e-12)
    assert again["totals"]["judge_cost_usd"] == pytest.approx(judge_cost, abs=1e-12)


def test_bench_max_cost_is_shared_and_skips_cells_once_spent(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.reply_fn = _reply
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    one_run_root = _price("anthropic/test-root-a", ROOT_USAGE)  # $0.025 a root call
    toml = tmp_path / "capped.toml"
    toml.write_text(
        f"""
[bench]
repetitions = 3
max_cost = {one_run_root * 1.2}
prices = "prices.json"
[[repo]]
path = "{ROOT / "examples" / "vulnapi"}"
[[config]]
name = "root-a"
root = "anthropic/test-root-a"
root_base_url = "{loopback.anthropic_base_url}"
sub = "openrouter/test/sub"
sub_base_url = "{loopback.openai_base_url}"
"""
    )
    out = tmp_path / "bench"
    proc = run_cli("bench", str(toml), "--out", str(out), timeout=300)
    assert proc.returncode == 3, proc.stderr  # partial: a cell was skipped
    data = _bench(out)
    status = [(c["rep"], c["status"]) for c in data["cells"]]
    # r1 had the whole budget; r2 started with what was left, paid its root call (already
    # in flight when the budget ran out) and was refused its workers; r3 was never started.
    assert status == [(1, "done"), (2, "done"), (3, "skipped")]
    r2 = json.loads((out / "runs" / "root-a" / "vulnapi" / "r2" / "metrics.json").read_text())
    assert not r2["complete"] and r2["sub_calls"] == 0 and r2["sub_calls_refused"] > 0
    assert not (out / "runs" / "root-a" / "vulnapi" / "r3").exists()
    assert data["totals"]["cost_usd"] < 2 * one_run_root * 1.2
    assert r"1 skipped (max\_cost spent)" in (out / "bench.md").read_text()  # md-escaped


def test_generated_repositories_bring_their_ground_truth(tmp_path: Path) -> None:
    toml = tmp_path / "gen.toml"
    toml.write_text(
        """
[bench]
max_concurrent = 2
[[repo]]
generate = "small:seed=3:lang=python:n=1"
[[config]]
name = "expert"
root = "scripted/expert"
sub = "static"
[[config]]
name = "lazy"
root = "scripted/lazy"
sub = "static"
"""
    )
    out = tmp_path / "bench"
    proc = run_cli("bench", str(toml), "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = _bench(out)
    (repo,) = data["repos"]
    assert repo["ground_truth"] and Path(repo["ground_truth"]).is_file()
    assert Path(repo["path"]).is_relative_to(out.resolve() / "tasks")
    truth = json.loads(Path(repo["ground_truth"]).read_text())
    entries = truth["entries"] if isinstance(truth, dict) else truth
    bugs = sum(bool(e.get("vulnerable", True)) for e in entries)
    for c in data["configs"]:
        g = c["grading"]
        assert g is not None and g["tp"] + g["fn"] == bugs


def test_an_interrupted_bench_keeps_what_finished_and_resumes(tmp_path: Path) -> None:
    toml = tmp_path / "reps.toml"
    toml.write_text(
        f"""
[bench]
repetitions = 3
[[repo]]
path = "{ROOT / "examples" / "vulnapi"}"
[[config]]
name = "expert"
root = "scripted/expert"
sub = "static"
"""
    )
    out = tmp_path / "bench"
    env = dict(os.environ, COLUMNS="200")
    cmd = [sys.executable, "-m", "deeprepo", "bench", str(toml), "--out", str(out)]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    second = out / "runs" / "expert" / "vulnapi" / "r2" / "bench-cell.json"
    deadline = time.monotonic() + 120
    while not second.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "rerun the same command to continue" in stderr
    data = _bench(out)
    assert data["interrupted"] and not data["complete"]
    assert [c["status"] for c in data["cells"]] == ["done", "failed", "failed"]
    assert "interrupted" in (out / "bench.md").read_text()

    proc2 = run_cli("bench", str(toml), "--out", str(out), timeout=300)
    assert proc2.returncode == 0, proc2.stderr
    data = _bench(out)
    assert data["complete"] and data["totals"]["reused"] == 1
    assert proc2.stderr.count("start ") == 2
