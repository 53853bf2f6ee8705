"""A run folder read back for the trajectory viewer: ``trajectory.jsonl``, ``calls.jsonl``,
``findings.json`` and ``metrics.json``, each optional but the trajectory.

The files come from a run that may have been killed at any point, or edited by hand, or built
by an attacker (a run folder is shared, so it is untrusted input): a torn last line is
skipped, a missing file or a field of the wrong type is said in :attr:`RunView.problems`
rather than failing the page. Memory is bounded by what the page shows, never by the files:
JSON-lines files are streamed and cut at :data:`CALLS_LIMITS` / :data:`TRAJECTORY_LIMITS`,
a JSON file larger than :data:`MAX_JSON_BYTES` or holding more than :data:`MAX_JSON_ITEMS`
values is left out; each cut is said on the page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deeprepo.base.chat import Usage
from deeprepo.base.errors import UsageError
from deeprepo.base.jsonl import JsonlLimits, read_bounded
from deeprepo.report.viewer.bounded import HIDDEN, CallShrinker, TurnShrinker

__all__ = [
    "CALLS_LIMITS",
    "MAX_JSON_BYTES",
    "MAX_JSON_ITEMS",
    "TRAJECTORY_LIMITS",
    "CallRecord",
    "RunView",
    "load_run_view",
]

#: calls.jsonl: records kept, the longest line read (a record deeprepo writes holds at most
#: three 32 KiB texts, under 1 MiB even JSON-escaped), and bytes of lines kept.
CALLS_LIMITS = JsonlLimits(max_records=20_000, max_line_bytes=1 << 20, max_bytes=256 << 20)
#: trajectory.jsonl: a turn holds the root's reply, its code and the REPL output.
TRAJECTORY_LIMITS = JsonlLimits(max_records=10_000, max_line_bytes=16 << 20, max_bytes=64 << 20)
#: findings.json and metrics.json: the largest file read, and the most values it may hold
#: (counted as commas and colons before parsing: ten megabytes of ``{},`` would be millions
#: of objects).
MAX_JSON_BYTES = 16 << 20
MAX_JSON_ITEMS = 1_000_000


def num(value: object, default: float = 0.0) -> float:
    """A finite number from a JSON value, else ``default`` (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value) if math.isfinite(value) else default


def opt_num(value: object) -> float | None:
    """A finite number, or None (an unknown price stays unknown, never 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def text(value: object) -> str:
    """A string field; anything else (null, a number) shown as its JSON text, or empty."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class CallRecord:
    """One line of ``calls.jsonl`` (see docs/outputs.md), with types checked."""

    seq: int
    turn: int
    t: float
    role: str
    model: str
    system: str
    prompt: str
    response: str | None
    usage: Usage
    cost_usd: float | None
    latency_s: float
    cached: bool
    error: str
    finish_reason: str
    truncated: bool
    #: Characters of each text (system, prompt, response, error) not loaded: the text holds
    #: its head and tail, or nothing past the text budget (``viewer.bounded``).
    hidden: tuple[int, int, int, int] = (0, 0, 0, 0)

    @property
    def end_s(self) -> float:
        """Seconds from the run's start to the call's end: when its cost was incurred."""
        return self.t + self.latency_s

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CallRecord:
        response = d.get("response")
        return cls(
            seq=int(num(d.get("seq"))),
            turn=int(num(d.get("turn"))),
            t=max(0.0, num(d.get("t"))),
            role=text(d.get("role")) or "?",
            model=text(d.get("model")),
            system=text(d.get("system")),
            prompt=text(d.get("prompt")),
            response=None if response is None else text(response),
            usage=_usage(d),
            cost_usd=opt_num(d.get("cost_usd")),
            latency_s=max(0.0, num(d.get("latency_s"))),
            cached=d.get("cached") is True,
            error=text(d.get("error")),
            finish_reason=text(d.get("finish_reason")),
            truncated=d.get("truncated") is True,
            hidden=_hidden_of(d),
        )


