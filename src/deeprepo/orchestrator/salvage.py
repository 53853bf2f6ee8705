"""The report written when the root never set its answer."""

from __future__ import annotations

from collections import Counter

from deeprepo.base.finding import SEVERITIES, Finding
from deeprepo.base.records import StopReason


def salvage_report(
    findings: list[Finding], stop_reason: StopReason, stop_detail: str, partial: str = ""
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
        # report.md lists every finding once, with its scope; here only the tally.
        counts = Counter(f.severity for f in findings)
        tally = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s])
        lines.append(f"Findings recorded: {len(findings)} ({tally}); see findings.json.")
    else:
        lines.append("No findings were recorded.")
    return "\n".join(lines) + "\n"
