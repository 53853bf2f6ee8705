"""The run log database: where it lives, how it is opened, and its migrations.

One SQLite file, ``runs.sqlite``, in ``$DEEPREPO_HOME`` when that is set, else in the
user data directory (``platformdirs.user_data_dir("deeprepo")``). Several runs may write
at once (a benchmark, two terminals): the file is in WAL mode, every connection waits up
to :data:`BUSY_TIMEOUT_S` for a lock, and every write is one ``BEGIN IMMEDIATE``
transaction, so a reader never sees half a run and writers queue instead of failing.

The schema grows by named, append-only migrations (:data:`MIGRATIONS`): each is applied
once, in order, in the transaction that records its name in ``migrations``. A migration
is never edited once released; a change is a new one at the end.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "BUSY_TIMEOUT_S",
    "DB_FILENAME",
    "HOME_ENV",
    "MIGRATIONS",
    "Migration",
    "applied_migrations",
    "connect",
    "data_home",
    "log_path",
    "migrate",
    "write",
]

HOME_ENV = "DEEPREPO_HOME"
DB_FILENAME = "runs.sqlite"
BUSY_TIMEOUT_S = 30.0


class Migration(NamedTuple):
    """One schema step: applied once, recorded by ``name``."""

    name: str
    apply: Callable[[sqlite3.Connection], None]


def _m001_initial(db: sqlite3.Connection) -> None:
    # One row per run (analyze, baseline); its turns, its LLM calls and its ledger.
    db.execute(
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            mode TEXT NOT NULL,
            status TEXT NOT NULL,
            started_at TEXT NOT NULL,
            ended_at TEXT,
            repo TEXT,
            rev TEXT,
            out_dir TEXT,
            root_model TEXT,
            sub_model TEXT,
            offline INTEGER,
            stop_reason TEXT,
            stop_detail TEXT,
            incomplete_reason TEXT,
            turns INTEGER,
            sub_calls INTEGER,
            sub_calls_refused INTEGER,
            sub_calls_failed INTEGER,
            findings INTEGER,
            findings_headline INTEGER,
            files_audited INTEGER,
            files_to_audit INTEGER,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cache_read_tokens INTEGER,
            cache_write_tokens INTEGER,
            cost_usd REAL,
            wall_seconds REAL,
            deeprepo_version TEXT,
            host TEXT,
            pid INTEGER,
            metrics TEXT
        )"""
    )
    db.execute("CREATE INDEX runs_by_start ON runs (started_at)")
    db.execute("CREATE INDEX runs_by_out_dir ON runs (out_dir)")
    db.execute(
        """CREATE TABLE turns (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            reply TEXT,
            code_blocks TEXT,
            output TEXT,
            error TEXT,
            sub_calls INTEGER,
            findings_added INTEGER,
            answer_ready INTEGER,
            final_turn INTEGER,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cache_read_tokens INTEGER,
            cache_write_tokens INTEGER,
            cost_usd REAL,
            seconds REAL,
            PRIMARY KEY (run_id, idx)
        )"""
    )
    db.execute(
        """CREATE TABLE calls (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            n INTEGER NOT NULL,
            seq INTEGER,
            turn INTEGER,
            t REAL,
            role TEXT,
            model TEXT,
            system TEXT,
            prompt TEXT,
            response TEXT,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cache_read_tokens INTEGER,
            cache_write_tokens INTEGER,
            cost_usd REAL,
            latency_s REAL,
            cached INTEGER,
            error TEXT,
            finish_reason TEXT,
            truncated INTEGER,
            PRIMARY KEY (run_id, n)
        )"""
    )
    db.execute(
        """CREATE TABLE usage (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            model TEXT NOT NULL,
            calls INTEGER,
            cached_calls INTEGER,
            failed_calls INTEGER,
            failed_requests INTEGER,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cache_read_tokens INTEGER,
            cache_write_tokens INTEGER,
            cost_usd REAL,
            PRIMARY KEY (run_id, role, model)
        )"""
    )


def _m002_eval_rollouts(db: sqlite3.Connection) -> None:
    # ``deeprepo eval`` runs (mode ``eval``): one row per rollout, from results.jsonl.
    db.execute(
        """CREATE TABLE rollouts (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            example_id TEXT NOT NULL,
            rollout INTEGER NOT NULL,
            reward REAL,
            parts TEXT,
            num_turns INTEGER,
            stop_condition TEXT,
            stop_reason TEXT,
            sub_calls INTEGER,
            findings INTEGER,
            input_tokens INTEGER,
            output_tokens INTEGER,
            cost_usd REAL,
            seconds REAL,
            PRIMARY KEY (run_id, example_id, rollout)
        )"""
    )


#: Every migration, in the order applied. Append only: never edit or reorder a released one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration("m001_initial", _m001_initial),
    Migration("m002_eval_rollouts", _m002_eval_rollouts),
)


def data_home(env: Mapping[str, str] | None = None) -> Path:
    """deeprepo's data directory: ``$DEEPREPO_HOME``, else the platform's user data dir."""
    env = os.environ if env is None else env
    home = env.get(HOME_ENV, "").strip()
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("deeprepo"))


def log_path(env: Mapping[str, str] | None = None) -> Path:
    """The run log file: ``<data home>/runs.sqlite``."""
    return data_home(env) / DB_FILENAME


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def connect(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """Open the log (creating it and its folder with ``create``), in WAL mode, migrated."""
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.is_file():
        raise FileNotFoundError(2, "no run log yet", str(path))
    # isolation_level=None: transactions are ours (BEGIN IMMEDIATE), never implicit.
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _set_wal(db)
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable at checkpoints
        migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def _set_wal(db: sqlite3.Connection) -> None:
    # Switching a new file to WAL takes a lock that the busy handler does not always wait
    # for; another process doing the same at that instant shows as "locked": retry.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
            continue
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"the run log cannot use WAL mode (got {mode!r})")
        return


@contextmanager
def write(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken before reading (``BEGIN IMMEDIATE``): all or nothing."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def applied_migrations(db: sqlite3.Connection) -> list[str]:
    """Names of the migrations applied to ``db``, in order."""
    rows = db.execute("SELECT name FROM migrations ORDER BY rowid").fetchall()
    return [str(r[0]) for r in rows]


def migrate(db: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[str]:
    """Apply the migrations ``db`` lacks, each once; returns the names applied now.

    The check and the steps run in one ``BEGIN IMMEDIATE`` transaction, so two processes
    opening a new log at once cannot both apply a step: the second waits, then finds it done.
    """
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = set(applied_migrations(db))
    if all(m.name in done for m in migrations):
        return []
    applied: list[str] = []
    with write(db):
        done = set(applied_migrations(db))
        for migration in migrations:
            if migration.name in done:
                continue
            migration.apply(db)
            db.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (migration.name, _now())
            )
            applied.append(migration.name)
    return applied
