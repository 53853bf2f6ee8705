"""The rules of a SARIF finding's fingerprint (report/sarif.py ``fingerprints``): GitHub code
scanning matches alerts across runs by it, so its form is a promise (docs/testing.md)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from deeprepo.base.finding import Finding
from deeprepo.report.sarif import FINGERPRINT_KEY, fingerprints

FILES = {"app/db.py": "import db\n\ndef q(u):\n    return db.execute(  'SELECT ' +\tu )\n"}


def finding(**kw: Any) -> Finding:
    base: dict[str, Any] = dict(
        file="app/db.py", start_line=4, end_line=4, kind="sql-injection", cwe="CWE-89",
        severity="high", title="SQL from a string", detail="d", fix="f",
    )  # fmt: skip
    return Finding(**{**base, **kw})


def v1(kind: str, file: str, anchor: str) -> str:
    return hashlib.sha256(f"{kind}\0{file}\0{anchor}".encode()).hexdigest()[:32]


def test_a_fingerprint_is_version_1_of_kind_file_and_line_text() -> None:
    """Version 1, pinned: SHA-256 of kind, file and the line's text with whitespace runs
    collapsed and the ends stripped, cut to 32 hex digits, then ':1'. Changing it would
    reopen every alert a user dismissed."""
    assert FINGERPRINT_KEY == "deeprepoFindingHash/v1"
    text = "text:return db.execute( 'SELECT ' + u )"
    assert fingerprints([finding()], FILES) == [v1("sql-injection", "app/db.py", text) + ":1"]


def test_the_first_and_last_lines_are_hashed_by_their_text() -> None:
    """Line 1 and the file's last line are lines of the file: their text is the anchor."""
    assert fingerprints([finding(start_line=1)], FILES) == [
        v1("sql-injection", "app/db.py", "text:import db") + ":1"
    ]
    last = FILES["app/db.py"].count("\n") + 1  # the empty line after the final newline
    assert fingerprints([finding(start_line=last)], FILES) == [
        v1("sql-injection", "app/db.py", "text:") + ":1"
    ]


@pytest.mark.parametrize("line", [0, -1, 6, 99])
def test_a_line_the_file_does_not_have_is_hashed_by_its_number(line: int) -> None:
    """A finding before line 1 or past the end is anchored on its number, not on a line
    counted from the other end."""
    assert fingerprints([finding(start_line=line)], FILES) == [
        v1("sql-injection", "app/db.py", f"line:{line}") + ":1"
    ]


def test_a_finding_on_a_missing_file_is_hashed_by_its_line_number() -> None:
    """A file the repository lacks: two findings in it differ by their line numbers."""
    a, b = fingerprints([finding(file="gone.py", start_line=3), finding(file="gone.py")], FILES)
    assert a == v1("sql-injection", "gone.py", "line:3") + ":1"
    assert b == v1("sql-injection", "gone.py", "line:4") + ":1"


def test_findings_with_the_same_hash_are_numbered_in_order() -> None:
    """The n-th finding with the same hash in a run ends in ':n'; others keep ':1'."""
    same = finding(title="again")
    other = finding(kind="xss")
    fps = fingerprints([finding(), other, same, same], FILES)
    digest = fps[0].split(":")[0]
    assert fps == [f"{digest}:1", fps[1], f"{digest}:2", f"{digest}:3"]
    assert fps[1].endswith(":1") and not fps[1].startswith(digest)
