"""Writing runs into the log: a row when a run starts, everything else when it ends.

The row written at the start (status ``running``) is what survives a crash; at the end
the run's own records are read back from its folder (``metrics.json``, the ``turn``
records of ``trajectory.jsonl``, ``calls.jsonl``) and copied in one transaction, so the
log holds exactly what the run wrote and never a second account of it.

Logging is a by-product: :class:`RunRecorder` never raises. The first failure (a
read-only home, a full disk, a locked file past the timeout) becomes one
:class:`RunLogWarning` and turns the recorder off for the rest of the run.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import warnings
from collections.abc import Awaitable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from deeprepo.base.version import VERSION
from deeprepo.providers.ledger import UsageRow
from deeprepo.report.calls import read_calls
from deeprepo.runlog.db import connect, log_path, write
from deeprepo.runlog.rows import (
    CALL_COLUMNS,
    ROLLOUT_COLUMNS,
    TURN_COLUMNS,
    USAGE_COLUMNS,
    call_row,
    eval_status,
    insert_sql,
    read_turns,
    rollout_row,
    run_summary,
    summed_tokens,
    turn_row,
    usage_row,
)

T = TypeVar("T")

__all__ = ["NO_LOG_ENV", "RunLogWarning", "RunRecorder", "logging_disabled"]

NO_LOG_ENV = "DEEPREPO_NO_LOG"


class RunLogWarning(UserWarning):
    """The run log could not be written; the run itself is unaffected."""


def logging_disabled(env: Mapping[str, str]) -> bool:
    """``DEEPREPO_NO_LOG`` set to anything but empty, ``0``, ``false`` or ``no``."""
    return env.get(NO_LOG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class RunRecorder:
    """Logs one run: :meth:`start` when it begins, :meth:`finish` (or :meth:`abort`) at the end.

    ``enabled=False`` (``--no-log``) or ``DEEPREPO_NO_LOG=1`` in ``env`` makes every method
    a no-op. No method raises: a failure is one warning and the recorder stops.
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, enabled: bool = True) -> None:
        env = os.environ if env is None else env
        self.enabled = enabled and not logging_disabled(env)
        self._env = dict(env)
        self.run_id: str | None = None
        self._row: dict[str, Any] = {}

    @property
    def path(self) -> Path:
        return log_path(self._env)

    def _failed(self, exc: BaseException) -> None:
        self.enabled = False
        if isinstance(exc, OSError) and exc.strerror:
            what = f"{exc.strerror}: {exc.filename or self.path}"
        else:  # sqlite3 errors name no file: the log's own path is the one to look at
            what = f"{' '.join(str(exc).split()) or type(exc).__name__}: {self.path}"
        warnings.warn(
            f"run log not written ({what}); the run itself is unaffected. "
            f"Point DEEPREPO_HOME at a writable folder, or pass --no-log",
            RunLogWarning,
            stacklevel=3,
        )

    def start(
        self,
        *,
        mode: str,
        out_dir: Path,
        repo: str | None,
        rev: str | None = None,
        root_model: str | None = None,
        sub_model: str | None = None,
        offline: bool | None = None,
        resumed: bool = False,
    ) -> str | None:
        """Write the run's row with status ``running``; returns its id (None when off).

        A resumed run (``resumed``) takes over the newest row of the same folder, if any."""
        if not self.enabled:
            return None
        out = str(Path(out_dir).absolute())
        row = {
            "mode": mode,
            "status": "running",
            "started_at": _now(),
            "repo": repo,
            "rev": rev,
            "out_dir": out,
            "root_model": root_model,
            "sub_model": sub_model,
            "offline": None if offline is None else int(offline),
            "deeprepo_version": VERSION,
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        try:
            db = connect(self.path)
            try:
                with write(db):
                    self.run_id = self._claim(db, row, resumed)
            finally:
                db.close()
        except Exception as exc:
            self._failed(exc)
            return None
        self._row = row
        return self.run_id

    def _claim(self, db: sqlite3.Connection, row: dict[str, Any], resumed: bool) -> str:
        if resumed:
            old = db.execute(
                "SELECT id, started_at FROM runs WHERE out_dir = ? AND mode = ? "
                "ORDER BY started_at DESC LIMIT 1",
                (row["out_dir"], row["mode"]),
            ).fetchone()
            if old is not None:
                row["started_at"] = old["started_at"]  # one run, continued
                db.execute(
                    "UPDATE runs SET status = 'running', ended_at = NULL, host = ?, pid = ?, "
                    "deeprepo_version = ? WHERE id = ?",
                    (row["host"], row["pid"], row["deeprepo_version"], old["id"]),
                )
                return str(old["id"])
        while True:
            run_id = secrets.token_hex(6)
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                break
        columns = ("id", *row)
        db.execute(
            f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            (run_id, *row.values()),
        )
        return run_id

    def finish(self, out_dir: Path) -> str | None:
        """Copy the finished run's records from ``out_dir`` into the log, in one transaction;
        returns the run's id, or None when the run is not (fully) in the log."""
        if not self.enabled or self.run_id is None:
            return None
        run_dir = Path(out_dir)
        try:
            metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
            if not isinstance(metrics, dict):
                raise ValueError(f"{run_dir / 'metrics.json'} is not a JSON object")
            turns = read_turns(run_dir)
            calls = read_calls(run_dir / "calls.jsonl")
            summary = {**run_summary(metrics), "ended_at": _now()}
            db = connect(self.path)
            try:
                with write(db):
                    self._store(db, summary, turns, calls, metrics)
            finally:
                db.close()
        except Exception as exc:  # whatever it is, the run must not fail on its log
            self._failed(exc)
            return None
        return self.run_id

    def _store(
        self,
        db: sqlite3.Connection,
        summary: dict[str, Any],
        turns: list[dict[str, Any]],
        calls: list[dict[str, Any]],
        metrics: Mapping[str, Any],
    ) -> None:
        run_id = self.run_id
        assert run_id is not None
        sets = ", ".join(f"{k} = ?" for k in summary)
        cur = db.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*summary.values(), run_id))
        if cur.rowcount == 0:  # the row was deleted meanwhile: write it whole
            full = {**self._row, **summary, "id": run_id}
            db.execute(
                f"INSERT INTO runs ({', '.join(full)}) VALUES ({', '.join('?' * len(full))})",
                tuple(full.values()),
            )
        for table in ("turns", "calls", "usage"):  # a resumed run is copied whole again
            db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        db.executemany(insert_sql("turns", TURN_COLUMNS), (turn_row(run_id, t) for t in turns))
        db.executemany(
            insert_sql("calls", CALL_COLUMNS),
            (call_row(run_id, n, c) for n, c in enumerate(calls, 1)),
        )
        usage = [UsageRow.from_dict(u) for u in metrics.get("usage") or [] if isinstance(u, dict)]
        db.executemany(insert_sql("usage", USAGE_COLUMNS), (usage_row(run_id, u) for u in usage))

    def finish_eval(
        self,
        results: Sequence[Mapping[str, Any]],
        *,
        failed: int,
        summary: str,
        wall_seconds: float,
    ) -> None:
        """Copy a finished ``deeprepo eval``: one row per rollout (``results.jsonl``'s rows),
        the summed ledger of every rollout, and the run's totals; ``failed`` rollouts stopped
        on an error, ``summary`` is the printout."""
        if not self.enabled or self.run_id is None:
            return
        try:
            rows = [dict(r) for r in results]
            db = connect(self.path)
            try:
                with write(db):
                    self._store_eval(db, rows, failed, summary, wall_seconds)
            finally:
                db.close()
        except Exception as exc:
            self._failed(exc)

    def _store_eval(
        self,
        db: sqlite3.Connection,
        results: list[dict[str, Any]],
        failed: int,
        summary: str,
        wall_seconds: float,
    ) -> None:
        run_id = self.run_id
        usage: dict[tuple[str, str], UsageRow] = {}
        for r in results:
            for u in r.get("usage") or []:
                row = UsageRow.from_dict(u)
                key = (row.role, row.model)
                usage[key] = usage[key] + row if key in usage else row
        costs = [r.get("total_cost_usd") for r in results]
        known = [float(c) for c in costs if c is not None]
        values = {
            "status": eval_status(len(results), failed),
            "ended_at": _now(),
            "stop_reason": "error" if failed else "done",
            "stop_detail": f"{failed} of {len(results)} rollouts failed" if failed else "",
            "turns": sum(int(r.get("num_turns") or 0) for r in results),
            "sub_calls": sum(int(r.get("sub_calls") or 0) for r in results),
            "findings": sum(int(r.get("findings") or 0) for r in results),
            **summed_tokens(list(usage.values())).to_dict(),
            "cost_usd": sum(known) if len(known) == len(costs) else None,
            "wall_seconds": round(wall_seconds, 3),
            "metrics": json.dumps({"rollouts": len(results), "failed": failed, "summary": summary}),
        }
        sets = ", ".join(f"{k} = ?" for k in values)
        db.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*values.values(), run_id))
        for table in ("rollouts", "usage"):
            db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        db.executemany(
            insert_sql("rollouts", ROLLOUT_COLUMNS), (rollout_row(run_id, r) for r in results)
        )
        db.executemany(
            insert_sql("usage", USAGE_COLUMNS), (usage_row(run_id, u) for u in usage.values())
        )

    async def watch(self, work: Awaitable[T]) -> T:
        """Await ``work`` (the run); if it raises, the run's row says ``interrupted`` or
        ``failed`` (:meth:`abort`) and the exception goes on."""
        try:
            return await work
        except BaseException as exc:
            self.abort(exc)
            raise

    def abort(self, exc: BaseException) -> None:
        """The run raised before its outputs were written: ``interrupted`` or ``failed``."""
        if not self.enabled or self.run_id is None:
            return
        interrupted = isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "CancelledError"
        detail = " ".join(str(exc).split())[:2000] or type(exc).__name__
        try:
            db = connect(self.path)
            try:
                with write(db):
                    db.execute(
                        "UPDATE runs SET status = ?, stop_reason = ?, stop_detail = ?, "
                        "ended_at = ? WHERE id = ?",
                        (
                            "interrupted" if interrupted else "failed",
                            "interrupted" if interrupted else "error",
                            detail,
                            _now(),
                            self.run_id,
                        ),
                    )
            finally:
                db.close()
        except Exception as err:
            self._failed(err)
