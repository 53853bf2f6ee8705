"""Trajectories → chat-format SFT examples (``deeprepo export sft``).

One example per run: the conversation the root model had, message for message, as the
Episode built it (``orchestrator/episode.py``)::

    system     the root system prompt of the run
    user       the first message (the task and the repository overview)
    assistant  the root's reply of turn 1
    user       what the REPL showed after turn 1 (output, notes, the turn countdown)
    assistant  turn 2 …
    …
    assistant  the last turn's reply (its output was never sent to the root, so it is left out)

On the final turn given at ``max_turns`` the Episode appends ``prompts.FINAL_TURN_NOTE`` to
the last user message; the export does the same. The system prompt and first message come
from the run's records (``trajectory.jsonl`` ``start``, ``results.jsonl``'s
``system_prompt`` / ``first_user_message``); a trajectory written before they were
recorded is rebuilt with the same prompt code from the repository, when it is unchanged
(its ``codebase_sha256`` matches).

Sources: a run folder of ``deeprepo analyze`` (``trajectory.jsonl``), an eval folder of
``deeprepo eval`` (``results.jsonl``: one example per rollout), either file itself, or a
folder holding such folders one level down. Imports nothing heavy (no torch).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deeprepo.base import prompts
from deeprepo.base.errors import DeeprepoError, UsageError
from deeprepo.base.jsonl import iter_numbered_lines
from deeprepo.base.safefile import write_atomic
from deeprepo.report.trajectory import RUN_FILE_LIMITS, read_trajectory

__all__ = [
    "ExportOptions",
    "ExportSummary",
    "RunRecord",
    "conversation",
    "export_sft",
    "find_sources",
    "read_runs",
]

TRAJECTORY = "trajectory.jsonl"
RESULTS = "results.jsonl"


@dataclass(frozen=True)
class ExportOptions:
    """Which runs become examples. ``include_incomplete`` admits runs that ended without
    an answer or with files unaudited (budgets, limits, timeouts); runs that stopped on an
    error or never ended are skipped always."""

    include_incomplete: bool = False
    min_findings: int = 0
    min_reward: float | None = None  # eval rollouts only; analyze runs have no reward
    max_examples: int | None = None


@dataclass(frozen=True)
class RunRecord:
    """One run (an analyze run or one eval rollout) read back from disk."""

    source: str  # file it came from, with ``#example/rollout`` for rollouts
    kind: str  # "analyze" or "eval"
    system_prompt: str | None
    first_message: str | None
    turns: list[dict[str, Any]]
    ended: bool  # an end record exists (a killed run has none)
    complete: bool
    stop_reason: str
    findings: int
    reward: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # why the run cannot be exported at all


@dataclass
class ExportSummary:
    """What an export did: examples written, runs read, runs skipped by reason."""

    out: Path
    written: int = 0
    runs: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        """One line for the console."""
        text = f"exported {self.written:,} example(s) from {self.runs:,} run(s) to {self.out}"
        if self.skipped:
            parts = ", ".join(f"{n:,} {why}" for why, n in sorted(self.skipped.items()))
            text += f"; skipped {sum(self.skipped.values()):,}: {parts}"
        return text


def find_sources(paths: Sequence[Path]) -> list[Path]:
    """The ``trajectory.jsonl`` / ``results.jsonl`` files that ``paths`` name.

    A path is such a file, a folder holding one, or a folder whose sub-folders hold them
    (one level down, in name order). Raises :class:`UsageError` for a path that names none.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        if not path.is_dir():
            raise UsageError(
                f"{path} does not exist; pass run folders of `deeprepo analyze` or `eval`"
            )
        own = [path / n for n in (TRAJECTORY, RESULTS) if (path / n).is_file()]
        if own:
            found.extend(own)
            continue
        below = [
            sub / n
            for sub in sorted(p for p in path.iterdir() if p.is_dir())
            for n in (TRAJECTORY, RESULTS)
            if (sub / n).is_file()
        ]
        if not below:
            raise UsageError(
                f"{path} holds no {TRAJECTORY} or {RESULTS} (nor do its sub-folders); pass run "
                "folders of `deeprepo analyze` or `deeprepo eval`"
            )
        found.extend(below)
    return found


def read_runs(source: Path) -> Iterator[RunRecord]:
    """The runs in one file: one for a trajectory, one per rollout for results."""
    # Streamed: a results file from elsewhere costs one line of memory at a time.
    lines = iter_numbered_lines(source, max_line_bytes=RUN_FILE_LIMITS.max_line_bytes)
    first: Any = None
    for _, ln in iter_numbered_lines(source, max_line_bytes=RUN_FILE_LIMITS.max_line_bytes):
        try:
            first = json.loads(ln)
        except json.JSONDecodeError:
            continue
        break
    if isinstance(first, dict) and "type" in first:
        yield _analyze_run(source)
    elif isinstance(first, dict) and "example_id" in first:
        yield from _eval_runs(source, lines)
    else:
        raise UsageError(
            f"{source} is neither a trajectory.jsonl nor a results.jsonl written by deeprepo"
        )


