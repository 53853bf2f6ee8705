"""The rules by which findings are graded against the ground truth (findings/grading.py), one
per test, through the public ``grade`` (docs/testing.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Finding
from deeprepo.findings.families import CweFamily, FamilyTable, normalize_kind
from deeprepo.findings.grading import (
    grade,
    load_findings,
    load_ground_truth,
    parse_findings,
    parse_ground_truth,
)


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
    assert u.entry is not None and u.entry.id == "bug"


def test_the_exact_cwe_breaks_a_tie_in_distance() -> None:
    """Two bugs of one family at the same distance: the finding goes to the one whose CWE
    it names, not to the one listed first."""
    gt = parse_ground_truth([entry(20, "hql", cwe="CWE-564"), entry(10, "sqli")])
    s = grade([finding(15)], gt)
    assert s.matches[0].entry.id == "sqli" and s.matches[0].exact_cwe
    assert grade([finding(15, cwe="CWE-564")], gt).matches[0].entry.id == "hql"


# ------------------------------------------------------------------ the family table


def table() -> FamilyTable:
    return FamilyTable.from_json(
        {
            "families": {
                "sql-injection": {
                    "title": "SQL",
                    "cwes": [89, "cwe-564", "nonsense"],
                    "kinds": ["sqli", "SQL_Injection"],
                    "fix": "Use parameters.",
                },
                "xss": {"cwes": ["CWE 79"], "kinds": ["cross site scripting"]},
                "injection": {"kinds": ["injection", "dup"]},
                "command-injection": {"kinds": ["dup"]},
            }
        }
    )


def test_a_family_table_reads_cwes_in_any_spelling_and_defaults_title_and_fix() -> None:
    """Families from JSON: CWEs in any spelling (junk dropped), the title defaulting to the
    name, no fix by default."""
    t = table()
    assert t.families["sql-injection"] == CweFamily(
        "sql-injection", "SQL", frozenset({"CWE-89", "CWE-564"}), ("sqli", "SQL_Injection"),
        "Use parameters.",
    )  # fmt: skip
    assert (t.families["xss"].title, t.families["xss"].fix) == ("xss", "")
    assert t.families["injection"].cwes == frozenset()
    assert (t.of_cwe("89"), t.of_cwe("CWE-564"), t.of_cwe(79), t.of_cwe("CWE-1")) == (
        "sql-injection", "sql-injection", "xss", None,
    )  # fmt: skip


def test_a_cwe_in_two_families_is_refused() -> None:
    """A CWE may belong to one family only: a table that says otherwise is an error."""
    data = {"families": {"a": {"cwes": [89]}, "b": {"cwes": ["CWE-89"]}}}
    with pytest.raises(ValueError, match=r"^CWE-89 is in two families: a, b$"):
        FamilyTable.from_json(data)


@pytest.mark.parametrize(
    ("kind", "family"),
    [
        ("SQL Injection", "sql-injection"),  # the family's own name, any spelling
        ("sqli", "sql-injection"),
        ("cross_site/scripting", "xss"),
        ("dup", "injection"),  # an alias two families list: the first one's
        ("blind-sql-injection", "sql-injection"),  # an alias inside a longer kind
        ("blind-command-injection", "command-injection"),  # the longest alias wins
        ("stored-xss", "xss"),  # an alias of three characters still counts
        ("reflected-xs", None),
        ("", None),
    ],
)
def test_a_kind_finds_its_family_by_alias(kind: str, family: str | None) -> None:
    """Kinds map to families by alias: exact first, then the longest alias of 3+ characters
    inside a longer kind."""
    assert table().of_kind(kind) == family


def test_kinds_are_normalised_to_lowercase_hyphenated_words() -> None:
    """``_SQL injection/ blind_`` is ``sql-injection-blind``: separators become one hyphen,
    none at the ends."""
    assert normalize_kind(" _SQL  injection/ blind_ ") == "sql-injection-blind"
    assert normalize_kind("--x--") == "x"


def test_an_entry_naming_no_class_matches_by_location_alone() -> None:
    """An entry with no CWE and a kind no family knows: any finding near it matches, by CWE
    or by kind, never as an exact CWE match."""
    gt = parse_ground_truth([entry(10, "odd", cwe=None, kind="weird-thing")])
    by_cwe = grade([finding(11, cwe="CWE-79")], gt)
    by_kind = grade([finding(11, cwe=None, kind="made-up")], gt)
    assert by_cwe.tp == by_kind.tp == 1
    assert not by_cwe.matches[0].exact_cwe and not by_kind.matches[0].exact_cwe


def test_an_entry_with_a_known_kind_matches_its_family_only() -> None:
    """An entry with no CWE but a known kind matches findings of that kind's family."""
    gt = parse_ground_truth([entry(10, "k", cwe=None, kind="sql-injection")])
    assert grade([finding(10, cwe="CWE-89")], gt).tp == 1
    assert grade([finding(10, cwe=None, kind="sqli")], gt).tp == 1
    assert not grade([finding(10, cwe=None, kind="sqli")], gt).matches[0].exact_cwe
    assert grade([finding(10, cwe="CWE-79")], gt).tp == 0
    assert grade([finding(10, cwe=None, kind="xss")], gt).tp == 0
    assert grade([finding(10, cwe=None, kind="no-such-kind")], gt).tp == 0


