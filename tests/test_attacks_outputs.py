"""Attacks on what deeprepo writes and what its outputs show (issue 18, items 2, 7, 8, 10).

Each test is the attacker's move, built by hand: a run folder with links planted where
deeprepo writes, a repository whose file names forge markdown or terminal escapes, a root
that reports findings on paths outside the repository, a calls.jsonl built to blow up the
viewer's memory. Each then runs the real CLI (``python -m deeprepo`` in a subprocess) and
checks that the attack is contained and said out loud.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from clihelp import run_cli

pytestmark = pytest.mark.e2e

VICTIM_TEXT = "ssh-ed25519 AAAA-the-users-own-key user@host\n"


def _env(tmp_path: Path) -> dict[str, str]:
    """A private cache, data home and HOME: the test never touches the user's own."""
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }


def _victims(tmp_path: Path, names: list[str]) -> dict[str, Path]:
    """Files outside the run folder that a link planted in it points at."""
    folder = tmp_path / "victim"
    folder.mkdir(exist_ok=True)
    out = {}
    for name in names:
        path = folder / name.strip(".").replace("/", "_")
        path.write_text(VICTIM_TEXT)
        out[name] = path
    return out


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _finished_run(run: Path) -> None:
    """A run folder as a colleague would send it: a start, one turn, an end."""
    run.mkdir(parents=True)
    _jsonl(
        run / "trajectory.jsonl",
        [
            {"type": "start", "path": "repo", "root_model": "scripted/expert", "sub_model": "x"},
            {"type": "turn", "index": 1, "code": "print(1)", "output": "1", "reasoning": ""},
            {"type": "end", "stop_reason": "answer_ready"},
        ],
    )


def _resumable_run(run: Path, repo: Path) -> None:
    """A run folder that stopped before its first turn, with the options of an offline run."""
    run.mkdir(parents=True)
    options = {
        "path": str(repo), "root": "scripted/expert", "sub": "static", "cache": False,
        "run_log": False, "out_dir": str(run), "sandbox": "auto",
    }  # fmt: skip
    _jsonl(
        run / "trajectory.jsonl",
        [{"type": "start", "path": str(repo), "root_model": "scripted/expert",
          "sub_model": "static", "options": options}],
    )  # fmt: skip


def _small_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "app.py").write_text("import os\n\n\ndef run(cmd):\n    os.system(cmd)\n")
    return path


def _assert_untouched(victims: dict[str, Path]) -> None:
    for name, path in victims.items():
        assert not path.is_symlink() and path.read_text() == VICTIM_TEXT, f"{name} wrote through"


# --- item 2: writes never follow a link planted in a run folder ------------------------


def test_view_never_writes_through_links_planted_at_tmp_and_final_names(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _finished_run(run)
    names = [".trajectory.html.tmp", "trajectory.html.tmp", "trajectory.html"]
    victims = _victims(tmp_path, names)
    for name, target in victims.items():
        (run / name).symlink_to(target)

    proc = run_cli("view", str(run), env=_env(tmp_path))

    assert proc.returncode == 0, proc.stderr
    _assert_untouched(victims)
    page = run / "trajectory.html"
    assert not page.is_symlink() and "<html" in page.read_text()


def test_resume_never_writes_through_links_planted_at_every_output_name(tmp_path: Path) -> None:
    repo = _small_repo(tmp_path / "repo")
    run = tmp_path / "run"
    _resumable_run(run, repo)
    outputs = ["report.md", "findings.json", "findings.sarif", "metrics.json", "trajectory.html"]
    names = [
        *outputs,
        *(f"{n}.tmp" for n in outputs),
        *(f".{n}.tmp" for n in outputs),
        "trajectory.jsonl.tmp",
    ]
    victims = _victims(tmp_path, names)
    for name, target in victims.items():
        (run / name).symlink_to(target)

    proc = run_cli("analyze", str(repo), "--resume", str(run), env=_env(tmp_path))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_untouched(victims)
    for name in outputs:
        assert not (run / name).is_symlink(), f"{name} is still the planted link"
    assert "## Findings" in (run / "report.md").read_text()


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
@pytest.mark.parametrize("log", ["calls.jsonl", "trajectory.jsonl"])
def test_resume_refuses_an_append_log_that_is_a_link(tmp_path: Path, log: str, link: str) -> None:
    repo = _small_repo(tmp_path / "repo")
    run = tmp_path / "run"
    _resumable_run(run, repo)
    victim = _victims(tmp_path, [log])[log]
    if log == "trajectory.jsonl":
        # The attacker's target holds a resumable start record too, so deeprepo reads it
        # as the trajectory and would append its turns to it.
        os.replace(run / log, victim)
    (run / log).unlink(missing_ok=True)
    if link == "symlink":
        (run / log).symlink_to(victim)
    else:
        os.link(victim, run / log)
    before = victim.read_bytes()

    proc = run_cli("analyze", str(repo), "--resume", str(run), env=_env(tmp_path))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert victim.read_bytes() == before
    said = " ".join((proc.stdout + proc.stderr).split())
    assert f"refusing to write {run / log}" in said
    assert "link" in said


def test_view_output_flag_onto_a_link_replaces_the_link(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _finished_run(run)
    victim = _victims(tmp_path, ["page.html"])
    (tmp_path / "page.html").symlink_to(victim["page.html"])

    proc = run_cli("view", str(run), "-o", str(tmp_path / "page.html"), env=_env(tmp_path))

    assert proc.returncode == 0, proc.stderr
    _assert_untouched(victim)