def _analyze_run(path: Path) -> RunRecord:
    records = read_trajectory(path)
    starts = [i for i, r in enumerate(records) if r.get("type") == "start"]
    source = str(path)
    if not starts:
        return RunRecord(
            source, "analyze", None, None, [], False, False, "", 0, problem="no start record"
        )
    records = records[starts[-1] :]  # older versions appended reruns to one file
    start = records[0]
    turns = [r for r in records if r.get("type") == "turn"]
    end: dict[str, Any] | None = None
    for record in records:
        # A resume record reopens the run: only an end record after it counts.
        if record.get("type") == "end":
            end = record
        elif record.get("type") == "resume":
            end = None
    system = start.get("system_prompt")
    first = start.get("first_user_message")
    problem = None
    if start.get("mode") == "baseline":
        system, first, problem = None, None, "a baseline run (one call, no root conversation)"
    elif not (isinstance(system, str) and isinstance(first, str)):
        system, first, problem = _rebuild_opening(start)
    findings = (
        int(end.get("findings") or 0)
        if end is not None and "findings" in end
        else _metrics_findings(path.parent, turns)
    )
    meta = {
        "source": source,
        "kind": "analyze",
        "deeprepo_version": start.get("deeprepo_version"),
        "root_model": start.get("root_model"),
        "sub_model": start.get("sub_model"),
        "prompt": start.get("prompt"),
        "repository": start.get("path"),
        "codebase_sha256": start.get("codebase_sha256"),
        "stop_reason": end.get("stop_reason") if end else None,
        "files_audited": end.get("files_audited") if end else None,
        "files_to_audit": end.get("files_to_audit") if end else None,
    }
    return RunRecord(
        source=source,
        kind="analyze",
        system_prompt=system,
        first_message=first,
        turns=turns,
        ended=end is not None,
        complete=end is not None and not end.get("incomplete", True),
        stop_reason=str(end.get("stop_reason") or "") if end else "",
        findings=findings,
        meta=meta,
        problem=problem,
    )


def _metrics_findings(run_dir: Path, turns: list[dict[str, Any]]) -> int:
    """Findings of a run whose end record predates the count: metrics.json, else the
    turns' sum (before de-duplication, so an upper bound)."""
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text("utf-8"))
        return int(metrics["findings"])
    except (OSError, ValueError, KeyError, TypeError):
        return sum(int(t.get("findings_added") or 0) for t in turns)


