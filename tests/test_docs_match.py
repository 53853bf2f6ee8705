"""Docs that name commands, policies and analyzers say what the code does."""

from __future__ import annotations

import re

from clihelp import ROOT
from typer.testing import CliRunner

import deeprepo.rl  # noqa: F401  (registers the research policies the guide lists)
from deeprepo.builtin.scripted import POLICIES
from deeprepo.cli.app import app


def test_the_guide_lists_every_scripted_policy() -> None:
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    [row] = [line for line in guide.splitlines() if line.startswith("| `scripted/<policy>`")]
    assert set(re.findall(r"`([a-z][a-z0-9-]*)`", row)) - {"deeprepo"} == set(POLICIES)


def test_local_setup_in_the_docs_takes_its_model_as_an_option() -> None:
    shown = []
    for doc in (ROOT / "docs").glob("*.md"):
        shown += re.findall(r"deeprepo local setup([^`\n]*)", doc.read_text(encoding="utf-8"))
    assert shown
    for args in shown:
        assert not args.strip() or args.strip().startswith("--"), args
    result = CliRunner().invoke(app, ["local", "setup", "qwen2.5-coder-0.5b"])
    assert result.exit_code == 2  # a bare model name is not how it is called


def test_the_readme_never_plots_into_the_project_root() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for line in re.findall(r"deeprepo plot [^\n]*", readme):
        out = re.search(r"(?:-o|--out) (\S+)", line)
        assert out is None or "/" in out.group(1), line
