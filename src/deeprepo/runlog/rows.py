"""A run's records as rows of the run log's tables: the columns of each table and the
row built from each record (``metrics.json``, ``trajectory.jsonl`` turns, ``calls.jsonl``,
``results.jsonl`` rollouts), and the run's status by the exit-code rule."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deeprepo.base.chat import TOKEN_KEYS, Usage
from deeprepo.providers.ledger import UsageRow
from deeprepo.report.trajectory import read_trajectory

__all__ = [
    "CALL_COLUMNS",
    "ROLLOUT_COLUMNS",
    "TURN_COLUMNS",
    "USAGE_COLUMNS",
    "call_row",
    "eval_status",
    "insert_sql",
    "read_turns",
    "rollout_row",
    "run_status",
    "run_summary",
    "summed_tokens",
    "turn_row",
    "usage_row",
]

TURN_COLUMNS = (
    "idx",
    "reply",
    "code_blocks",
    "output",
    "error",
    "sub_calls",
    "findings_added",
    "answer_ready",
    "final_turn",
    *TOKEN_KEYS,
    "cost_usd",
    "seconds",
)
CALL_COLUMNS = (
    "n",
    "seq",
    "turn",
    "t",
    "role",
    "model",
    "system",
    "prompt",
    "response",
    *TOKEN_KEYS,
    "cost_usd",
    "latency_s",
    "cached",
    "error",
    "finish_reason",
    "truncated",
)
USAGE_COLUMNS = (
    "role",
    "model",
    "calls",
    "cached_calls",
    "failed_calls",
    "failed_requests",
    *TOKEN_KEYS,
    "cost_usd",
)
ROLLOUT_COLUMNS = (
    "example_id",
    "rollout",
    "reward",
    "parts",
    "num_turns",
    "stop_condition",
    "stop_reason",
    "sub_calls",
    "findings",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "seconds",
)


def run_status(metrics: Mapping[str, Any]) -> str:
    """``complete``, ``incomplete``, ``failed`` or ``interrupted``, by the rule of the exit
    code (``cli.exits.for_result``): a run whose every worker call failed analysed nothing."""
    stop = metrics.get("stop_reason")
    if stop == "interrupted":
        return "interrupted"
    answered, failed = int(metrics.get("sub_calls") or 0), int(metrics.get("sub_calls_failed") or 0)
    if stop == "error" or (answered == 0 and failed > 0):
        return "failed"
    return "complete" if metrics.get("complete") else "incomplete"


def read_turns(run_dir: Path) -> list[dict[str, Any]]:
    """The ``turn`` records of the run's trajectory (those after its last ``start``)."""
    path = run_dir / "trajectory.jsonl"
    records = read_trajectory(path) if path.is_file() else []
    starts = [i for i, r in enumerate(records) if r.get("type") == "start"]
    if starts:
        records = records[starts[-1] :]
    turns: dict[int, dict[str, Any]] = {}
    for r in records:
        if r.get("type") == "turn" and isinstance(r.get("index"), int):
            turns[r["index"]] = r  # a resumed run cannot repeat an index; if it did, last wins
    return [turns[i] for i in sorted(turns)]


def turn_row(run_id: str, t: Mapping[str, Any]) -> tuple[Any, ...]:
    values = dict(t, idx=t.get("index"), code_blocks=json.dumps(t.get("code_blocks") or []))
    for flag in ("answer_ready", "final_turn"):
        values[flag] = int(bool(values.get(flag)))
    return (run_id, *(values.get(c) for c in TURN_COLUMNS))


def call_row(run_id: str, n: int, c: Mapping[str, Any]) -> tuple[Any, ...]:
    values = dict(c, n=n)
    for flag in ("cached", "truncated"):
        values[flag] = int(bool(values.get(flag)))
    return (run_id, *(values.get(col) for col in CALL_COLUMNS))


def usage_row(run_id: str | None, row: UsageRow) -> tuple[object, ...]:
    d: Mapping[str, object] = row.to_dict()
    return (run_id, *(d[c] for c in USAGE_COLUMNS))


def summed_tokens(rows: Sequence[UsageRow]) -> Usage:
    """The tokens of every row added up: the run's totals."""
    return sum((row.usage for row in rows), Usage())


def eval_status(rollouts: int, failed: int) -> str:
    """An evaluation is complete when every rollout ran; failed when none did."""
    if rollouts and failed == rollouts:
        return "failed"
    return "incomplete" if failed or not rollouts else "complete"


def rollout_row(run_id: str | None, r: Mapping[str, Any]) -> tuple[Any, ...]:
    values = dict(
        r,
        parts=json.dumps(r.get("parts") or {}),
        cost_usd=r.get("total_cost_usd"),
        seconds=r.get("generation_seconds"),
    )
    return (run_id, *(values.get(c) for c in ROLLOUT_COLUMNS))


def insert_sql(table: str, columns: tuple[str, ...]) -> str:
    names = ", ".join(("run_id", *columns))
    marks = ", ".join("?" * (len(columns) + 1))
    return f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})"


def run_summary(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The ``runs`` columns that come from ``metrics.json``."""
    usage = [UsageRow.from_dict(u) for u in metrics.get("usage") or [] if isinstance(u, dict)]
    return {
        "status": run_status(metrics),
        "stop_reason": metrics.get("stop_reason"),
        "stop_detail": metrics.get("stop_detail"),
        "incomplete_reason": metrics.get("incomplete_reason"),
        "turns": metrics.get("turns"),
        "sub_calls": metrics.get("sub_calls"),
        "sub_calls_refused": metrics.get("sub_calls_refused"),
        "sub_calls_failed": metrics.get("sub_calls_failed"),
        "findings": metrics.get("findings"),
        "findings_headline": metrics.get("findings_headline"),
        "files_audited": metrics.get("files_covered"),
        "files_to_audit": metrics.get("coverable_files"),
        **summed_tokens(usage).to_dict(),
        "cost_usd": metrics.get("total_cost_usd"),
        "wall_seconds": metrics.get("wall_seconds"),
        "root_model": metrics.get("root_model"),
        "sub_model": metrics.get("sub_model"),
        "offline": None if metrics.get("offline") is None else int(bool(metrics["offline"])),
        "metrics": json.dumps(metrics, ensure_ascii=False),
    }