def test_an_entry_with_acceptable_cwes_only_matches_them() -> None:
    """No CWE of its own but acceptable ones: only those (or their families) match."""
    gt = parse_ground_truth([entry(10, "a", cwe=None, acceptable_cwes=["CWE-79"])])
    assert grade([finding(10, cwe="CWE-79")], gt).matches[0].exact_cwe
    assert grade([finding(10, cwe="CWE-89")], gt).tp == 0
    assert grade([finding(10, cwe=None, kind="xss")], gt).tp == 1


# ------------------------------------------------------------------ what a score says


def test_a_score_as_json_names_every_count_and_pair() -> None:
    """Score.to_dict: the rates, the decoy and duplicate counts, the tolerance, per-family
    rates, and each match, false positive and missed entry."""
    gt = parse_ground_truth(
        [entry(10, "bug"), entry(50, "missed"), entry(20, "decoy", vulnerable=False)]
    )
    d = grade([finding(12), finding(12), finding(21)], gt, tolerance=3).to_dict()
    assert {k: d[k] for k in ("tp", "fp", "fn", "precision", "recall", "f1")} == {
        "tp": 1, "fp": 1, "fn": 1, "precision": 0.5, "recall": 0.5, "f1": 0.5,
    }  # fmt: skip
    assert (d["decoys_hit"], d["decoys_total"], d["duplicates_dropped"], d["tolerance"]) == (
        1, 1, 1, 3,
    )  # fmt: skip
    assert d["per_family"] == {
        "sql-injection": {"tp": 1, "fp": 1, "fn": 1, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    }
    (m,) = d["matches"]
    assert (m["entry_id"], m["distance"], m["exact_cwe"], m["finding"]["start_line"]) == (
        "bug", 2, True, 12,
    )  # fmt: skip
    (fp,) = d["false_positives"]
    assert (fp["reason"], fp["entry_id"], fp["finding"]["start_line"]) == ("decoy", "decoy", 21)
    assert [e["id"] for e in d["missed"]] == ["missed"]
    assert d["missed"][0]["acceptable_cwes"] == []


def test_files_that_cannot_be_read_say_which_and_what_to_do(tmp_path: Path) -> None:
    """A missing or broken findings / ground-truth file is a usage error naming the file."""
    missing = tmp_path / "nope.json"
    with pytest.raises(UsageError, match=r"^Ground truth file not found: .*nope\.json\. Check"):
        load_ground_truth(missing)
    with pytest.raises(UsageError, match=r"^Findings file not found: .*nope\.json"):
        load_findings(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match=r"^Findings file .*bad\.json is not valid JSON \("):
        load_findings(bad)
    good = tmp_path / "good.json"
    good.write_text('{"findings": [{"file": "db.py", "line": 3}]}')
    (f,) = load_findings(good)
    assert (f.file, f.start_line) == ("db.py", 3)
    good.write_text('[{"file": "./db.py", "line": 3}]')
    (e,) = load_ground_truth(good)
    assert (e.file, e.start_line, e.id) == ("db.py", 3, "gt-0")


def test_bad_findings_name_the_item_and_what_it_needs() -> None:
    """A findings list that is not one, or an item without a file or line, is refused
    with the source and the item's index."""
    with pytest.raises(UsageError, match=r"^run\.json: expected a JSON list of findings"):
        parse_findings({"findings": "x"}, "run.json")
    with pytest.raises(UsageError, match=r"^run\.json: finding 1 is invalid \(.*'file' and"):
        parse_findings([{"file": "a.py", "line": 1}, {"line": 2}], "run.json")


def test_ground_truth_fields_have_defaults_and_lines_start_at_one(tmp_path: Path) -> None:
    """An entry may give 'line' for 'start_line'; lines start at 1; kind, severity and
    description default to '', 'medium' and ''; the id to gt-<index>."""
    (e, f) = parse_ground_truth(
        [
            {"file": "a.py", "line": 0, "acceptable_cwes": ["79"]},
            {"file": "b.py", "start_line": 1, "end_line": 3, "kind": "sqli", "severity": "low",
             "description": "d", "id": "x"},
        ]
    )  # fmt: skip
    assert (e.id, e.start_line, e.kind, e.severity, e.description) == (
        "gt-0", 1, "", "medium", "",
    )  # fmt: skip
    assert e.to_dict()["acceptable_cwes"] == ["CWE-79"]
    assert (f.id, f.start_line, f.end_line, f.kind, f.severity, f.description) == (
        "x", 1, 3, "sqli", "low", "d",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ({"line": 0}, (1, 1)),
        ({"start_line": 0, "end_line": 0}, (1, 1)),
        ({"start_line": -4, "end_line": -2}, (1, 1)),
        ({"start_line": 0, "end_line": 3}, (1, 3)),
        ({"start_line": 5, "end_line": 2}, (5, 5)),
    ],
)
def test_an_entry_ends_no_earlier_than_it_starts(
    lines: dict[str, int], expected: tuple[int, int]
) -> None:
    """An entry's range is never empty: its start is at least line 1 and its end at least its
    start, also when the ground truth gives line 0 or an end before the start."""
    (e,) = parse_ground_truth([{"file": "a.py", **lines}])
    assert (e.start_line, e.end_line) == expected


