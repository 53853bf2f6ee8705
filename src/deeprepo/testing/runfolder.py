"""Synthetic run folders for tests and benchmarks of the viewer: ``trajectory.jsonl``,
``calls.jsonl``, ``findings.json`` and ``metrics.json`` in the shapes deeprepo writes
(docs/outputs.md), with as many turns and sub-calls, and as much text, as asked for.

Every text the folder holds can carry ``payload`` (hostile HTML, control characters), so a
test can check that no place on the page interprets it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeprepo.base.chat import Role, Usage, UsageRowDict
from deeprepo.providers.ledger import UsageRow

__all__ = ["RunSpec", "write_run_folder"]


@dataclass(frozen=True)
class RunSpec:
    """What the synthetic run holds."""

    turns: int = 3
    subs_per_turn: int = 4
    prompt_chars: int = 2_000
    response_chars: int = 400
    payload: str = ""
    finished: bool = True  # False: killed during the last turn (no end record, no metrics)
    sub_cost: float = 0.00012
    root_cost: float = 0.004
    sub_latency_s: float = 0.8
    findings: int = 3


def _filler(n: int, seed: str) -> str:
    line = f"def handler_{seed}(request):\n    return db.execute('SELECT * FROM t WHERE id=' + request.args['id'])\n"
    return (line * (n // len(line) + 1))[:n]


def _usage_row(role: Role, model: str, calls: int, cost: float) -> UsageRowDict:
    usage = Usage(1000 * calls, 100 * calls)
    return UsageRow(role, model, calls, usage=usage, cost_usd=round(cost, 10)).to_dict()


def write_run_folder(run_dir: Path, spec: RunSpec | None = None) -> dict[str, Any]:
    """Write the folder; returns the figures a test checks the page against."""
    spec = spec or RunSpec()
    run_dir.mkdir(parents=True, exist_ok=True)
    p = spec.payload
    root_model, sub_model = f"anthropic/test-root{p}", f"openrouter/test/sub{p}"
    traj: list[dict[str, Any]] = [
        {"type": "start", "deeprepo_version": "0.1.0", "started_at": "2026-01-01T00:00:00+00:00",
         "path": f"repo{p}", "root_model": root_model, "sub_model": sub_model}
    ]  # fmt: skip
    calls: list[dict[str, Any]] = []
    clock, seq, root_cost, sub_cost = 0.0, 0, 0.0, 0.0
    recorded = spec.turns if spec.finished else spec.turns - 1
    for turn in range(1, spec.turns + 1):
        seq += 1
        calls.append({
            "seq": seq, "turn": turn, "t": round(clock, 3), "role": "root", "model": root_model,
            "system": None, "prompt": f"REPL output of turn {turn - 1}{p}",
            "response": f"Turn {turn}{p}\n```python\nprint({turn})\n```",
            **Usage(1000, 100).to_dict(), "cost_usd": spec.root_cost, "latency_s": 1.0,
            "cached": False, "error": None, "finish_reason": "end_turn", "truncated": False,
        })  # fmt: skip
        root_cost += spec.root_cost
        clock += 1.0
        for i in range(spec.subs_per_turn):
            seq += 1
            failed = i == 1
            calls.append({
                "seq": seq, "turn": turn, "t": round(clock + 0.01 * i, 3), "role": "sub",
                "model": sub_model, "system": f"You audit code.{p}",
                "prompt": f"SUBPROMPT-{turn}-{i}{p}\n" + _filler(spec.prompt_chars, f"{turn}_{i}"),
                "response": None if failed else f"SUBREPLY-{turn}-{i}{p}\n"
                + _filler(spec.response_chars, "r"),
                **(Usage() if failed else Usage(1000, 100)).to_dict(),
                "cost_usd": None if failed else spec.sub_cost, "latency_s": spec.sub_latency_s,
                "cached": i == 2, "error": f"HTTP 500{p}" if failed else None,
                "finish_reason": None if failed else "stop",
                "truncated": spec.prompt_chars > 32 * 1024,
            })  # fmt: skip
            if not failed:
                sub_cost += spec.sub_cost
        clock += spec.sub_latency_s + 0.01 * spec.subs_per_turn
        if turn > recorded:
            break
        traj.append({
            "type": "turn", "index": turn, "reply": f"REPLY-{turn}{p}\n```python\nprint({turn})\n```",
            "code_blocks": [f"print({turn})  # CODE-{turn}{p}"], "output": f"OUTPUT-{turn}{p}",
            "error": None, "sub_calls": spec.subs_per_turn, "findings_added": 1,
            "answer_ready": turn == spec.turns, **Usage(1000, 100).to_dict(),
            "cost_usd": spec.root_cost,
            "seconds": 1.0 + spec.sub_latency_s, "final_turn": False,
            "ledger": [_usage_row("root", root_model, turn, root_cost),
                       _usage_row("sub", sub_model, turn * spec.subs_per_turn, sub_cost)],
        })  # fmt: skip
    findings = [
        {"file": f"app/{p}f{i}.py", "start_line": 3 + i, "end_line": 3 + i, "kind": "sql-injection",
         "cwe": "CWE-89", "severity": "high", "title": f"FINDING-{i}{p}",
         "detail": f"detail {p}", "fix": f"fix {p}", "scope": "source"}
        for i in range(spec.findings)
    ]  # fmt: skip
    total = root_cost + sub_cost
    if spec.finished:
        ledger = [
            _usage_row("root", root_model, spec.turns, root_cost),
            _usage_row("sub", sub_model, spec.turns * spec.subs_per_turn, sub_cost),
        ]
        traj.append({
            "type": "end", "stop_reason": "answer_ready", "incomplete": True,
            "incomplete_reason": f"2 files not audited{p}", "files_audited": 8,
            "files_to_audit": 10, "turns": spec.turns, "total_cost_usd": total,
            "wall_seconds": clock, "ledger": ledger,
        })  # fmt: skip
        metrics = {
            "schema_version": 2, "mode": "rlm", "root_model": root_model, "sub_model": sub_model,
            "turns": spec.turns, "stop_reason": "answer_ready", "stop_detail": f"done{p}",
            "complete": False, "incomplete": True, "incomplete_reason": f"2 files not audited{p}",
            "sub_calls": spec.turns * (spec.subs_per_turn - 1), "sub_calls_refused": 0,
            "sub_calls_failed": spec.turns, "files_covered": 8, "coverable_files": 10,
            "wall_seconds": clock, "total_cost_usd": total, "usage": ledger,
            "notes": [f"a note{p}"], "codebase": {"root": f"repo{p}"},
        }  # fmt: skip
        (run_dir / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        (run_dir / "findings.json").write_text(json.dumps(findings), encoding="utf-8")
    with (run_dir / "trajectory.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in traj)
        if not spec.finished:
            fh.write('{"type": "turn", "index": ')  # the torn line a kill leaves
    with (run_dir / "calls.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(c) + "\n" for c in calls)
    return {
        "calls": len(calls),
        "sub_calls": spec.turns * spec.subs_per_turn,
        "recorded_turns": recorded,
        "root_cost": root_cost,
        "sub_cost": sub_cost,
        "total_cost": total,
    }
