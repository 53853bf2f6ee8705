"""``report.md``, ``findings.json``, ``findings.sarif`` and ``metrics.json`` from a RunResult.

The metrics schema is documented in ``docs/outputs.md``; bump
``METRICS_SCHEMA_VERSION`` when a field changes meaning.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeprepo.architecture import architecture_markdown, architecture_of
from deeprepo.base.finding import SEVERITIES, Finding, in_repository, sort_by_severity
from deeprepo.base.records import RunResult
from deeprepo.base.safefile import write_atomic
from deeprepo.base.version import VERSION
from deeprepo.codebase.model import Codebase
from deeprepo.codebase.scope import HEADLINE_SCOPES, SCOPES
from deeprepo.orchestrator.behaviour import behaviour_of, turn_calls
from deeprepo.report.sarif import outside_note, sarif_log
from deeprepo.report.setaside import findings_json, set_aside_markdown, set_aside_metrics
from deeprepo.report.text import md_block, md_code, md_text
from deeprepo.report.viewer import write_viewer_quietly

METRICS_SCHEMA_VERSION = 3
#: How many unaudited or skipped paths report.md names before pointing at metrics.json.
LIST_LIMIT = 20


def sub_cost_share(result: RunResult) -> float | None:
    """Share of the known cost spent on sub-LLM calls (None when nothing was spent)."""
    total = sum(u["cost_usd"] or 0.0 for u in result.usage)
    sub = sum(u["cost_usd"] or 0.0 for u in result.usage if u["role"] == "sub")
    return sub / total if total > 0 else None


def coverage_line(result: RunResult) -> str:
    """The one coverage figure, as the console, report.md and notes say it."""
    line = f"audited {len(result.files_covered)} of {result.coverable_files} files"
    return line + (f": {result.incomplete_reason}" if not result.complete else "")


def split_by_scope(findings: list[Finding]) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """(headline findings, the rest by scope in SCOPES order), each most severe first."""
    ordered = sort_by_severity(findings)
    headline = [f for f in ordered if f.scope in HEADLINE_SCOPES]
    rest: dict[str, list[Finding]] = {}
    for scope in (*SCOPES, *sorted({f.scope for f in ordered} - set(SCOPES))):
        if scope in HEADLINE_SCOPES:
            continue
        group = [f for f in ordered if f.scope == scope]
        if group:
            rest[scope] = group
    return headline, rest


def _counts(findings: list[Finding]) -> dict[str, int]:
    return {s: n for s in SEVERITIES if (n := sum(f.severity == s for f in findings))}


def metrics(
    result: RunResult, codebase: Codebase, *, offline: bool, mode: str = "rlm"
) -> dict[str, Any]:
    headline, _ = split_by_scope(result.findings)
    by_scope: dict[str, int] = {}
    for f in result.findings:
        by_scope[f.scope] = by_scope.get(f.scope, 0) + 1
    return {
        "schema_version": METRICS_SCHEMA_VERSION,
        "deeprepo_version": VERSION,
        "mode": mode,
        "offline": offline,
        "root_model": result.root_model,
        "sub_model": result.sub_model,
        "sandbox": result.sandbox_mode,
        "turns": result.num_turns,
        "stop_reason": result.stop_reason,
        "stop_detail": result.stop_detail,
        "complete": result.complete,
        "incomplete": not result.complete,
        "incomplete_reason": result.incomplete_reason,
        "salvaged": result.incomplete,
        "sub_calls": result.sub_calls,
        "sub_calls_refused": result.sub_calls_refused,
        "sub_calls_failed": result.sub_calls_failed,
        "audit_scopes": result.audit_scopes,
        "files_covered": len(result.files_covered),
        "coverable_files": result.coverable_files,
        "covered_paths": result.files_covered,
        "files_unaudited": len(result.unaudited),
        "unaudited_paths": result.unaudited,
        "files_not_analysed": len({g.path for g in result.not_analysed}),
        "not_analysed": [g.to_dict() for g in result.not_analysed],
        "findings_cut": result.findings_cut,
        "python_parser": result.python_parser or None,
        "findings": len(result.findings),
        "findings_headline": len(headline),
        "findings_by_severity": _counts(headline),
        "findings_by_scope": {
            s: by_scope[s] for s in (*SCOPES, *sorted(set(by_scope) - set(SCOPES))) if s in by_scope
        },
        **set_aside_metrics(result),
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
            "scopes": dict(codebase.metadata.scopes),
            "skipped": len(codebase.metadata.skipped),
            "skipped_files": [
                {"path": s.path, "reason": s.reason} for s in codebase.metadata.skipped
            ],
        },
        "architecture": architecture_of(codebase).to_dict(),
        "behaviour": behaviour_dict(result, codebase),
    }


def behaviour_dict(result: RunResult, codebase: Codebase) -> dict[str, Any]:
    """The run's ``behaviour`` object (``orchestrator.behaviour``); computed from the turns
    and prompts when the result does not carry it."""
    b = result.behaviour
    if b is None:
        b = behaviour_of(
            [turn_calls(t) for t in result.turns],
            files=codebase.files,
            sent_prompts=result.sent_prompts,
        )
    return b.to_dict()


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


@dataclass(frozen=True)
class ReportContext:
    """What every section of report.md is built from."""

    result: RunResult
    codebase: Codebase
    offline: bool
    mode: str


#: A report section: the context in, markdown lines out (empty: the section is left out).
Section = Callable[[ReportContext], list[str]]


def render_report(
    result: RunResult, codebase: Codebase, *, offline: bool, mode: str = "rlm"
) -> str:
    ctx = ReportContext(result, codebase, offline, mode)
    out: list[str] = []
    for section in REPORT_SECTIONS:
        out += section(ctx)
    return "\n".join(out).rstrip() + "\n"


def _header(ctx: ReportContext) -> list[str]:
    result = ctx.result
    out = [f"# deeprepo report: {md_text(ctx.codebase.metadata.root)}", ""]
    if not result.complete:
        out += [f"> **Incomplete**: {md_text(coverage_line(result))}.", ">"]
        if result.incomplete:
            out.append(
                f"> The root never set its answer (stop: {md_text(result.stop_reason)}); "
                "the synthesis below was salvaged from the findings it had recorded."
            )
        if result.unaudited:
            shown = ", ".join(md_code(p) for p in result.unaudited[:LIST_LIMIT])
            more = len(result.unaudited) - LIST_LIMIT
            out.append(
                f"> Not audited ({len(result.unaudited)}): {shown}"
                + (f", … and {more} more (`unaudited_paths` in metrics.json)" if more > 0 else "")
            )
        out += _gaps_lines(result)
        out.append("")
    if ctx.offline:
        out += [
            "> Offline engine: a scripted root policy and built-in analyzers, no LLM was called. "
            "Pass --root/--sub (a key in the environment alone never chooses one) for a "
            "model-driven run.",
            "",
        ]
    return out


def _gaps_lines(result: RunResult) -> list[str]:
    """The files an analyzer could not read, each with the analyzer and why, and the
    findings a cap cut: at the top of report.md, since either makes the run incomplete."""
    out: list[str] = []
    if result.not_analysed:
        paths = sorted({g.path for g in result.not_analysed})
        parser = (
            f" (Python parsed by {md_text(result.python_parser)})" if result.python_parser else ""
        )
        out.append(f"> Not analysed ({len(paths)}){parser}:")
        for g in result.not_analysed:
            out.append(f"> - {md_code(g.path)}: {md_text(g.tool)}: {md_text(g.reason)}")
    if result.findings_cut:
        out.append(
            f"> Findings cut by a cap: {result.findings_cut:,} (not in this report; "
            "`findings_cut` in metrics.json)"
        )
    return out


def _finding_lines(f: Finding, files: Mapping[str, str]) -> list[str]:
    loc = f"{f.file}:{f.start_line}" + (f"-{f.end_line}" if f.end_line != f.start_line else "")
    # A path outside the repository is the model's claim, never shown as a location in it.
    where = (
        md_code(loc)
        if in_repository(f.file, files)
        else f"(outside the repository: {md_code(loc)})"
    )
    cwe = f" ({md_text(f.cwe)})" if f.cwe else ""
    out = [f"- {where} **{md_text(f.title or f.kind)}**{cwe} \\[{md_text(f.kind)}\\]"]
    if f.detail:
        out.append(f"  - {md_text(f.detail)}")
    if f.fix:
        out.append(f"  - Fix: {md_text(f.fix)}")
    return out


def _findings_section(ctx: ReportContext) -> list[str]:
    headline, rest = split_by_scope(ctx.result.findings)
    counts = _counts(headline)
    summary = ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"
    out = [
        "## Findings",
        "",
        f"In the code the project ships (scopes {', '.join(sorted(HEADLINE_SCOPES))}): "
        f"{len(headline)} findings ({summary})."
        + (
            f" {sum(map(len, rest.values()))} more in other scopes are listed apart below."
            if rest
            else ""
        ),
        "",
    ]
    if not headline:
        out += ["No findings in these scopes.", ""]
    for sev in SEVERITIES:
        group = [f for f in headline if f.severity == sev]
        if not group:
            continue
        out += [f"### {sev.capitalize()} ({len(group)})", ""]
        for f in group:
            out += _finding_lines(f, ctx.codebase.files)
        out.append("")
    return out


def _other_scopes_section(ctx: ReportContext) -> list[str]:
    _, rest = split_by_scope(ctx.result.findings)
    if not rest:
        return []
    out = [
        "## Findings in other scopes",
        "",
        "Tests, examples, docs, generated and vendored code: kept apart, never in the counts above.",
        "",
        "| scope | findings | " + " | ".join(SEVERITIES) + " |",
        "|---|---:|" + "---:|" * len(SEVERITIES),
    ]
    for scope, group in rest.items():
        c = _counts(group)
        out.append(
            f"| {md_text(scope)} | {len(group)} | "
            + " | ".join(str(c.get(s, 0)) for s in SEVERITIES)
            + " |"
        )
    out.append("")
    for scope, group in rest.items():
        out += [f"### {md_text(scope)} ({len(group)})", ""]
        for f in group:
            out += _finding_lines(f, ctx.codebase.files)
        out.append("")
    return out


def _synthesis_section(ctx: ReportContext) -> list[str]:
    return [
        "## Synthesis from the root model",
        "",
        md_block(ctx.result.answer.strip(), shift_headings=2) or "(empty)",
        "",
    ]


def _architecture_section(ctx: ReportContext) -> list[str]:
    """Components and their import edges (a list and a Mermaid diagram), cycles, fan-in,
    entry points no test reaches, external dependencies: computed from imports, not by a model."""
    return architecture_markdown(architecture_of(ctx.codebase))


def _summary_section(ctx: ReportContext) -> list[str]:
    result, codebase, mode = ctx.result, ctx.codebase, ctx.mode
    share = sub_cost_share(result)
    refused = (
        f"; {result.sub_calls_refused} refused by a budget" if result.sub_calls_refused else ""
    )
    failed = f"; {result.sub_calls_failed} failed" if result.sub_calls_failed else ""
    scopes = ", ".join(f"{k} {v}" for k, v in codebase.metadata.scopes.items())
    out = [
        "## Run summary",
        "",
        f"- Mode: {mode}; root model: {md_code(result.root_model)}; sub model: "
        f"{md_code(result.sub_model)}; sandbox: {md_text(result.sandbox_mode)}",
        f"- Turns: {result.num_turns}; stop reason: {md_text(result.stop_reason)}"
        + (f" ({md_text(result.stop_detail)})" if result.stop_detail else ""),
        f"- Coverage: {md_text(coverage_line(result))} (scopes audited: "
        f"{', '.join(result.audit_scopes) or 'n/a'})",
        f"- Worker (sub-LLM) calls answered: {result.sub_calls}{refused}{failed}",
        *(
            [f"- Python analyzers parse with: {md_text(result.python_parser)}"]
            if result.python_parser
            else []
        ),
        _behaviour_line(behaviour_dict(result, codebase)),
        f"- Codebase: {codebase.metadata.files} files, {codebase.metadata.lines:,} lines"
        + (f" ({scopes})" if scopes else "")
        + f"; {len(codebase.metadata.skipped)} skipped",
        f"- Wall time: {result.wall_seconds:.1f}s; total cost: {_money(result.total_cost_usd)}"
        + (f"; sub-LLM share of cost: {share:.1%}" if share is not None else ""),
        "",
        *_notes(result, codebase),
        "| role | model | calls | input | output | cache read | cache write | cost |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for u in result.usage:
        out.append(
            f"| {u['role']} | {md_text(u['model'])} | {u['calls']} | {u['input_tokens']:,} | {u['output_tokens']:,} | "
            f"{u['cache_read_tokens']:,} | {u['cache_write_tokens']:,} | {_money(u['cost_usd'])} |"
        )
    return [*out, ""]


def _behaviour_line(b: dict[str, Any]) -> str:
    sizes = ", ".join(map(str, b["batch_sizes"][:10])) + (
        ", …" if len(b["batch_sizes"]) > 10 else ""
    )
    return (
        f"- Root behaviour: {md_text(b['label'])} ({b['llm_query_calls']} llm_query, "
        f"{b['llm_batch_calls']} llm_batch" + (f" of {sizes} prompts" if sizes else "") + "; "
        f"files read by the root {b['files_read_by_root']}, sent to workers "
        f"{b['files_sent_to_workers']}; "
        + (f"answer set at turn {b['answer_turn']})" if b["answer_turn"] else "no answer set)")
    )


def _notes(result: RunResult, codebase: Codebase, limit: int = LIST_LIMIT) -> list[str]:
    """What the reader should know was not analysed, and why."""
    lines = [f"- {md_text(n)}" for n in result.notes]
    lines += [f"- {md_text(n)}" for n in codebase.metadata.notes]
    skipped = codebase.metadata.skipped
    for s in skipped[:limit]:
        lines.append(f"- skipped {md_code(s.path)}: {md_text(s.reason)}")
    if len(skipped) > limit:
        lines.append(f"- … and {len(skipped) - limit} more skipped (see metrics.json)")
    return ["Notes:", "", *lines, ""] if lines else []


#: The sections of report.md, in order. A new section (architecture, say) is one builder
#: added here; each builder is independent of the others.
REPORT_SECTIONS: tuple[Section, ...] = (
    _header,
    _findings_section,
    _other_scopes_section,
    lambda ctx: set_aside_markdown(ctx.result),
    _synthesis_section,
    _architecture_section,
    _summary_section,
)


def write_outputs(
    out_dir: Path,
    result: RunResult,
    codebase: Codebase,
    *,
    offline: bool,
    mode: str = "rlm",
    viewer: bool = True,
) -> None:
    """Write report.md, findings.json, findings.sarif, metrics.json and (unless ``viewer`` is
    off: a run writes it itself once its run log holds the run) trajectory.html."""
    out_dir.mkdir(parents=True, exist_ok=True)
    note = outside_note([f for f in result.findings if not in_repository(f.file, codebase.files)])
    if note and note not in result.notes:
        # Into the result's notes, so report.md, metrics.json and the console all say it.
        result.notes.append(note)
    findings = findings_json(result, codebase.files)
    write_atomic(
        out_dir / "findings.json", json.dumps(findings, indent=2, ensure_ascii=False) + "\n"
    )
    write_atomic(
        out_dir / "findings.sarif",
        json.dumps(sarif_log(result, codebase.files), indent=2, ensure_ascii=False) + "\n",
    )
    write_atomic(
        out_dir / "metrics.json",
        json.dumps(
            metrics(result, codebase, offline=offline, mode=mode), indent=2, ensure_ascii=False
        )
        + "\n",
    )
    write_atomic(out_dir / "report.md", render_report(result, codebase, offline=offline, mode=mode))
    if viewer:
        # Last, from the files just written: the page shows exactly what the run folder holds.
        write_viewer_quietly(out_dir)
