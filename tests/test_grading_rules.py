"""The rules by which findings are graded against the ground truth (findings/grading.py), one
per test, through the public ``grade`` (docs/testing.md)."""

from __future__ import annotations

from typing import Any

from deeprepo.base.finding import Finding
from deeprepo.findings.grading import grade, parse_ground_truth


def entry(start: int, id: str, vulnerable: bool = True, **kw: Any) -> dict[str, Any]:
    return {
        "file": "db.py", "start_line": start, "end_line": start, "cwe": "CWE-89", "id": id,
        "vulnerable": vulnerable, **kw,
    }  # fmt: skip


def finding(line: int, cwe: str | None = "CWE-89", kind: str = "sql-injection") -> Finding:
    return Finding("db.py", line, line, kind, cwe, "high", "t")


def test_a_decoy_and_a_bug_at_the_same_distance_the_finding_matches_the_bug() -> None:
    """A finding as near a decoy as a bug is credited to the bug: a true positive."""
    gt = parse_ground_truth([entry(10, "bug"), entry(20, "decoy", vulnerable=False)])
    s = grade([finding(15)], gt)
    assert (s.tp, s.fp, s.fn, s.decoys_hit) == (1, 0, 0, 0)
    assert s.matches[0].entry.id == "bug" and s.matches[0].distance == 5


def test_a_leftover_as_near_a_decoy_as_a_credited_bug_was_fooled_by_the_decoy() -> None:
    """A second finding, the bug already credited, as near the decoy as the bug: a decoy
    hit, not a repeat of the bug."""
    gt = parse_ground_truth([entry(10, "bug"), entry(20, "decoy", vulnerable=False)])
    s = grade([finding(10), finding(15)], gt)
    assert (s.tp, s.fp, s.decoys_hit) == (1, 1, 1)
    (u,) = s.unmatched
    assert (u.finding.start_line, u.reason) == (15, "decoy")
    assert u.entry is not None and u.entry.id == "decoy"


def test_a_leftover_nearer_the_credited_bug_repeats_it() -> None:
    """Nearer the credited bug than the decoy: a duplicate of the bug."""
    gt = parse_ground_truth([entry(10, "bug"), entry(20, "decoy", vulnerable=False)])
    s = grade([finding(10), finding(14)], gt)
    (u,) = s.unmatched
    assert (u.finding.start_line, u.reason, s.decoys_hit) == (14, "duplicate", 0)


def test_the_exact_cwe_breaks_a_tie_in_distance() -> None:
    """Two bugs of one family at the same distance: the finding goes to the one whose CWE
    it names, not to the one listed first."""
    gt = parse_ground_truth([entry(20, "hql", cwe="CWE-564"), entry(10, "sqli")])
    s = grade([finding(15)], gt)
    assert s.matches[0].entry.id == "sqli" and s.matches[0].exact_cwe
    assert grade([finding(15, cwe="CWE-564")], gt).matches[0].entry.id == "hql"
