"""The CI gate: which findings fail a run given ``--fail-on SEVERITY``.

The gate reads the headline findings only (source and config code: the scopes the
console counts), so a hard-coded key in a test fixture never blocks a merge on its own;
findings of other scopes stay in the report. Findings a later filter sets aside
(suppressed, baselined) are to be removed before the gate is asked.
"""

from __future__ import annotations

from collections.abc import Iterable

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import SEVERITIES, Finding

__all__ = ["THRESHOLDS", "at_or_above", "check_threshold"]

#: The severities ``--fail-on`` takes, least severe first (``info`` never fails a run).
THRESHOLDS = ("low", "medium", "high", "critical")


def check_threshold(value: str) -> str:
    """The threshold in canonical form; an unknown one is a usage error naming the choices."""
    threshold = value.strip().lower()
    if threshold not in THRESHOLDS:
        raise UsageError(f"--fail-on {value!r} is not a severity; choose {', '.join(THRESHOLDS)}")
    return threshold


def at_or_above(findings: Iterable[Finding], threshold: str) -> list[Finding]:
    """The findings whose severity is ``threshold`` or more severe."""
    rank = {severity: i for i, severity in enumerate(SEVERITIES)}  # critical is 0
    limit = rank[check_threshold(threshold)]
    return [f for f in findings if rank.get(f.severity, len(SEVERITIES)) <= limit]
