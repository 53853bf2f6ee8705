"""The rules by which the oracle worker writes a finding (rl/env/oracle_text.py): its kind,
CWE and severity, its title, the quoted code and the reason in its detail, and its fix. The
same function writes true and false findings, so these rules hold for both. Each holds for
every draw, so each is checked over many seeds (docs/testing.md)."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from deeprepo.findings.families import CweFamily, FamilyTable, default_families
from deeprepo.rl.env.oracle_text import RenderedFinding, render_finding

CODE = "cursor.execute(query)"
# A class the family table knows but the templates do not, with no fix.
BARE = FamilyTable([CweFamily("made-up", "Made up weakness", frozenset({"CWE-1"}), ())])


def draws(
    family: str, code: str = CODE, n: int = 200, families: FamilyTable | None = None
) -> list[RenderedFinding]:
    table = families or default_families()
    return [render_finding(family, code, random.Random(s), families=table) for s in range(n)]


def test_without_the_tasks_own_cwes_a_finding_takes_its_classs_lowest_numbered_cwe() -> None:
    """A finding whose task names no CWE for its class carries the class's lowest-numbered
    CWE (CWE-89 for SQL injection, not CWE-564); a class with no CWE carries none."""
    table = default_families()
    for name, fam in table.families.items():
        lowest = min(fam.cwes, key=lambda c: int(c.removeprefix("CWE-")))
        assert {f["cwe"] for f in draws(name, n=5)} == {lowest}, name
    assert {f["cwe"] for f in draws("no-such-class", n=5)} == {None}


def test_a_class_with_templates_is_titled_in_several_ways() -> None:
    """A class with its own templates gets several titles, not one fixed label."""
    assert len({f["title"] for f in draws("sql-injection")}) > 2


@pytest.mark.parametrize(
    ("family", "families", "title"),
    [
        ("made-up", BARE, "Made up weakness"),  # the family table's title
        ("no-such-class", None, "No such class"),  # the class's name in words
    ],
)
def test_a_class_without_templates_is_titled_by_the_table_else_by_its_name(
    family: str, families: FamilyTable | None, title: str
) -> None:
    """A class without its own templates is titled with its family's title, or, unknown to
    the family table, with its name in words; its detail gives a generic reason."""
    found = draws(family, families=families, n=20)
    assert {f["title"] for f in found} == {title}
    assert all(f["detail"] for f in found)


def test_the_fix_is_the_familys_and_none_without_one() -> None:
    """The fix states the family's fix; a class whose family has no fix, or that no family
    holds, gets none."""
    fix = default_families().families["sql-injection"].fix
    assert all(fix in f["fix"] for f in draws("sql-injection", n=50))
    assert {f["fix"] for f in draws("made-up", families=BARE, n=50)} == {""}
    assert {f["fix"] for f in draws("no-such-class", n=50)} == {""}


@pytest.mark.parametrize(
    ("code", "quoted"),
    [
        ("call(a,   b)\t# note", "call(a, b) # note"),  # on one line, whitespace collapsed
        ("x" * 40, "x" * 40),  # forty characters: whole
        ("y" * 41, "y" * 37 + "..."),  # longer: cut to forty, ending in '...'
    ],
)
def test_the_detail_quotes_the_code_on_one_line_in_forty_characters(code: str, quoted: str) -> None:
    """When the detail quotes the flagged code, it is the code on one line with its
    whitespace collapsed, at most forty characters ('...' ending a cut)."""
    quotes = [re.findall(r"`([^`]*)`", f["detail"]) for f in draws("sql-injection", code, 60)]
    assert {q for found in quotes for q in found} == {quoted}


def test_a_reason_reads_the_same_opening_the_detail_or_after_the_code() -> None:
    """The detail states one of the class's reasons: capitalised when it opens the detail,
    as written when it follows the quoted code, the same words either way."""
    after, opening = set(), set()
    for f in draws("sql-injection", n=300):
        d = f["detail"]
        if m := re.match(r"(?:In )?`[^`]*`[:,] (.*)\.$", d):
            after.add(m.group(1))
        else:
            opening.add(re.split(r"[.;] ", d, maxsplit=1)[0].removesuffix("."))
    assert after and opening
    assert all(s[0].isupper() for s in opening), opening
    assert {s[0].lower() + s[1:] for s in opening} == after


@pytest.mark.parametrize(
    ("family", "levels", "usual"),
    [
        ("sql-injection", {"critical", "high", "medium"}, "high"),
        ("logic-error", {"high", "medium", "low"}, "medium"),
    ],
)
def test_severity_follows_the_classs_impact(family: str, levels: set[str], usual: str) -> None:
    """High-impact classes (injection, secrets, access control) are critical, high or medium,
    mostly high; the others high, medium or low, mostly medium."""
    counts = Counter(f["severity"] for f in draws(family, n=400))
    assert set(counts) == levels, counts
    assert 0.4 <= counts[usual] / 400 <= 0.6, counts
