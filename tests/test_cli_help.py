"""``--help`` reads well at 80 columns, and shell completion is one command away."""

from __future__ import annotations

import re
from typing import Any

import typer.completion
import typer.main
from typer.testing import CliRunner

from deeprepo.cli.app import app
from deeprepo.cli.helptext import first_sentence, plain_labels

# Typer's plain layout labels values with the Python type: ``--root <str>``, ``<list[str]>``.
TYPE_LABEL = re.compile(r"<(?:str|int|float|bool|path|list\[[^\]]*\]|[a-z]+ range)>")


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, cmd in group.commands.items():
        if cmd.hidden:
            continue
        found.append((*prefix, name))
        if hasattr(cmd, "commands"):
            found.extend(_commands(cmd, (*prefix, name)))
    return found


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, prog_name="deeprepo")
    assert result.exit_code == 0, (path, result.output)
    return result.output


def test_every_help_fits_80_columns_without_type_labels_or_words_cut() -> None:
    paths = [(), *_commands(typer.main.get_command(app))]
    assert ("analyze",) in paths and ("runs", "list") in paths and ("local", "setup") in paths
    for path in paths:
        text = _help(path)
        assert not TYPE_LABEL.search(text), (path, TYPE_LABEL.search(text))
        for line in text.splitlines():
            assert len(line) <= 80, (path, line)
            # A word split at the margin: "--max-" then "cost", or rich's "anthropic…".
            assert not re.search(r"\w-$", line), (path, line)
            assert "…" not in line, (path, line)
            # No box drawing: the plain layout, whose help column is the full width left.
            assert not set("│╭╰─") & set(line), (path, line)
        # A command's line in a group's list is its first sentence, whole, never "...".
        assert not re.search(r"\w\.\.\.$", text, re.M), (path, text)


def test_booleans_show_as_flags_and_values_with_click_names() -> None:
    text = " ".join(_help(("analyze",)).split())
    assert "--cache / --no-cache Reuse cached model responses." in text
    assert "--max-turns INTEGER" in text and "--out PATH" in text and "--root TEXT" in text
    assert "--fail-on [low|medium|high|critical]" in text
    # Option names stay whole in the prose, hyphens and all.
    assert "unless --max-cost says otherwise" in text
    # Square brackets in help are text, not markup.
    assert "[tool.deeprepo]" in text


def test_plain_labels_and_first_sentence() -> None:
    assert plain_labels("--root <str>") == "--root TEXT"
    assert plain_labels("--include-scope <list[str]>") == "--include-scope TEXT"
    assert plain_labels("--seed <int range>") == "--seed INTEGER"
    assert plain_labels("--mode <fast|sdk>") == "--mode [fast|sdk]"
    assert plain_labels("anthropic/<m>") == "anthropic/M"  # only <type> forms are labels
    assert first_sentence("Grade findings. Then more.\n\nDetails.") == "Grade findings."
    assert (
        first_sentence("The run log: list, show\nand export")
        == "The run log: list, show and export"
    )
    assert first_sentence("Version 1.2 of it. Next.") == "Version 1.2 of it."


def test_show_completion_prints_a_bash_script(monkeypatch: Any) -> None:
    # The shell named is the one printed, whatever shell this runs in (typer's own option
    # ignored the name when shellingham was installed and printed the detected shell's).
    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "zsh")
    result = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="deeprepo")
    assert result.exit_code == 0, result.output
    assert "complete -o default -F _deeprepo_completion deeprepo" in result.output
    assert "_DEEPREPO_COMPLETE=complete_bash" in result.output


def test_completion_lists_subcommands_and_choices(monkeypatch: Any) -> None:
    runner = CliRunner()
    env = {"_DEEPREPO_COMPLETE": "complete_bash", "COMP_WORDS": "deeprepo runs ", "COMP_CWORD": "2"}
    result = runner.invoke(app, [], env=env, prog_name="deeprepo")
    assert result.output.split() == ["list", "show", "export"]
    env = {**env, "COMP_WORDS": "deeprepo analyze --fail-on ", "COMP_CWORD": "3"}
    result = runner.invoke(app, [], env=env, prog_name="deeprepo")
    assert result.output.split() == ["low", "medium", "high", "critical"]


def test_show_completion_names_the_shells_it_knows() -> None:
    result = CliRunner().invoke(app, ["--show-completion", "csh"], prog_name="deeprepo")
    assert result.exit_code == 2
    assert "'csh' is not supported" in result.output and "bash, zsh, fish" in result.output


def test_install_completion_detects_the_shell_or_says_what_to_do(
    monkeypatch: Any, tmp_path: Any
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: None)
    result = CliRunner().invoke(app, ["--install-completion"], prog_name="deeprepo")
    assert result.exit_code == 2
    assert "could not tell which shell" in result.output and "--show-completion" in result.output
    assert not any(tmp_path.iterdir())  # nothing written

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    result = CliRunner().invoke(app, ["--install-completion"], prog_name="deeprepo")
    assert result.exit_code == 0, result.output
    script = tmp_path / ".bash_completions" / "deeprepo.sh"
    assert "_DEEPREPO_COMPLETE=complete_bash" in script.read_text()
    assert str(script) in (tmp_path / ".bashrc").read_text()
