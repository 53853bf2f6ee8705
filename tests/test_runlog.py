"""The run log as a library: migrations, the recorder, lookups, and several processes
writing at once."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from deeprepo.base.errors import UsageError
from deeprepo.runlog import (
    MIGRATIONS,
    Migration,
    RunLogWarning,
    RunRecorder,
    connect,
    find_run,
    list_runs,
    log_path,
    migrate,
    run_record,
    run_status,
)
from deeprepo.runlog.db import applied_migrations
from deeprepo.runlog.recorder import logging_disabled

ROOT = Path(__file__).resolve().parents[1]


def fake_run(folder: Path, *, turns: int = 3, calls: int = 6, status: str = "complete") -> Path:
    """A run folder as analyze writes it: trajectory.jsonl, calls.jsonl, metrics.json."""
    folder.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = [{"type": "start", "root_model": "anthropic/r"}]
    for i in range(1, turns + 1):
        records.append(
            {
                "type": "turn",
                "index": i,
                "reply": f"turn {i}",
                "code_blocks": [f"print({i})"],
                "output": str(i),
                "error": None,
                "sub_calls": 2,
                "findings_added": 1,
                "answer_ready": i == turns,
                "input_tokens": 100 * i,
                "output_tokens": 10 * i,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "cost_usd": 0.001 * i,
                "seconds": 0.5,
                "final_turn": False,
                "ledger": [],
            }
        )
    records.append({"type": "end", "stop_reason": "answer_ready"})
    (folder / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    call_rows = [
        {
            "seq": n,
            "turn": 1 + (n - 1) * turns // calls,
            "t": 0.1 * n,
            "role": "sub",
            "model": "openrouter/s",
            "system": "audit",
            "prompt": f"prompt {n}",
            "response": '{"findings": []}',
            "input_tokens": 50,
            "output_tokens": 5,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "cost_usd": 0.0001,
            "latency_s": 0.2,
            "cached": False,
            "error": None,
            "finish_reason": "stop",
            "truncated": False,
        }
        for n in range(1, calls + 1)
    ]
    # A torn last line (a crash mid-write) is not a call.
    (folder / "calls.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in call_rows) + '{"seq": 99, "ro'
    )
    metrics = {
        "mode": "rlm",
        "root_model": "anthropic/r",
        "sub_model": "openrouter/s",
        "offline": False,
        "turns": turns,
        "stop_reason": "answer_ready" if status == "complete" else "budget",
        "stop_detail": "",
        "complete": status == "complete",
        "incomplete_reason": "" if status == "complete" else "budget (raise --max-cost)",
        "sub_calls": calls,
        "sub_calls_refused": 0,
        "sub_calls_failed": 0,
        "files_covered": 4,
        "coverable_files": 4,
        "findings": turns,
        "findings_headline": turns,
        "wall_seconds": 1.5,
        "total_cost_usd": 0.0,
        "usage": [
            {"role": "root", "model": "anthropic/r", "calls": turns, "cached_calls": 0,
             "failed_calls": 0, "failed_requests": 0, "input_tokens": 100 * turns * (turns + 1) // 2,
             "output_tokens": 10 * turns * (turns + 1) // 2, "cache_read_tokens": 0,
             "cache_write_tokens": 0, "cost_usd": 0.001 * turns * (turns + 1) / 2},
            {"role": "sub", "model": "openrouter/s", "calls": calls, "cached_calls": 0,
             "failed_calls": 0, "failed_requests": 0, "input_tokens": 50 * calls,
             "output_tokens": 5 * calls, "cache_read_tokens": 0, "cache_write_tokens": 0,
             "cost_usd": 0.0001 * calls},
        ],
    }  # fmt: skip
    metrics["total_cost_usd"] = sum(u["cost_usd"] for u in metrics["usage"])
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def record(folder: Path, **start: Any) -> str:
    rec = RunRecorder()
    run_id = rec.start(mode="rlm", out_dir=folder, repo="/repos/app", **start)
    assert run_id is not None
    rec.finish(folder)
    return run_id


def counts(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        return {
            t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("runs", "turns", "calls", "usage")
        }
    finally:
        db.close()


def test_the_log_lives_in_deeprepo_home(tmp_path: Path) -> None:
    assert log_path({"DEEPREPO_HOME": str(tmp_path)}) == tmp_path / "runs.sqlite"
    assert log_path({}).name == "runs.sqlite"
    assert "deeprepo" in str(log_path({}).parent)


def test_migrations_are_applied_once_and_recorded_by_name(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    db = connect(path)
    assert applied_migrations(db) == [m.name for m in MIGRATIONS]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert migrate(db) == []  # nothing left to apply
    db.close()

    calls: list[str] = []

    def m_next(conn: sqlite3.Connection) -> None:
        calls.append("applied")
        conn.execute("ALTER TABLE runs ADD COLUMN note TEXT")

    more = (*MIGRATIONS, Migration("m999_note", m_next))
    db = connect(path)
    assert migrate(db, more) == ["m999_note"]
    assert migrate(db, more) == []
    assert calls == ["applied"]
    assert applied_migrations(db)[-1] == "m999_note"
    db.execute("SELECT note FROM runs").fetchall()  # the column exists
    db.close()


def test_a_failing_migration_leaves_nothing_half_done(tmp_path: Path) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half (x)")
        raise sqlite3.OperationalError("boom")

    db = connect(tmp_path / "runs.sqlite")
    with pytest.raises(sqlite3.OperationalError):
        migrate(db, (*MIGRATIONS, Migration("m998_broken", broken)))
    assert "m998_broken" not in applied_migrations(db)
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchone() is None
    db.close()


def test_a_run_is_running_at_start_and_holds_its_records_at_the_end(tmp_path: Path) -> None:
    folder = fake_run(tmp_path / "run", turns=3, calls=6)
    rec = RunRecorder()
    run_id = rec.start(
        mode="rlm",
        out_dir=folder,
        repo="/repos/app",
        root_model="anthropic/r",
        sub_model="openrouter/s",
    )
    assert run_id is not None and len(run_id) == 12
    db = connect(log_path())
    (row,) = list_runs(db)
    assert (row["id"], row["status"], row["turns"], row["ended_at"]) == (
        run_id,
        "running",
        None,
        None,
    )
    rec.finish(folder)
    whole = run_record(db, run_id)
    db.close()
    run = whole["run"]
    assert run["status"] == "complete" and run["ended_at"] and run["out_dir"] == str(folder)
    assert (run["turns"], run["sub_calls"], run["findings"]) == (3, 6, 3)
    assert run["input_tokens"] == 600 + 300 and run["output_tokens"] == 60 + 30
    assert run["cost_usd"] == pytest.approx(0.0066)
    assert run["metrics"]["usage"][1]["calls"] == 6
    assert [t["idx"] for t in whole["turns"]] == [1, 2, 3]
    assert whole["turns"][2]["answer_ready"] is True and whole["turns"][0]["code_blocks"] == [
        "print(1)"
    ]
    assert [c["seq"] for c in whole["calls"]] == [1, 2, 3, 4, 5, 6]  # the torn line is not a call
    assert {(u["role"], u["calls"]) for u in whole["usage"]} == {("root", 3), ("sub", 6)}


def test_a_resumed_run_takes_over_its_row_and_is_copied_again(tmp_path: Path) -> None:
    folder = fake_run(tmp_path / "run", turns=2, calls=2, status="incomplete")
    first = record(folder)
    fake_run(folder, turns=4, calls=5)  # the resumed run appended turns and calls
    rec = RunRecorder()
    assert rec.start(mode="rlm", out_dir=folder, repo="/repos/app", resumed=True) == first
    rec.finish(folder)
    assert counts(log_path()) == {"runs": 1, "turns": 4, "calls": 5, "usage": 2}
    db = connect(log_path())
    assert list_runs(db)[0]["status"] == "complete"
    db.close()


@pytest.mark.parametrize(
    ("metrics", "status"),
    [
        ({"stop_reason": "answer_ready", "complete": True, "sub_calls": 3}, "complete"),
        ({"stop_reason": "budget", "complete": False, "sub_calls": 3}, "incomplete"),
        ({"stop_reason": "answer_ready", "complete": False, "sub_calls": 1}, "incomplete"),
        ({"stop_reason": "error", "complete": False}, "failed"),
        (
            {
                "stop_reason": "answer_ready",
                "complete": False,
                "sub_calls": 0,
                "sub_calls_failed": 4,
            },
            "failed",
        ),
        ({"stop_reason": "interrupted", "complete": False}, "interrupted"),
    ],
)
def test_status_follows_the_exit_code_rule(metrics: dict[str, Any], status: str) -> None:
    assert run_status(metrics) == status


def test_abort_marks_the_run_failed_or_interrupted(tmp_path: Path) -> None:
    for exc, status in (
        (RuntimeError("disk gone"), "failed"),
        (KeyboardInterrupt(), "interrupted"),
    ):
        rec = RunRecorder()
        run_id = rec.start(mode="baseline", out_dir=tmp_path / status, repo="/r")
        rec.abort(exc)
        db = connect(log_path())
        row = find_run(db, str(run_id))
        db.close()
        assert row["status"] == status and row["ended_at"]
    assert row["stop_detail"] == "KeyboardInterrupt"


@pytest.mark.parametrize(
    ("value", "off"), [("1", True), ("yes", True), ("", False), ("0", False), ("false", False)]
)
def test_no_log_switch(value: str, off: bool) -> None:
    assert logging_disabled({"DEEPREPO_NO_LOG": value}) is off


def test_disabled_recorders_write_nothing(tmp_path: Path) -> None:
    folder = fake_run(tmp_path / "run")
    for rec in (RunRecorder(enabled=False), RunRecorder({**os.environ, "DEEPREPO_NO_LOG": "1"})):
        assert rec.start(mode="rlm", out_dir=folder, repo="/r") is None
        rec.finish(folder)
    assert not log_path().exists()


def test_an_unwritable_log_is_one_warning_and_never_an_error(tmp_path: Path) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder")
    folder = fake_run(tmp_path / "run")
    rec = RunRecorder({"DEEPREPO_HOME": str(home)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert rec.start(mode="rlm", out_dir=folder, repo="/r") is None
        rec.finish(folder)
        rec.abort(RuntimeError("x"))
    assert [w.category for w in caught] == [RunLogWarning]
    assert "run log not written" in str(caught[0].message) and "--no-log" in str(caught[0].message)


def test_a_run_whose_metrics_cannot_be_read_is_a_warning_and_stays_running(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    rec = RunRecorder()
    run_id = rec.start(mode="rlm", out_dir=folder, repo="/r")
    with pytest.warns(RunLogWarning, match="metrics.json"):
        rec.finish(folder)
    db = connect(log_path())
    assert find_run(db, str(run_id))["status"] == "running"
    db.close()


def test_a_run_is_found_by_id_prefix_or_folder(tmp_path: Path) -> None:
    ids = [record(fake_run(tmp_path / f"run{i}")) for i in range(3)]
    again = record(tmp_path / "run1")  # a second run in the same folder: the newest wins
    db = connect(log_path())
    try:
        for run_id in ids:
            assert find_run(db, run_id)["id"] == run_id
            others = [o for o in [*ids, again] if o != run_id]
            n = next(k for k in range(1, 13) if all(not o.startswith(run_id[:k]) for o in others))
            assert find_run(db, run_id[:n])["id"] == run_id
        assert find_run(db, str(tmp_path / "run1"))["id"] == again
        assert find_run(db, str(tmp_path / "run0") + "/")["id"] == ids[0]
        for ref in ("nope", "", "%", "_"):  # LIKE wildcards are plain characters here
            with pytest.raises(UsageError, match=f"no run '{ref}'") as info:
                find_run(db, ref)
            assert info.value.exit_code == 2
        for run_id in ("abc123000001", "abc123000002"):
            db.execute(
                "INSERT INTO runs (id, mode, status, started_at) VALUES (?, 'rlm', 'complete', '2026')",
                (run_id,),
            )
        with pytest.raises(UsageError, match="'abc1' is the start of 2 run ids"):
            find_run(db, "abc1")
        assert find_run(db, "abc123000002")["id"] == "abc123000002"
        assert [r["id"] for r in list_runs(db, 2)] == [again, ids[2]]  # newest first
    finally:
        db.close()
    with pytest.raises(UsageError, match="no run has been logged yet"):
        find_run(None, ids[0])


WRITER = """
import json, sys, time
from pathlib import Path
from deeprepo.runlog import RunRecorder
folder, runs, start_at = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
while time.time() < start_at:
    time.sleep(0.005)