def test_a_bad_ground_truth_names_its_source_and_the_entry(tmp_path: Path) -> None:
    """A ground truth that is not a list, or an entry without a file or line, is refused
    naming the file and the entry."""
    with pytest.raises(UsageError, match=r"^gt\.json: expected a JSON list of entries"):
        parse_ground_truth({"entries": "x"}, "gt.json")
    path = tmp_path / "gt.json"
    path.write_text('[{"file": "a.py", "line": 1}, {"file": "b.py"}]')
    with pytest.raises(UsageError) as e:
        load_ground_truth(path)
    assert str(e.value).startswith(f"{path}: entry 1 needs 'file' and an integer 'start_line'")
    path.write_text('{"findings": 3}')
    with pytest.raises(UsageError, match=f"^{path}: expected a JSON list of findings"):
        load_findings(path)


def test_a_finding_with_only_a_kind_is_counted_under_its_family() -> None:
    """Per-family counts name a CWE-less finding's family from its kind."""
    gt = parse_ground_truth([entry(10, "bug")])
    s = grade([finding(90, cwe=None, kind="sqli")], gt)
    assert {f.family: (f.tp, f.fp, f.fn) for f in s.per_family} == {"sql-injection": (0, 1, 1)}


def test_a_finding_overlapping_a_bug_is_at_distance_zero() -> None:
    """Overlapping ranges are 0 lines apart, whichever starts first."""
    gt = parse_ground_truth([entry(20, "bug", end_line=24)])
    for line in (20, 22, 24):
        assert grade([finding(line)], gt).matches[0].distance == 0


def test_every_bug_of_the_file_is_a_candidate_not_only_the_first() -> None:
    """A finding far from the file's first bug is still matched to a later one near it."""
    gt = parse_ground_truth([entry(100, "far"), entry(10, "near")])
    s = grade([finding(10)], gt)
    assert [m.entry.id for m in s.matches] == ["near"]


