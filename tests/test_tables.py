"""Tables read at 80 columns and in a pipe: names are never cut, lesser columns give way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console, RenderableType
from typer.testing import CliRunner

from deeprepo.cli.app import app
from deeprepo.report.tables import Column, fit_table, show
from deeprepo.runlog import RunRecorder

ROOT = "openrouter/anthropic/claude-sonnet-4.5"
SUB = "openrouter/qwen/qwen3-30b-a3b-instruct-2507"


def _render(parts: list[RenderableType], width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    show(console, parts)
    text = console.export_text()
    console.file.close()
    return text


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def test_a_table_that_fits_keeps_every_column_and_names_whole() -> None:
    columns = [Column("name", "name"), Column("n"), Column("note", "text")]
    text = _render(fit_table(columns, [[SUB, "1", "a b c d e f g h " * 6]], 80), 80)
    assert SUB in text and "note" in text
    assert all(len(line) <= 80 for line in _lines(text))


def test_lesser_columns_go_first_and_a_footnote_names_them() -> None:
    columns = [Column("name", "name"), Column("when", drop=2), Column("calls", drop=1)]
    rows = [[ROOT + "-x" * 15, "11-27 00:10", "123"]]  # 68 characters of name
    text = _render(fit_table(columns, rows, 80), 80)
    assert rows[0][0] in text and "11-27 00:10" in text and "123" not in text
    assert "(calls left out at this width: widen the terminal or use --json)" in text


def test_too_narrow_for_any_table_gives_records_with_names_whole() -> None:
    columns = [Column("model", "name"), Column("input"), Column("output")]
    text = _render(fit_table(columns, [[SUB, "$0.05", "$0.19"]], 40, title="Models"), 40)
    assert _lines(text)[:2] == ["Models", SUB]
    assert "input $0.05 · output $0.19" in text


def test_models_in_a_pipe_at_80_columns_can_be_grepped(monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(app, ["models"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    opus = [line for line in result.output.splitlines() if "opus" in line]  # `| grep opus`
    assert any(line.startswith("anthropic/claude-opus-4-6 ") for line in opus)
    assert any(line.startswith("openrouter/anthropic/claude-opus-4.6 ") for line in opus)
    assert "…" not in result.output
    assert all(len(line) <= 80 for line in _lines(result.output))
    assert "(source left out at this width" in result.output
    wide = CliRunner().invoke(app, ["models"], env={"COLUMNS": "200"})
    assert "Anthropic list price" in wide.output  # the source column is back
    listed = json.loads(CliRunner().invoke(app, ["models", "opus", "--json"]).output)
    assert {m["name"] for m in listed} >= {"anthropic/claude-opus-4-6"}


def test_runs_list_at_80_columns_keeps_every_name_whole(tmp_path: Path) -> None:
    home = {"DEEPREPO_HOME": str(tmp_path / "home")}
    for i in range(2):
        recorder = RunRecorder(home)
        run_id = recorder.start(
            mode="rlm",
            out_dir=tmp_path / f"run{i}",
            repo=f"/repos/a-rather-long-repository-name-{i}",
            root_model=ROOT,
            sub_model=SUB,
            offline=False,
        )
        assert run_id is not None
    for columns in ("80", "60"):
        result = CliRunner().invoke(app, ["runs", "list"], env={**home, "COLUMNS": columns})
        assert result.exit_code == 0, result.output
        for name in (
            ROOT,
            SUB,
            "a-rather-long-repository-name-0",
            "a-rather-long-repository-name-1",
        ):
            assert name in result.output, (columns, name)
        assert "…" not in result.output
        assert all(len(line) <= int(columns) for line in _lines(result.output)), result.output
    listed = json.loads(CliRunner().invoke(app, ["runs", "list", "--json"], env=home).output)
    assert [r["root_model"] for r in listed] == [ROOT, ROOT]
