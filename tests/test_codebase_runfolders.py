"""A load never reads deeprepo's own outputs: run folders, the runs folder, ``--out``."""

from __future__ import annotations

from pathlib import Path

import pytest

from deeprepo.base.errors import CodebaseError
from deeprepo.codebase import load_codebase
from deeprepo.codebase.runfolders import RUNS_DIR_NAME, looks_like_run_folder
from deeprepo.report.rundir import RUNS_DIR
from deeprepo.report.trajectory import RUN_FILES


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _run_folder(folder: Path) -> None:
    _write(folder, {name: "{}\n" for name in RUN_FILES})


def test_a_run_folder_is_known_by_its_call_log_and_one_companion() -> None:
    assert looks_like_run_folder(set(RUN_FILES))
    assert looks_like_run_folder({"calls.jsonl", "metrics.json"})
    assert looks_like_run_folder({"calls.jsonl", "trajectory.jsonl"})  # a run still going
    assert not looks_like_run_folder({"calls.jsonl"})  # a project's own file of that name
    assert not looks_like_run_folder({"metrics.json", "trajectory.jsonl", "report.md"})


def test_the_runs_folder_and_run_folders_anywhere_are_skipped_and_counted(
    tmp_path: Path,
) -> None:
    _write(tmp_path, {"app.py": "import os\n", "data/calls.jsonl": "{}\n"})
    _run_folder(tmp_path / RUNS_DIR_NAME / "20260101-000000-app")
    _run_folder(tmp_path / "reports" / "nightly")  # a run written with --out elsewhere
    cb = load_codebase(tmp_path)
    assert list(cb.files) == ["app.py", "data/calls.jsonl"]
    assert cb.metadata.run_folders == [f"{RUNS_DIR_NAME}/", "reports/nightly/"]
    assert (
        f"2 folders of deeprepo's own outputs (run folders) not loaded: {RUNS_DIR_NAME}/, "
        "reports/nightly/" in cb.metadata.notes
    )
    assert cb.metadata.skipped == []  # counted apart, not as skipped files


def test_a_named_out_folder_is_skipped_before_it_holds_anything(tmp_path: Path) -> None:
    _write(tmp_path, {"app.py": "x = 1\n", "out/partial.txt": "a run's first file\n"})
    cb = load_codebase(tmp_path, exclude=[tmp_path / "out"])
    assert list(cb.files) == ["app.py"] and cb.metadata.run_folders == ["out/"]


def test_run_folders_are_skipped_even_with_gitignore_off_and_the_root_itself_loads(
    tmp_path: Path,
) -> None:
    _write(tmp_path, {".gitignore": f"{RUNS_DIR_NAME}/\n", "app.py": "x = 1\n"})
    _run_folder(tmp_path / RUNS_DIR_NAME / "r1")
    assert list(load_codebase(tmp_path, respect_gitignore=False).files) == [".gitignore", "app.py"]
    # Run folders are skipped before .gitignore is asked, so they are counted as what they are.
    assert load_codebase(tmp_path).metadata.ignored == 0
    # Analysing a run folder on purpose still loads it.
    run = tmp_path / RUNS_DIR_NAME / "r1"
    assert set(load_codebase(run).files) == set(RUN_FILES)


def test_the_runs_folder_name_is_the_one_runs_are_written_to() -> None:
    assert Path(RUNS_DIR_NAME) == RUNS_DIR


def test_a_folder_of_nothing_but_runs_says_so_when_it_loads_empty(tmp_path: Path) -> None:
    _run_folder(tmp_path / RUNS_DIR_NAME / "r1")
    with pytest.raises(
        CodebaseError, match="1 run folder\\(s\\) of deeprepo's own outputs left out"
    ):
        load_codebase(tmp_path)