for i in range(runs):
    rec = RunRecorder()
    assert rec.start(mode="rlm", out_dir=folder / str(i), repo=str(folder)) is not None
    rec.finish(folder)
"""


@pytest.mark.e2e
def test_several_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    processes, runs, turns, calls = 6, 15, 5, 60
    folders = [fake_run(tmp_path / f"w{p}", turns=turns, calls=calls) for p in range(processes)]
    start_at = time.time() + 2.0  # all start together, on a log that does not exist yet
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-W",
                "error::UserWarning",
                "-c",
                WRITER,
                str(f),
                str(runs),
                str(start_at),
            ],
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for f in folders
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr
    path = log_path()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT name FROM migrations").fetchall() == [
            (m.name,) for m in MIGRATIONS
        ]
        statuses = db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        assert statuses == [("complete", processes * runs)]
        per_run = db.execute(
            "SELECT count(*) FROM (SELECT run_id FROM calls GROUP BY run_id HAVING count(*) = ?)",
            (calls,),
        ).fetchone()[0]
        assert per_run == processes * runs
    finally:
        db.close()
    n = processes * runs
    assert counts(path) == {"runs": n, "turns": n * turns, "calls": n * calls, "usage": n * 2}


def test_a_log_from_an_older_deeprepo_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    old = sqlite3.connect(path, isolation_level=None)
    migrate(old, MIGRATIONS[:1])  # as the first release left it, with a run in it
    old.execute(
        "INSERT INTO runs (id, mode, status, started_at) VALUES ('a1', 'rlm', 'complete', 'x')"
    )
    old.close()
    db = connect(path)
    assert applied_migrations(db) == [m.name for m in MIGRATIONS]
    assert db.execute("SELECT id FROM runs").fetchall()[0][0] == "a1"
    assert db.execute("SELECT count(*) FROM rollouts").fetchone()[0] == 0
    db.close()