def _rebuild_opening(start: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """The system prompt and first message of a trajectory that did not record them,
    rebuilt by the Episode's own code from the repository, if it is unchanged."""
    from deeprepo.codebase.loader import load_codebase
    from deeprepo.orchestrator.audit import parse_scopes
    from deeprepo.orchestrator.episode import metadata_summary
    from deeprepo.run.analyze import codebase_fingerprint

    options = start.get("options")
    if not isinstance(options, dict) or not options.get("path"):
        return None, None, "no prompts recorded (written by an older deeprepo)"
    prompt = str(options.get("prompt") or start.get("prompt") or "default")
    if prompt not in prompts.ROOT_SYSTEM_PROMPTS:
        return None, None, f"unknown prompt {prompt!r}"
    try:
        kwargs: dict[str, Any] = {"rev": options.get("rev")}
        if options.get("max_file_bytes") is not None:
            kwargs["max_file_bytes"] = int(options["max_file_bytes"])
        codebase = load_codebase(str(options["path"]), **kwargs)
    except (DeeprepoError, OSError, ValueError):
        return None, None, "no prompts recorded and the repository cannot be loaded"
    if codebase_fingerprint(codebase) != start.get("codebase_sha256"):
        return None, None, "no prompts recorded and the repository changed since"
    scopes = parse_scopes(options.get("include_scopes") or (), options.get("exclude_scopes") or ())
    first = prompts.first_user_message(metadata_summary(codebase, scopes))
    return prompts.ROOT_SYSTEM_PROMPTS[prompt], first, None


def _eval_runs(path: Path, lines: Iterable[tuple[int, str]]) -> Iterator[RunRecord]:
    for n, line in lines:
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            raise UsageError(f"{path} line {n} is not JSON; is it a results.jsonl?") from None
        if not isinstance(d, dict):
            raise UsageError(f"{path} line {n} is not a JSON object; is it a results.jsonl?")
        example, rollout = str(d.get("example_id", "")), int(d.get("rollout") or 0)
        source = f"{path}#{example}/{rollout}"
        stop_reason = str(d.get("stop_reason") or d.get("stop_condition") or "")
        system, first = d.get("system_prompt"), d.get("first_user_message")
        problem = None
        if not (isinstance(system, str) and isinstance(first, str)):
            system = first = None
            problem = "no prompts recorded (written by an older deeprepo)"
        turns = [t for t in d.get("trajectory") or [] if isinstance(t, dict)]
        if "complete" in d:
            complete = bool(d["complete"])
        else:  # older results: answer set and every file audited
            complete = not d.get("incomplete", True) and d.get("files_covered") == d.get(
                "coverable_files"
            )
        yield RunRecord(
            source=source,
            kind="eval",
            system_prompt=system,
            first_message=first,
            turns=turns,
            ended=True,  # a rollout is written to results.jsonl once it has ended
            complete=complete and stop_reason != "error",
            stop_reason=stop_reason,
            findings=int(d.get("findings") or 0),
            reward=float(d.get("reward") or 0.0),
            meta={
                "source": source,
                "kind": "eval",
                "example_id": example,
                "rollout": rollout,
                "root_model": d.get("model"),
                "sub_model": d.get("sub_model"),
                "stop_reason": stop_reason,
                "reward": d.get("reward"),
                "files_audited": d.get("files_covered"),
                "files_to_audit": d.get("coverable_files"),
            },
            problem=problem,
        )


def conversation(system: str, first: str, turns: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The messages of one run, as the root received and wrote them (see the module doc).

    Raises ``ValueError`` when the turns are not 1, 2, 3, … in order.
    """
    messages = [{"role": "system", "content": system}, {"role": "user", "content": first}]
    for n, turn in enumerate(turns, 1):
        if turn.get("index") != n:
            raise ValueError(f"turn {turn.get('index')} where turn {n} was expected")
        if turn.get("final_turn"):
            # Episode.run: the last user message gets the final-turn note before the request.
            messages[-1] = {
                "role": "user",
                "content": messages[-1]["content"] + "\n\n" + prompts.FINAL_TURN_NOTE,
            }
        messages.append({"role": "assistant", "content": str(turn.get("reply") or "")})
        if n < len(turns):
            messages.append({"role": "user", "content": str(turn.get("output") or "")})
    return messages


def _skip_reason(run: RunRecord, options: ExportOptions) -> str | None:
    if run.problem is not None:
        return run.problem
    if not run.ended:
        return "unfinished (no end record: killed or still running)"
    if run.stop_reason == "error":
        return "failed (stopped on an error)"
    if not run.turns:
        return "no turns"
    if not run.complete and not options.include_incomplete:
        return "incomplete"
    if run.findings < options.min_findings:
        return f"under --min-findings {options.min_findings}"
    if options.min_reward is not None and (run.reward is None or run.reward < options.min_reward):
        return (
            f"under --min-reward {options.min_reward:g}"
            if run.reward is not None
            else "no reward (not an eval rollout)"
        )
    return None


def examples(
    runs: Iterable[RunRecord], options: ExportOptions, summary: ExportSummary
) -> Iterator[dict[str, Any]]:
    """The SFT examples of ``runs`` that pass the filters; counts go to ``summary``."""
    for run in runs:
        summary.runs += 1
        why = _skip_reason(run, options)
        if (
            why is None
            and options.max_examples is not None
            and summary.written >= options.max_examples
        ):
            why = f"over --max-examples {options.max_examples}"
        if why is not None:
            summary.skipped[why] += 1
            continue
        assert run.system_prompt is not None and run.first_message is not None
        try:
            messages = conversation(run.system_prompt, run.first_message, run.turns)
        except ValueError:
            summary.skipped["turn records out of order"] += 1
            continue
        summary.written += 1
        meta = {
            **run.meta,
            "turns": len(run.turns),
            "findings": run.findings,
            "complete": run.complete,
        }
        yield {"messages": messages, "meta": meta}


def export_sft(
    paths: Sequence[Path], out: Path, options: ExportOptions | None = None
) -> ExportSummary:
    """Write the SFT examples of the runs in ``paths`` to ``out`` (JSON lines), atomically."""
    options = options or ExportOptions()
    if options.min_findings < 0:
        raise UsageError("--min-findings must be 0 or more")
    if options.min_reward is not None and not math.isfinite(options.min_reward):
        raise UsageError("--min-reward must be a number, not nan or infinity")
    if options.max_examples is not None and options.max_examples < 1:
        raise UsageError("--max-examples must be at least 1")
    sources = find_sources(paths)
    summary = ExportSummary(out=out)
    if not out.parent.is_dir():
        raise UsageError(f"the folder of {out} does not exist; create it first")
    runs = (run for source in sources for run in read_runs(source))
    lines = (json.dumps(e, ensure_ascii=False) + "\n" for e in examples(runs, options, summary))
    write_atomic(out, lines)
    return summary