def test_pairs_are_taken_nearest_first_before_any_reshuffle() -> None:
    """Two findings and two bugs: each finding is credited to the nearer bug it can have,
    not to whichever an augmenting search reached first."""
    gt = parse_ground_truth([entry(12, "x"), entry(16, "y")])
    s = grade([finding(10), finding(14)], gt)
    assert sorted((m.finding.start_line, m.entry.id, m.distance) for m in s.matches) == [
        (10, "x", 2),
        (14, "y", 2),
    ]


def test_distinct_decoys_hit_are_counted() -> None:
    """decoys_hit counts the distinct decoys findings fell for."""
    gt = parse_ground_truth([entry(10, "d1", vulnerable=False), entry(50, "d2", vulnerable=False)])
    assert grade([finding(10), finding(50)], gt).decoys_hit == 2
    assert grade([finding(10), finding(11)], gt).decoys_hit == 1


def test_per_family_counts_add_up_and_use_the_entrys_kind() -> None:
    """Per family: every true positive, false positive and miss is counted; an entry with
    no CWE is counted under its kind's family."""
    gt = parse_ground_truth(
        [
            entry(10, "a", cwe=None, kind="sqli"),
            entry(40, "b", cwe=None, kind="sqli"),
            entry(70, "c", cwe=None, kind="sqli"),
            entry(100, "d", cwe=None, kind="sqli"),
        ]
    )
    far = [finding(500, cwe="CWE-89"), finding(600, cwe="CWE-89")]
    s = grade([finding(10), finding(40), *far], gt)
    assert {f.family: (f.tp, f.fp, f.fn) for f in s.per_family} == {"sql-injection": (2, 2, 2)}


def test_vulnerable_may_be_written_as_text() -> None:
    """'vulnerable' given as text: true, yes and 1 (any case) mean a bug, anything else a
    decoy; booleans stay as they are."""
    values = ["true", " Yes", "1", "TRUE", "no", "0", "false", True, False]
    gt = parse_ground_truth([{"file": "a.py", "line": i + 1, "vulnerable": v}
                             for i, v in enumerate(values)])  # fmt: skip
    assert [e.vulnerable for e in gt] == [True, True, True, True, False, False, False, True, False]


def test_errors_name_the_default_source() -> None:
    """Without a source name the errors say 'ground truth' and 'findings'."""
    with pytest.raises(UsageError, match=r"^ground truth: expected a JSON list"):
        parse_ground_truth(3)
    with pytest.raises(UsageError, match=r"^findings: expected a JSON list"):
        parse_findings("x")


def test_an_entry_written_out_reads_back_as_the_same_entry() -> None:
    """to_dict writes every field under the name parse_ground_truth reads: an entry with no
    default left (a decoy, a range, a class, a description) reads back unchanged."""
    (e,) = parse_ground_truth(
        [
            {"id": "d1", "file": "app/a.py", "start_line": 4, "end_line": 9, "cwe": "CWE-78",
             "acceptable_cwes": ["CWE-77"], "kind": "command-injection", "severity": "low",
             "description": "An argument list, no shell.", "vulnerable": False,
             "related": [{"file": "app/b.py", "line": 2}]},
        ]
    )  # fmt: skip
    assert parse_ground_truth([e.to_dict()]) == [e]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "a family table is an object with a 'families' object"),
        ({"families": []}, "a family table is an object with a 'families' object"),
        ({"families": {"sqli": 89}}, "family 'sqli' is not an object"),
        ({"families": {"sqli": {"cwes": "CWE-89"}}}, "family 'sqli': 'cwes' must be a list"),
        ({"families": {"sqli": {"title": 1}}}, "family 'sqli': 'title' and 'fix' must be strings"),
        ({"families": {"sqli": {"kinds": "sqli"}}}, "'kinds' must be a list of strings"),
        ({"families": {"sqli": {"kinds": ["sqli", 2]}}}, "'kinds' must be a list of strings"),
    ],
)  # fmt: skip
def test_a_malformed_family_table_is_refused_saying_what_is_wrong(
    data: object, message: str
) -> None:
    """A family table of the wrong shape is refused naming the family and field at fault."""
    with pytest.raises(ValueError) as e:
        FamilyTable.from_json(data)
    assert str(e.value) == message
