"""The report written when the root never set its answer."""

from __future__ import annotations

from deeprepo.findings.model import Finding, sort_by_severity


def salvage_report(
    findings: list[Finding], stop_reason: str, stop_detail: str, partial: str = ""
) -> str:
    """Build an answer from the findings recorded so far, marked incomplete."""
    lines = [
        "# Incomplete report",
        "",
        f"The run stopped ({stop_reason}: {stop_detail or 'no detail'}) before the root model set its answer. "
        f"This report was salvaged from the {len(findings)} finding(s) it had recorded.",
        "",
    ]
    if partial.strip():
        lines += ["## Partial answer from the root", "", partial.strip(), ""]
    if findings:
        lines += ["## Findings recorded", ""]
        for f in sort_by_severity(findings):
            cwe = f" ({f.cwe})" if f.cwe else ""
            lines.append(f"- **{f.severity}** `{f.file}:{f.start_line}` {f.title}{cwe}")
    else:
        lines.append("No findings were recorded.")
    return "\n".join(lines) + "\n"
