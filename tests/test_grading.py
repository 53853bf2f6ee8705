"""The grader: matching rules, one-to-one pairing, decoys, edge cases and the score CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Finding
from deeprepo.cli.score_cmd import score_command
from deeprepo.findings.families import CweFamily, FamilyTable, default_families
from deeprepo.findings.grading import (
    f_beta,
    grade,
    load_findings,
    load_ground_truth,
    parse_findings,
    parse_ground_truth,
)


def entry(
    file: str, start: int, end: int | None = None, cwe: str | None = "CWE-89", **kw: Any
) -> dict[str, Any]:
    return {"file": file, "start_line": start, "end_line": end or start, "cwe": cwe, **kw}


def finding(
    file: str, line: int, cwe: str | None = "CWE-89", end: int | None = None, kind: str = "x"
) -> Finding:
    return Finding(file, line, end or line, kind, cwe, "high", "t")


GT = parse_ground_truth([entry("app/db.py", 20, 22, id="sql")])


@pytest.mark.parametrize(
    ("line", "tp"),
    [(32, 1), (33, 0), (10, 1), (9, 0), (21, 1), (20, 1)],
)
def test_tolerance_edges(line: int, tp: int) -> None:
    s = grade([finding("app/db.py", line)], GT)
    assert (s.tp, s.fp, s.fn) == (tp, 1 - tp, 1 - tp)


def test_tolerance_is_configurable() -> None:
    assert grade([finding("app/db.py", 25)], GT, tolerance=3).tp == 1
    assert grade([finding("app/db.py", 26)], GT, tolerance=3).tp == 0
    assert grade([finding("app/db.py", 22)], GT, tolerance=0).tp == 1


def test_finding_range_counts_only_tolerance_past_its_start() -> None:
    # A finding over the whole file must not match every bug in it.
    far = parse_ground_truth([entry("app/db.py", 200, 202)])
    assert grade([finding("app/db.py", 1, end=500)], far).tp == 0
    # A finding whose range overlaps the bug within its first 10 lines matches.
    s = grade([finding("app/db.py", 5, end=40)], GT)
    assert s.tp == 1 and s.matches[0].distance == 5


def test_leading_dot_slash_is_normalised() -> None:
    gt = parse_ground_truth([entry("./app/db.py", 20)])
    assert gt[0].file == "app/db.py"
    assert grade([finding("./app/db.py", 20)], gt).tp == 1


def test_family_match_and_exactness() -> None:
    gt = parse_ground_truth([entry("auth.py", 10, cwe="CWE-327", id="hash")])
    s = grade([finding("auth.py", 10, "CWE-916")], gt)
    assert s.tp == 1 and s.matches[0].exact_cwe is False
    assert grade([finding("auth.py", 10, "CWE-327")], gt).matches[0].exact_cwe is True
    # Another family at the same line is a false positive and the bug stays missed.
    s = grade([finding("auth.py", 10, "CWE-79")], gt)
    assert (s.tp, s.fp, s.fn) == (0, 1, 1)


def test_acceptable_cwes_outside_the_family() -> None:
    gt = parse_ground_truth([entry("x.py", 5, cwe="CWE-89", acceptable_cwes=["CWE-20"])])
    s = grade([finding("x.py", 5, "CWE-20")], gt)
    assert s.tp == 1 and s.matches[0].exact_cwe is True
    assert grade([finding("x.py", 5, "CWE-22")], gt).tp == 0


def test_wrong_file_is_false_positive_and_miss() -> None:
    s = grade([finding("app/other.py", 20)], GT)
    assert (s.tp, s.fp, s.fn) == (0, 1, 1)
    assert s.unmatched[0].reason == "no-match"
    assert [e.id for e in s.missed] == ["sql"]


def test_decoy_hit_is_false_positive() -> None:
    gt = parse_ground_truth(
        [entry("db.py", 10, id="bug"), entry("db.py", 40, id="decoy", vulnerable=False)]
    )
    s = grade([finding("db.py", 10), finding("db.py", 41), finding("db.py", 43)], gt)
    assert (s.tp, s.fp, s.fn) == (1, 2, 0)
    assert s.decoys_hit == 1 and s.decoys_total == 1  # distinct decoys
    assert [u.reason for u in s.unmatched] == ["decoy", "decoy"]
    assert s.unmatched[0].entry is not None and s.unmatched[0].entry.id == "decoy"
    assert s.precision == pytest.approx(1 / 3)


def test_leftover_near_bug_and_decoy_goes_to_the_nearer() -> None:
    gt = parse_ground_truth(
        [entry("db.py", 10, id="bug"), entry("db.py", 16, id="decoy", vulnerable=False)]
    )
    s = grade([finding("db.py", 10), finding("db.py", 11), finding("db.py", 15)], gt)
    assert (s.tp, s.fp, s.decoys_hit) == (1, 2, 1)
    assert [(u.finding.start_line, u.reason) for u in s.unmatched] == [
        (11, "duplicate"),
        (15, "decoy"),
    ]


def test_one_to_one_second_finding_is_duplicate() -> None:
    s = grade([finding("app/db.py", 20), finding("app/db.py", 23)], GT)
    assert (s.tp, s.fp, s.fn) == (1, 1, 0)
    assert s.matches[0].finding.start_line == 20  # the nearer one wins
    assert s.unmatched[0].reason == "duplicate"


def test_matching_is_maximum_not_only_greedy() -> None:
    # Greedy alone pairs A(20) with e1(20) and leaves B(10) unmatched; B can only reach e1.
    gt = parse_ground_truth([entry("m.py", 20, id="e1"), entry("m.py", 25, id="e2")])
    s = grade([finding("m.py", 20), finding("m.py", 10)], gt)
    assert (s.tp, s.fp, s.fn) == (2, 0, 0)
    pairs = {m.finding.start_line: m.entry.id for m in s.matches}
    assert pairs == {20: "e2", 10: "e1"}


def test_exact_duplicates_dropped_by_default() -> None:
    dup = [finding("app/db.py", 20), finding("app/db.py", 20)]
    s = grade(dup, GT)
    assert (s.tp, s.fp, s.duplicates_dropped) == (1, 0, 1)
    s = grade(dup, GT, drop_duplicates=False)
    assert (s.tp, s.fp, s.duplicates_dropped) == (1, 1, 0)


def test_kind_match_when_no_cwe() -> None:
    assert grade([finding("app/db.py", 20, None, kind="SQL_Injection")], GT).tp == 1
    assert grade([finding("app/db.py", 20, None, kind="blind-sql-injection")], GT).tp == 1
    assert grade([finding("app/db.py", 20, None, kind="command-injection")], GT).tp == 0
    assert grade([finding("app/db.py", 20, None, kind="style")], GT).tp == 0
    # A CWE that is given but wrong is not rescued by the kind.
    assert grade([finding("app/db.py", 20, "CWE-79", kind="sql-injection")], GT).tp == 0


def test_edge_cases() -> None:
    s = grade([], GT)
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    s = grade([], [])
    assert (s.precision, s.recall, s.f1) == (1.0, 1.0, 1.0)
    s = grade([finding("a.py", 1)], [])
    assert (s.precision, s.recall, s.f1) == (0.0, 1.0, 0.0)
    decoy_only = parse_ground_truth([entry("a.py", 1, vulnerable=False)])
    s = grade([], decoy_only)
    assert (s.precision, s.recall, s.decoys_hit, s.decoys_total) == (1.0, 1.0, 0, 1)


def test_f_beta_numbers() -> None:
    assert f_beta(2, 2, 0) == pytest.approx(2 / 3)
    assert f_beta(2, 2, 0, beta=0.5) == pytest.approx(0.625 / 1.125)
    assert f_beta(1, 0, 3, beta=2.0) == pytest.approx(5 * 0.25 / (4 + 0.25))
    assert f_beta(0, 3, 2) == 0.0


def test_per_family_table() -> None:
    gt = parse_ground_truth(
        [
            entry("a.py", 10, cwe="CWE-89"),
            entry("a.py", 50, cwe="CWE-78"),
            entry("b.py", 5, cwe="CWE-798"),
            entry("c.py", 5, cwe="CWE-4242"),
        ]
    )
    found = [
        finding("a.py", 11, "CWE-564"),
        finding("a.py", 80, "CWE-77"),
        finding("b.py", 5, "CWE-259"),
        finding("b.py", 90, None, kind="weird-thing"),
    ]
    s = grade(found, gt)
    fam = {f.family: (f.tp, f.fp, f.fn) for f in s.per_family}
    assert fam == {
        "sql-injection": (1, 0, 0),
        "command-injection": (0, 1, 1),
        "hardcoded-secret": (1, 0, 0),
        "CWE-4242": (0, 0, 1),
        "other": (0, 1, 0),
    }
    assert (s.tp, s.fp, s.fn) == (2, 2, 2)
    assert s.f1 == pytest.approx(0.5)
    ci = next(f for f in s.per_family if f.family == "command-injection")
    assert (ci.precision, ci.recall) == (0.0, 0.0)


def test_family_table_data() -> None:
    t = default_families()
    for cwes, name in [
        ((327, 328, 916, 759, 760), "weak-crypto"),
        ((89, 564), "sql-injection"),
        ((78, 77, 88), "command-injection"),
        ((22, 23, 36, 73), "path-traversal"),
        ((502,), "unsafe-deserialization"),
        ((79, 80, 116), "xss"),
        ((918,), "ssrf"),
        ((798, 259, 321, 547), "hardcoded-secret"),
        ((862, 285, 863, 639), "missing-authorization"),
        ((330, 338, 331), "insecure-randomness"),
        ((362, 366, 367), "race-condition"),
        ((772, 404, 775, 401), "resource-leak"),
        ((193, 682, 129), "logic-error"),
    ]:
        assert {t.of_cwe(f"CWE-{c}") for c in cwes} == {name}
    assert t.of_cwe("cwe 89") == "sql-injection"
    assert t.of_cwe("CWE-1") is None
    assert t.of_kind("Off By One") == "logic-error"
    with pytest.raises(ValueError, match="two families"):
        FamilyTable(
            [
                CweFamily("a", "A", frozenset({"CWE-1"}), ()),
                CweFamily("b", "B", frozenset({"CWE-1"}), ()),
            ]
        )


def test_parsing_accepts_the_documented_shapes(tmp_path: Path) -> None:
    gt_file = tmp_path / "gt.json"
    gt_file.write_text(json.dumps({"entries": [{"file": "a.py", "start_line": 3, "cwe": 89}]}))
    gt = load_ground_truth(gt_file)
    assert gt[0].cwe == "CWE-89" and gt[0].end_line == 3 and gt[0].acceptable_cwes == ()
    assert gt[0].id == "gt-0" and gt[0].vulnerable is True
    f_file = tmp_path / "f.json"
    f_file.write_text(json.dumps({"findings": [{"file": "./a.py", "line": 4, "cwe": "CWE-89"}]}))
    found = load_findings(f_file)
    assert found[0].start_line == 4 and found[0].file == "a.py"
    assert grade(found, gt).tp == 1
    assert parse_findings([]) == []


def test_ground_truth_is_read_in_one_place() -> None:
    raw = {
        "file": "./app/a.py",
        "start_line": 3,
        "cwe": "89",
        "related": [{"file": "./app/b.py", "line": 7}, "not a place", {"file": "x"}],
    }
    (e,) = parse_ground_truth([raw])
    assert (e.file, e.cwe, e.related) == ("app/a.py", "CWE-89", (("app/b.py", 7),))
    # Written and read again, or passed already parsed: the same entries.
    assert parse_ground_truth([e.to_dict()]) == [e]
    mixed = parse_ground_truth((e, entry("c.py", 2)))
    assert mixed[0] is e and mixed[1].id == "gt-1"
    assert parse_ground_truth({"entries": [raw]}) == [e]
    # A plain entry writes no "related" key, as before cross-file bugs existed.
    assert "related" not in parse_ground_truth([entry("c.py", 2)])[0].to_dict()
    with pytest.raises(UsageError, match="'related' place an integer 'line'"):
        parse_ground_truth([{**raw, "related": [{"file": "b.py", "line": "near the top"}]}])
    with pytest.raises(UsageError, match="entry 0 is not a JSON object"):
        parse_ground_truth(["a.py:3"])


def test_parsing_errors_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        load_ground_truth(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_findings(bad)
    with pytest.raises(UsageError, match="entry 1 needs 'file'"):
        parse_ground_truth([entry("a.py", 1), {"start_line": 2}])
    with pytest.raises(UsageError, match="finding 0 is invalid"):
        parse_findings([{"line": 3}])
    with pytest.raises(UsageError, match="expected a JSON list"):
        parse_ground_truth("text")


def _cli(tmp_path: Path) -> tuple[CliRunner, typer.Typer, Path, Path]:
    app = typer.Typer()
    app.command()(score_command)
    gt = tmp_path / "gt.json"
    gt.write_text(
        json.dumps([entry("a.py", 10, id="b1"), entry("a.py", 60, id="d1", vulnerable=False)])
    )
    fs = tmp_path / "f.json"
    fs.write_text(
        json.dumps(
            [
                {"file": "a.py", "line": 12, "cwe": "CWE-89"},
                {"file": "a.py", "line": 60, "cwe": "CWE-89"},
            ]
        )
    )
    return CliRunner(), app, fs, gt


def test_score_command_json(tmp_path: Path) -> None:
    runner, app, fs, gt = _cli(tmp_path)
    res = runner.invoke(app, [str(fs), str(gt), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert (data["tp"], data["fp"], data["fn"], data["decoys_hit"]) == (1, 1, 0, 1)
    assert data["precision"] == 0.5 and data["recall"] == 1.0
    assert data["matches"][0]["entry_id"] == "b1"
    assert data["false_positives"][0]["reason"] == "decoy"
    res = runner.invoke(app, [str(fs), str(gt), "--json", "--tolerance", "1"])
    assert json.loads(res.output)["tp"] == 0


def test_score_command_table(tmp_path: Path) -> None:
    runner, app, fs, gt = _cli(tmp_path)
    res = runner.invoke(app, [str(fs), str(gt)])
    assert res.exit_code == 0, res.output
    assert "precision" in res.output and "0.500" in res.output
    assert "1 of 1" in res.output  # decoys hit
    assert "sql-injection" in res.output


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"families": []},
        {"families": {"x": "not an object"}},
        {"families": {"x": {"cwes": 89}}},
        {"families": {"x": {"kinds": [1]}}},
        {"families": {"x": {"title": 3}}},
    ],
)
def test_a_family_table_of_the_wrong_shape_is_refused(data: object) -> None:
    with pytest.raises(ValueError):
        FamilyTable.from_json(data)
    # The packaged table reads: its CWEs are numbers, its kinds strings.
    assert default_families().of_cwe(89) == "sql-injection"
