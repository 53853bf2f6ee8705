"""``deeprepo analyze`` in a CI pipeline: --fail-on, --format/-o, -q/-v, NO_COLOR, -h; a
rerun never audits an earlier run; a key in the environment never makes the default paid."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from clihelp import EXAMPLE, ROOT, loopback_analyze_args, run_cli
from typer.testing import CliRunner

from deeprepo.cli import exits
from deeprepo.cli.app import app
from deeprepo.testing.loopback import LoopbackServer

pytestmark = pytest.mark.e2e

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-fake", "OPENAI_API_KEY": "sk-fake", "DEEPREPO_NO_LOG": "1"}
# Any SGR colour: 30-37, 90-97 (foreground), 40-47, 100-107 (background), 38;… / 48;… (rich).
_COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def _analyze(out: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli("analyze", str(EXAMPLE), "--out", str(out), *args, env={**KEYS, **env})


def _metrics(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    return data


@pytest.fixture(scope="module")
def sarif_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("ci") / "run"
    return out, _analyze(out, "--format", "sarif", "-o", "-", "--fail-on", "high")


def test_sarif_on_stdout_is_valid_and_everything_else_goes_to_stderr(
    sarif_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = sarif_run
    log = json.loads(proc.stdout)  # stdout is the SARIF document and nothing else
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)
    assert proc.stdout == (out / "findings.sarif").read_text(encoding="utf-8")
    assert proc.stderr.startswith("root scripted/expert · sub static · offline")
    assert "complete · audited 14 of 14 files" in proc.stderr
    assert "Report: " in proc.stderr


def test_fail_on_exits_with_the_findings_code_only_at_or_above_the_threshold(
    sarif_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    out, proc = sarif_run
    assert proc.returncode == exits.FINDINGS == 4
    assert "fail-on high: 4 finding(s) at or above high (exit code 4)" in proc.stderr
    assert _metrics(out)["complete"] is True  # the run itself is whole: the gate tripped
    assert _analyze(tmp_path / "c", "--fail-on", "critical", "-q").returncode == exits.OK
    bad = _analyze(tmp_path / "b", "--fail-on", "severe")
    assert bad.returncode == exits.USAGE and "severe" in bad.stderr
    assert not (tmp_path / "b").exists()  # refused before any work


@pytest.mark.parametrize(("fmt", "name"), [("json", "findings.json"), ("md", "report.md")])
def test_a_format_to_a_file_is_that_output_and_the_summary_stays_on_stdout(
    tmp_path: Path, fmt: str, name: str
) -> None:
    target = tmp_path / f"result.{fmt}"
    proc = _analyze(tmp_path / "run", "--format", fmt, "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    assert target.read_text(encoding="utf-8") == (tmp_path / "run" / name).read_text("utf-8")
    assert "complete · audited 14 of 14 files" in proc.stdout


def test_quiet_prints_only_the_result_and_a_table_can_go_to_a_file(tmp_path: Path) -> None:
    proc = _analyze(tmp_path / "run", "-q", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == _metrics(tmp_path / "run")["findings"]
    assert proc.stderr == ""  # no plan line, no progress, no summary
    table = tmp_path / "summary.txt"
    quiet_table = _analyze(tmp_path / "run2", "-q", "-o", str(table))
    assert quiet_table.stdout == "" and quiet_table.stderr == ""
    text = table.read_text(encoding="utf-8")
    assert "complete · audited 14 of 14 files" in text and "vulnapi/routes/admin.py:32" in text
    assert "\x1b" not in text


def test_verbose_lists_every_finding_and_contradicting_quiet_is_a_usage_error(
    tmp_path: Path,
) -> None:
    proc = _analyze(tmp_path / "run", "-v")
    assert proc.returncode == 0, proc.stderr
    for f in json.loads((tmp_path / "run" / "findings.json").read_text()):
        assert f"{f['file']}:{f['start_line']}" in proc.stdout
    both = _analyze(tmp_path / "r2", "-q", "-v")
    assert both.returncode == exits.USAGE and "-q/--quiet and -v/--verbose" in both.stderr


def test_no_color_turns_colour_off_on_a_forced_terminal(tmp_path: Path) -> None:
    coloured = _analyze(
        tmp_path / "a", "--fail-on", "critical", FORCE_COLOR="1", TTY_COMPATIBLE="1"
    )
    assert _COLOUR.search(coloured.stdout + coloured.stderr)  # the check can see colour
    plain = _analyze(tmp_path / "b", FORCE_COLOR="1", TTY_COMPATIBLE="1", NO_COLOR="1")
    assert plain.returncode == 0, plain.stderr
    assert not _COLOUR.search(plain.stdout + plain.stderr)


def test_keys_in_the_environment_leave_the_default_offline_and_free(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    # Every SDK pointed at a server that records requests: none may arrive.
    proc = _analyze(
        tmp_path / "run",
        OPENROUTER_API_KEY="sk-or-fake",
        ANTHROPIC_BASE_URL=loopback.anthropic_base_url,
        OPENAI_BASE_URL=loopback.openai_base_url,
    )
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first == "root scripted/expert · sub static · offline, no API calls, cost $0"
    m = _metrics(tmp_path / "run")
    assert (m["root_model"], m["sub_model"], m["offline"]) == ("scripted/expert", "static", True)
    assert m["total_cost_usd"] == 0.0
    assert loopback.request_count == 0


def test_a_model_driven_run_gets_a_default_cost_cap_named_in_its_first_line(
    loopback: LoopbackServer, tmp_path: Path
) -> None:
    loopback.enqueue_anthropic("Done.\n\n```python\nset_answer('# Report')\n```\n")
    out = tmp_path / "run"
    proc = run_cli(*loopback_analyze_args(loopback, out, "--max-turns", "1"), env=KEYS)
    first = proc.stdout.splitlines()[0]
    assert (
        first == "root anthropic/test-root · sub openrouter/test/sub · cost cap $2.00 (--max-cost)"
    )
    start = json.loads((out / "trajectory.jsonl").read_text().splitlines()[0])
    assert start["max_cost"] == 2.0 and start["options"]["max_cost"] == 2.0
    raised = run_cli(
        *loopback_analyze_args(loopback, tmp_path / "r2", "--max-turns", "1", "--max-cost", "5"),
        env=KEYS,
    )
    assert "cost cap $5.00 (--max-cost)" in raised.stdout.splitlines()[0]


def test_three_runs_in_a_row_audit_the_same_files(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    audited = []
    for _ in range(3):  # the default runs folder, inside the project
        proc = run_cli("analyze", ".", env=KEYS, cwd=project)
        assert proc.returncode == 0, proc.stderr
        audited.append(re.findall(r"audited (\d+) of (\d+) files", proc.stdout)[-1])
    assert audited == [("14", "14")] * 3
    assert len(list((project / "deeprepo-runs").iterdir())) == 3
    assert "1 run folder(s) of deeprepo's own outputs left out (deeprepo-runs/)" in proc.stderr
    # A run folder written anywhere with --out is known by its files.
    run_cli("analyze", ".", "--out", "reports/latest", env=KEYS, cwd=project)
    again = run_cli("analyze", ".", "--out", str(tmp_path / "elsewhere"), env=KEYS, cwd=project)
    assert re.findall(r"audited (\d+) of", again.stdout)[-1] == "14"
    assert "reports/latest/" in again.stderr


def test_a_repository_in_an_ignored_folder_of_another_loads_and_no_gitignore_exists(
    tmp_path: Path,
) -> None:
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    (outer / ".gitignore").write_text("generated/\n")
    inner = outer / "generated" / "task-1"
    shutil.copytree(EXAMPLE, inner)
    (inner / ".gitignore").write_text("wsgi.py\n")
    proc = run_cli("analyze", str(inner), "--out", str(tmp_path / "r1"), env=KEYS)
    assert proc.returncode == 0, proc.stderr
    # The 15 files of the example and the inner .gitignore, less wsgi.py, which only the
    # inner rules ignore.
    assert "loaded 15 files · 1 ignored by .gitignore\n" in proc.stderr
    whole = run_cli(
        "analyze", str(inner), "--no-gitignore", "--out", str(tmp_path / "r2"), env=KEYS
    )
    assert "loaded 16 files\n" in whole.stderr


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    import typer.main

    click_group = typer.main.get_command(group) if not hasattr(group, "commands") else group
    found: list[tuple[str, ...]] = []
    for name, cmd in click_group.commands.items():
        path = (*prefix, name)
        found.append(path)
        if hasattr(cmd, "commands"):
            found.extend(_commands(cmd, path))
    return found


def test_dash_h_is_help_on_every_command() -> None:
    runner = CliRunner()
    commands = _commands(app)
    assert ("analyze",) in commands and ("runs", "list") in commands
    for path in [(), *commands]:
        result = runner.invoke(app, [*path, "-h"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output, path
    for path in [(), ("analyze",)]:
        shown = " ".join(runner.invoke(app, [*path, "-h"]).output.replace("│", " ").split())
        assert "4 findings at or above --fail-on" in shown, path


def test_ctrl_c_says_stopping_at_once_and_exits_interrupted(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(1500):  # enough work that the run is still going when the signal lands
        (repo / f"m{i}.py").write_text(f"import subprocess\n\ndef f{i}(x):\n    return x\n")
    env = {**os.environ, **KEYS, "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", "analyze", str(repo), "--out", str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        # A child of a non-interactive shell may inherit SIGINT ignored; a terminal's is not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # the load summary: the run is under way
        seen.append(line)
        if line.startswith("loaded "):
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    err = "".join(seen) + rest
    assert proc.returncode == exits.INTERRUPTED, err
    assert "stopping…" in err
    assert err.index("stopping…") < err.index("interrupted")
