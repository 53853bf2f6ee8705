"""``report.md``, ``findings.json`` and ``metrics.json`` from a RunResult.

The metrics schema is documented in ``docs/outputs.md``; bump
``METRICS_SCHEMA_VERSION`` when a field changes meaning.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from deeprepo import __version__
from deeprepo.architecture import architecture_markdown, architecture_of
from deeprepo.codebase.model import Codebase
from deeprepo.findings.model import SEVERITIES, sort_by_severity
from deeprepo.orchestrator.records import RunResult

METRICS_SCHEMA_VERSION = 1


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def sub_cost_share(result: RunResult) -> float | None:
    """Share of the known cost spent on sub-LLM calls (None when nothing was spent)."""
    total = sum(u["cost_usd"] or 0.0 for u in result.usage)
    sub = sum(u["cost_usd"] or 0.0 for u in result.usage if u["role"] == "sub")
    return sub / total if total > 0 else None


def metrics(
    result: RunResult, codebase: Codebase, *, offline: bool, mode: str = "rlm"
) -> dict[str, Any]:
    return {
        "schema_version": METRICS_SCHEMA_VERSION,
        "deeprepo_version": __version__,
        "mode": mode,
        "offline": offline,
        "root_model": result.root_model,
        "sub_model": result.sub_model,
        "sandbox": result.sandbox_mode,
        "turns": result.num_turns,
        "stop_reason": result.stop_reason,
        "stop_detail": result.stop_detail,
        "incomplete": result.incomplete,
        "sub_calls": result.sub_calls,
        "files_covered": len(result.files_covered),
        "coverable_files": result.coverable_files,
        "covered_paths": result.files_covered,
        "findings": len(result.findings),
        "wall_seconds": round(result.wall_seconds, 3),
        "total_cost_usd": result.total_cost_usd,
        "sub_cost_share": sub_cost_share(result),
        "usage": result.usage,
        "notes": result.notes,
        "codebase": {
            "root": codebase.metadata.root,
            "revision": codebase.metadata.revision,
            "files": codebase.metadata.files,
            "lines": codebase.metadata.lines,
            "chars": codebase.metadata.chars,
            "skipped": len(codebase.metadata.skipped),
            "skipped_files": [
                {"path": s.path, "reason": s.reason} for s in codebase.metadata.skipped
            ],
        },
        "architecture": architecture_of(codebase).to_dict(),
    }


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def render_report(
    result: RunResult, codebase: Codebase, *, offline: bool, mode: str = "rlm"
) -> str:
    out: list[str] = [f"# deeprepo report: {codebase.metadata.root}", ""]
    if offline:
        out += [
            "> Offline engine: a scripted root policy and built-in analyzers, no LLM was called. "
            "Set ANTHROPIC_API_KEY / OPENROUTER_API_KEY / OPENAI_API_KEY (or pass --root/--sub) for a model-driven run.",
            "",
        ]
    if result.incomplete:
        out += [
            f"> **Incomplete**: the run stopped ({result.stop_reason}: {result.stop_detail}) before the "
            "root model set its answer; what follows was salvaged.",
            "",
        ]
    findings = sort_by_severity(result.findings)
    out += ["## Findings", ""]
    if not findings:
        out.append("No findings were recorded.")
    for sev in SEVERITIES:
        group = [f for f in findings if f.severity == sev]
        if not group:
            continue
        out += [f"### {sev.capitalize()} ({len(group)})", ""]
        for f in group:
            loc = f"{f.file}:{f.start_line}" + (
                f"-{f.end_line}" if f.end_line != f.start_line else ""
            )
            cwe = f" ({f.cwe})" if f.cwe else ""
            out.append(f"- `{loc}` **{f.title}**{cwe} [{f.kind}]")
            if f.detail:
                out.append(f"  - {f.detail}")
            if f.fix:
                out.append(f"  - Fix: {f.fix}")
        out.append("")
    out += ["## Synthesis from the root model", "", result.answer.strip() or "(empty)", ""]
    out += _architecture_section(codebase)
    out += _summary_section(result, codebase, mode)
    return "\n".join(out).rstrip() + "\n"


def _architecture_section(codebase: Codebase) -> list[str]:
    """Components and their import edges (a list and a Mermaid diagram), cycles, fan-in,
    entry points no test reaches, external dependencies: computed from imports, not by a model."""
    return architecture_markdown(architecture_of(codebase))


def _summary_section(result: RunResult, codebase: Codebase, mode: str) -> list[str]:
    share = sub_cost_share(result)
    out = [
        "## Run summary",
        "",
        f"- Mode: {mode}; root model: `{result.root_model}`; sub model: `{result.sub_model}`; sandbox: {result.sandbox_mode}",
        f"- Turns: {result.num_turns}; stop reason: {result.stop_reason}"
        + (f" ({result.stop_detail})" if result.stop_detail else ""),
        f"- Sub-LLM calls: {result.sub_calls}; files whose content reached a sub-LLM: "
        f"{len(result.files_covered)} of {result.coverable_files}",
        f"- Codebase: {codebase.metadata.files} files, {codebase.metadata.lines:,} lines; "
        f"{len(codebase.metadata.skipped)} skipped",
        f"- Wall time: {result.wall_seconds:.1f}s; total cost: {_money(result.total_cost_usd)}"
        + (f"; sub-LLM share of cost: {share:.1%}" if share is not None else ""),
        "",
        *_notes(result, codebase),
        "| role | model | calls | input | output | cache read | cache write | cost |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for u in result.usage:
        out.append(
            f"| {u['role']} | {u['model']} | {u['calls']} | {u['input_tokens']:,} | {u['output_tokens']:,} | "
            f"{u['cache_read_tokens']:,} | {u['cache_write_tokens']:,} | {_money(u['cost_usd'])} |"
        )
    return [*out, ""]


def _notes(result: RunResult, codebase: Codebase, limit: int = 20) -> list[str]:
    """What the reader should know was not analysed, and why."""
    lines = [f"- {n}" for n in result.notes]
    lines += [f"- {n}" for n in codebase.metadata.notes]
    skipped = codebase.metadata.skipped
    for s in skipped[:limit]:
        lines.append(f"- skipped `{s.path}`: {s.reason}")
    if len(skipped) > limit:
        lines.append(f"- … and {len(skipped) - limit} more skipped (see metrics.json)")
    return ["Notes:", "", *lines, ""] if lines else []


def write_outputs(
    out_dir: Path, result: RunResult, codebase: Codebase, *, offline: bool, mode: str = "rlm"
) -> None:
    """Write report.md, findings.json and metrics.json into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    findings = [f.to_dict() for f in sort_by_severity(result.findings)]
    _write_atomic(
        out_dir / "findings.json", json.dumps(findings, indent=2, ensure_ascii=False) + "\n"
    )
    _write_atomic(
        out_dir / "metrics.json",
        json.dumps(
            metrics(result, codebase, offline=offline, mode=mode), indent=2, ensure_ascii=False
        )
        + "\n",
    )
    _write_atomic(
        out_dir / "report.md", render_report(result, codebase, offline=offline, mode=mode)
    )
