"""Reading the run log: the newest runs, one run by id / prefix / folder, a run whole."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from deeprepo.base.chat import TOKEN_KEYS, Usage
from deeprepo.base.errors import UsageError
from deeprepo.runlog.db import connect, log_path

__all__ = [
    "find_run",
    "ledger_check",
    "list_runs",
    "open_log",
    "process_gone",
    "run_record",
    "totals_by_model",
]

_BOOLEAN = ("offline", "answer_ready", "final_turn", "cached", "truncated")


def open_log(env: Mapping[str, str] | None = None) -> sqlite3.Connection | None:
    """The log, migrated; None when no run was ever logged there."""
    path = log_path(env)
    if not path.is_file():
        return None
    return connect(path, create=False)


def _plain(row: sqlite3.Row) -> dict[str, Any]:
    d = {k: row[k] for k in row.keys()}  # noqa: SIM118 (sqlite3.Row is not a mapping)
    for k in _BOOLEAN:
        if k in d and d[k] is not None:
            d[k] = bool(d[k])
    return d


def process_gone(run: Mapping[str, Any]) -> bool:
    """A ``running`` row whose process, on this host, no longer exists (killed, crashed).

    Rows from another host cannot be checked and are taken at their word."""
    if run.get("status") != "running" or run.get("host") != socket.gethostname():
        return False
    pid = run.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def list_runs(db: sqlite3.Connection, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs, newest first (without their metrics blob)."""
    sql = "SELECT * FROM runs ORDER BY started_at DESC, rowid DESC"
    params: tuple[Any, ...] = ()
    if limit is not None:
        sql += " LIMIT ?"
        params = (limit,)
    runs = []
    for row in db.execute(sql, params):
        run = _plain(row)
        run.pop("metrics", None)
        runs.append(run)
    return runs


def find_run(db: sqlite3.Connection | None, ref: str) -> dict[str, Any]:
    """The run ``ref`` names: its id, a unique prefix of it, or its run folder (the newest
    run written there). Raises :class:`UsageError` (exit 2) when none or several match."""
    hint = "`deeprepo runs list` shows the ids"
    if db is None:
        raise UsageError(f"no run {ref!r}: no run has been logged yet ({hint})")
    ref = ref.strip()
    if ref:
        exact = db.execute("SELECT * FROM runs WHERE id = ?", (ref,)).fetchone()
        if exact is not None:
            return _plain(exact)
        escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = db.execute(
            "SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY started_at DESC",
            (escaped + "%",),
        ).fetchall()
        if len(rows) == 1:
            return _plain(rows[0])
        if len(rows) > 1:
            ids = ", ".join(str(r["id"]) for r in rows[:5])
            raise UsageError(
                f"{ref!r} is the start of {len(rows)} run ids ({ids}); give more of it"
            )
        folder = db.execute(
            "SELECT * FROM runs WHERE out_dir = ? ORDER BY started_at DESC, rowid DESC LIMIT 1",
            (str(Path(ref).expanduser().absolute()),),
        ).fetchone()
        if folder is not None:
            return _plain(folder)
    raise UsageError(
        f"no run {ref!r} in the run log: not an id, an id prefix or a run folder ({hint})"
    )


def run_record(db: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """One run whole: ``run`` (with ``metrics`` as an object), ``usage`` (its ledger),
    ``turns`` and ``calls`` (analyze, baseline) or ``rollouts`` (eval), as JSON-able data."""
    row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise UsageError(f"no run {run_id!r} in the run log")
    run = _plain(row)
    try:
        run["metrics"] = json.loads(run["metrics"]) if run.get("metrics") else None
    except ValueError:
        run["metrics"] = None
    turns = [
        _plain(r)
        for r in db.execute("SELECT * FROM turns WHERE run_id = ? ORDER BY idx", (run_id,))
    ]
    for t in turns:
        t["code_blocks"] = json.loads(t["code_blocks"] or "[]")
    calls = [
        _plain(r) for r in db.execute("SELECT * FROM calls WHERE run_id = ? ORDER BY n", (run_id,))
    ]
    usage = [
        _plain(r)
        for r in db.execute(
            "SELECT * FROM usage WHERE run_id = ? ORDER BY role DESC, model", (run_id,)
        )
    ]
    rollouts = [
        _plain(r)
        for r in db.execute(
            "SELECT * FROM rollouts WHERE run_id = ? ORDER BY example_id, rollout", (run_id,)
        )
    ]
    for r in rollouts:
        r["parts"] = json.loads(r["parts"] or "{}")
    for part in (turns, calls, usage, rollouts):
        for item in part:
            item.pop("run_id", None)
    return {"run": run, "usage": usage, "turns": turns, "calls": calls, "rollouts": rollouts}


class Totals(NamedTuple):
    """Tokens and cost of one (role, model); the cost is None once a price is unknown."""

    usage: Usage
    cost_usd: float | None


def totals_by_model(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Totals]:
    """Tokens and cost per (role, model) of usage rows or call records; a cost is None
    as soon as one row's price is unknown (as in the ledger). A count of the wrong type
    raises ``ValueError``."""
    totals: dict[tuple[str, str], Totals] = {}
    for row in rows:
        key = (str(row.get("role")), str(row.get("model")))
        usage, cost = Usage.from_dict(row), row.get("cost_usd")
        t = totals.get(key, Totals(Usage(), 0.0))
        if cost is None and row.get("error") and usage == Usage():
            totals[key] = t  # a request that failed without a reply: nobody billed it
            continue
        summed = None if cost is None or t.cost_usd is None else t.cost_usd + float(cost)
        totals[key] = Totals(t.usage + usage, summed)
    return totals


def ledger_check(usage: list[dict[str, Any]], calls: list[dict[str, Any]]) -> list[str]:
    """How the call records differ from the ledger, per (role, model); ``[]`` when they agree:
    as many records as the ledger's ``calls`` plus ``failed_requests``, the same tokens, and
    the same cost (to 1e-9 USD: the sums are taken in another order)."""
    try:
        ledger, summed = totals_by_model(usage), totals_by_model(calls)
    except ValueError as exc:
        return [f"a record cannot be read ({exc})"]
    problems: list[str] = []
    counted: dict[tuple[str, str], int] = {}
    for c in calls:
        key = (str(c.get("role")), str(c.get("model")))
        counted[key] = counted.get(key, 0) + 1
    expected = {
        (str(u.get("role")), str(u.get("model"))): int(u.get("calls") or 0)
        + int(u.get("failed_requests") or 0)
        for u in usage
    }
    nothing = Totals(Usage(), 0.0)
    for key in sorted(set(ledger) | set(summed)):
        name = f"{key[0]} {key[1]}"
        if counted.get(key, 0) != expected.get(key, 0):
            problems.append(
                f"{name}: {counted.get(key, 0)} call records, the ledger counts {expected.get(key, 0)}"
            )
        a, b = ledger.get(key, nothing), summed.get(key, nothing)
        for k, x, y in zip(TOKEN_KEYS, a.usage.counts(), b.usage.counts(), strict=True):
            if x != y:
                problems.append(f"{name}: {k} {y:,} in the calls, {x:,} in the ledger")
        ca, cb = a.cost_usd, b.cost_usd
        if (ca is None) != (cb is None) or (
            ca is not None and cb is not None and abs(ca - cb) > 1e-9
        ):
            problems.append(f"{name}: cost {cb} in the calls, {ca} in the ledger")
    return problems
