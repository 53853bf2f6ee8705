"""A run never claims more than it did: a file an analyzer could not parse, and findings a
cap cut, make ``deeprepo analyze`` incomplete (exit 3) and are named in the console's first
lines, at the top of report.md and in metrics.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from clihelp import run_cli
from typer.testing import CliRunner

from deeprepo.builtin import programs, scripted
from deeprepo.cli import exits
from deeprepo.cli.app import app

pytestmark = pytest.mark.e2e

ENV = {"DEEPREPO_NO_LOG": "1", "ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}
SHELL = "import subprocess\n\n\ndef run(cmd):\n    subprocess.call(cmd, shell=True)\n"
# Python 3.12 generics and type aliases: bandit cannot parse them under 3.11.
NEW_SYNTAX = "def first[T](xs: list[T]) -> T:\n    return xs[0]\n\n\ntype Pair = tuple[int, int]\n"
# Python 2: no Python 3 parses it, whatever deeprepo runs on.
PY2 = 'print "hello"\n'


def _metrics(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    return data


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in files.items():
        (repo / name).write_text(text)
    return repo


def test_a_file_bandit_cannot_parse_makes_the_run_incomplete_and_is_named(
    tmp_path: Path,
) -> None:
    files = {"app.py": SHELL, "legacy.py": PY2, "modern.py": NEW_SYNTAX}
    unparsed = ["legacy.py"] + (["modern.py"] if sys.version_info < (3, 12) else [])
    repo, out = _repo(tmp_path, files), tmp_path / "run"
    proc = run_cli("analyze", str(repo), "--out", str(out), env=ENV)
    assert proc.returncode == exits.INCOMPLETE, proc.stderr
    lines = proc.stdout.splitlines()
    status = next(i for i, line in enumerate(lines) if line.startswith("INCOMPLETE"))
    assert f"audited {3 - len(unparsed)} of 3 files" in lines[status]
    assert f"{len(unparsed)} file(s) not analysed" in lines[status]
    at = next(i for i, line in enumerate(lines) if line.startswith("Not analysed"))
    named = lines[at]
    assert lines[at - 1].startswith("stop: ")  # right under the status, before the findings
    assert named.startswith(f"Not analysed ({len(unparsed)}, by bandit; Python parsed by CPython")
    assert all(name in named for name in unparsed)
    assert "high      CWE-78  app.py:5" in proc.stdout  # what was read is still reported

    report = (out / "report.md").read_text()
    top = report.split("## Findings")[0]
    assert f"> Not analysed ({len(unparsed)}) (Python parsed by CPython" in top
    for name in unparsed:
        assert f"> - `{name}`: bandit: not analysed by bandit: does not parse as Python" in top
    assert f"- Python analyzers parse with: CPython {sys.version.split()[0]}" in report

    m = _metrics(out)
    assert (m["complete"], m["files_covered"], m["files_not_analysed"]) == (
        False,
        3 - len(unparsed),
        len(unparsed),
    )
    assert [g["path"] for g in m["not_analysed"]] == unparsed
    assert {g["tool"] for g in m["not_analysed"]} == {"bandit"}
    assert "app.py" in m["covered_paths"] and "legacy.py" not in m["covered_paths"]
    assert m["python_parser"].startswith(f"CPython {sys.version.split()[0]} (")
    assert m["findings_cut"] == 0


def test_a_run_that_parses_every_file_stays_complete_and_says_which_python(
    tmp_path: Path,
) -> None:
    repo, out = _repo(tmp_path, {"app.py": SHELL}), tmp_path / "run"
    proc = run_cli("analyze", str(repo), "--out", str(out), env=ENV)
    assert proc.returncode == exits.OK, proc.stderr
    assert "Not analysed" not in proc.stdout and "Findings cut" not in proc.stdout
    m = _metrics(out)
    assert (m["complete"], m["not_analysed"], m["findings_cut"]) == (True, [], 0)
    assert m["python_parser"].startswith("CPython ")


def test_findings_past_the_cell_cap_make_the_run_incomplete_with_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five files with one finding each, a cell cap of three: the two cut are counted."""
    monkeypatch.setattr("deeprepo.sandbox.kernel.MAX_FINDINGS_PER_CELL", 3)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    repo = _repo(tmp_path, {f"m{i}.py": SHELL for i in range(5)})
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["analyze", str(repo), "--out", str(out)])
    assert result.exit_code == exits.INCOMPLETE, result.output
    assert "2 findings cut by a cap" in result.output
    assert "Findings cut: 2 dropped by a cap, not reported" in result.output
    top = (out / "report.md").read_text().split("## Findings")[0]
    assert "> Findings cut by a cap: 2 (not in this report" in top
    m = _metrics(out)
    assert (m["complete"], m["findings_cut"], m["findings"]) == (False, 2, 3)
    assert m["files_covered"] == 5  # every file was read; the report still misses findings


def test_findings_under_the_caps_are_all_reported(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {f"m{i}.py": SHELL for i in range(5)})
    out = tmp_path / "run"
    proc = run_cli("analyze", str(repo), "--out", str(out), env=ENV)
    assert proc.returncode == exits.OK, proc.stderr
    assert (_metrics(out)["findings"], _metrics(out)["findings_cut"]) == (5, 0)


def test_the_expert_records_past_a_cells_share_over_more_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a cell's share of two findings, five checked findings are recorded over three
    turns and all reported: the answer waits until none is left, nothing is cut."""
    small = [t.replace("CELL_FINDINGS = 2000", "CELL_FINDINGS = 2") for t in programs.EXPERT]
    assert small != programs.EXPERT
    monkeypatch.setitem(scripted.POLICIES, "expert", small)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    repo = _repo(tmp_path, {f"m{i}.py": SHELL for i in range(5)})
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["analyze", str(repo), "--out", str(out)])
    assert result.exit_code == exits.OK, result.output
    m = _metrics(out)
    assert (m["complete"], m["findings"], m["findings_cut"], m["turns"]) == (True, 5, 0, 5)
    trajectory = (out / "trajectory.jsonl").read_text()
    assert "recorded 2 findings; 3 left for the next turn" in trajectory
    assert "recorded 2 findings; 1 left for the next turn" in trajectory


def test_max_turns_too_low_is_blamed_on_the_limit_not_the_prompt(tmp_path: Path) -> None:
    repo, out = _repo(tmp_path, {"app.py": SHELL}), tmp_path / "run"
    proc = run_cli("analyze", str(repo), "--out", str(out), "--max-turns", "1", env=ENV)
    assert proc.returncode == exits.INCOMPLETE, proc.stderr
    reason = _metrics(out)["incomplete_reason"]
    assert reason == (
        "the root reached --max-turns 1 before sending them to a worker and answered on its "
        "final turn (raise --max-turns)"
    )
    assert "--prompt exhaustive" not in proc.stdout
