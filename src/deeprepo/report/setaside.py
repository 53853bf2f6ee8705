"""What the outputs say about findings set aside (suppressed in the source, already in the
baseline): counted in the console summary, report.md, findings.json and metrics.json, listed
in report.md and findings.sarif, never silently gone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deeprepo.base.finding import sort_by_severity
from deeprepo.base.records import RunResult
from deeprepo.findings.fingerprint import fingerprints
from deeprepo.report.text import md_code, md_text

__all__ = ["findings_json", "set_aside_line", "set_aside_markdown", "set_aside_metrics"]


def _counts(result: RunResult) -> tuple[int, int]:
    suppressed = sum(s.why == "suppressed" for s in result.set_aside)
    return suppressed, len(result.set_aside) - suppressed


def set_aside_line(result: RunResult) -> str | None:
    """One line counting what was set aside and why (``None`` when nothing was and no
    baseline was given)."""
    suppressed, baselined = _counts(result)
    parts = []
    if suppressed or result.baseline is None:
        parts.append(f"{suppressed} suppressed in the source")
    if result.baseline is not None:
        parts.append(f"{baselined} already in the baseline ({result.baseline.source})")
    if not suppressed and not baselined and result.baseline is None:
        return None
    return "Set aside (not counted above, not gated): " + ", ".join(parts)


def set_aside_markdown(result: RunResult) -> list[str]:
    """report.md's section: the count, then each finding with what set it aside."""
    line = set_aside_line(result)
    if line is None:
        return []
    out = ["## Set aside", "", md_text(line) + ".", ""]
    for s in result.set_aside:
        f = s.finding
        why = "suppressed by " + md_code(s.source) if s.why == "suppressed" else "in the baseline"
        reason = f": {md_text(s.reason)}" if s.reason else ""
        out.append(
            f"- {md_code(f'{f.file}:{f.start_line}')} {md_text(f.severity)} "
            f"**{md_text(f.title or f.kind)}**"
            + (f" ({md_text(f.cwe)})" if f.cwe else "")
            + f", {why}{reason}"
        )
    return [*out, ""] if result.set_aside else out


def set_aside_metrics(result: RunResult) -> dict[str, Any]:
    """metrics.json's counts and list of set-aside findings."""
    suppressed, baselined = _counts(result)
    return {
        "findings_suppressed": suppressed,
        "findings_baselined": baselined,
        "baseline": result.baseline.source if result.baseline is not None else None,
        "set_aside": [s.to_dict() for s in result.set_aside],
    }


def findings_json(result: RunResult, files: Mapping[str, str]) -> list[dict[str, Any]]:
    """findings.json: the result's findings, each with its SARIF fingerprint (what a later
    ``--baseline findings.json`` matches), taken over every finding as findings.sarif does."""
    everything = sort_by_severity([*result.findings, *(s.finding for s in result.set_aside)])
    prints = {id(f): fp for f, fp in zip(everything, fingerprints(everything, files), strict=True)}
    return [
        {**f.to_dict(), "fingerprint": prints[id(f)]} for f in sort_by_severity(result.findings)
    ]