def _hidden_of(d: dict[str, Any]) -> tuple[int, int, int, int]:
    hidden = d.get(HIDDEN)
    if not isinstance(hidden, tuple) or len(hidden) != 4:
        return (0, 0, 0, 0)
    return (int(hidden[0]), int(hidden[1]), int(hidden[2]), int(hidden[3]))


def _usage(d: dict[str, Any]) -> Usage:
    # A hand-edited count that is no whole number shows as no tokens, never a failed page.
    try:
        return Usage.from_dict(d)
    except ValueError:
        return Usage()


@dataclass
class RunView:
    """Everything the viewer shows, as read from one run folder."""

    run_dir: Path
    start: dict[str, Any] | None = None
    #: ``turn`` and ``resume`` records in file order.
    events: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    #: None when the run folder has no calls.jsonl (a run made before it existed).
    calls: list[CallRecord] | None = None
    findings: list[dict[str, Any]] | None = None
    metrics: dict[str, Any] | None = None
    #: What could not be read, for the page to say.
    problems: list[str] = field(default_factory=list)

    @property
    def turns(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == "turn"]

    def calls_by_turn(self) -> dict[int, list[CallRecord]]:
        grouped: dict[int, list[CallRecord]] = {}
        for call in self.calls or []:
            grouped.setdefault(call.turn, []).append(call)
        return grouped


def _read_jsonl(
    path: Path,
    problems: list[str],
    limits: JsonlLimits,
    shrink: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    read = read_bounded(path, limits, shrink)
    if read.bad:
        problems.append(
            f"{path.name}: {read.bad} line(s) unreadable and left out (a torn last line is what a "
            "killed run leaves)"
        )
    problems.extend(read.left_out(path.name, limits.max_records))
    return read.records


def _read_json(path: Path, problems: list[str]) -> Any:
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        problems.append(
            f"{path.name}: {size:,} bytes, more than the {MAX_JSON_BYTES:,} the viewer reads; "
            "left out"
        )
        return None
    raw = path.read_text(encoding="utf-8", errors="replace")
    items = raw.count(",") + raw.count(":")
    if items > MAX_JSON_ITEMS:
        problems.append(
            f"{path.name}: about {items:,} values, more than the {MAX_JSON_ITEMS:,} the viewer "
            "reads; left out"
        )
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        problems.append(f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno}); left out")
        return None


def load_run_view(run_dir: Path) -> RunView:
    """Read a run folder. Raises :class:`UsageError` when it holds no trajectory.jsonl."""
    if not run_dir.is_dir():
        what = "does not exist" if not run_dir.exists() else "is a file"
        raise UsageError(f"{run_dir} {what}; pass the --out directory of a deeprepo run")
    trajectory = run_dir / "trajectory.jsonl"
    if not trajectory.is_file():
        raise UsageError(
            f"{run_dir} holds no trajectory.jsonl; pass the --out directory of a deeprepo run"
        )
    view = RunView(run_dir=run_dir)
    for record in _read_jsonl(trajectory, view.problems, TRAJECTORY_LIMITS, TurnShrinker()):
        kind = record.get("type")
        if kind == "start" and view.start is None:
            view.start = record
        elif kind in ("turn", "resume"):
            view.events.append(record)
        elif kind == "end":
            view.end = record  # a resumed run has one per session: the last one counts
    calls_path = run_dir / "calls.jsonl"
    if calls_path.is_file():
        view.calls = [
            CallRecord.from_dict(r)
            for r in _read_jsonl(calls_path, view.problems, CALLS_LIMITS, CallShrinker())
        ]
    findings_path = run_dir / "findings.json"
    if findings_path.is_file():
        found = _read_json(findings_path, view.problems)
        if isinstance(found, list):
            view.findings = [f for f in found if isinstance(f, dict)]
        elif found is not None:
            view.problems.append("findings.json: not a list of findings; left out")
    metrics_path = run_dir / "metrics.json"
    if metrics_path.is_file():
        found = _read_json(metrics_path, view.problems)
        if isinstance(found, dict):
            view.metrics = found
        elif found is not None:
            view.problems.append("metrics.json: not an object; left out")
    return view
