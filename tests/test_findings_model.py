import pytest

from deeprepo.base.finding import (
    Finding,
    dedupe,
    finding_from_dict,
    normalize_cwe,
    normalize_severity,
    sort_by_severity,
)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (89, "CWE-89"),
        ("cwe-89", "CWE-89"),
        ("CWE 798", "CWE-798"),
        ("CWE-079", "CWE-79"),
        (None, None),
        ("n/a", None),
        (True, None),
    ],
)
def test_normalize_cwe(raw: object, want: str | None) -> None:
    assert normalize_cwe(raw) == want


def test_normalize_severity() -> None:
    assert normalize_severity("HIGH") == "high"
    assert normalize_severity("warning") == "medium"
    assert normalize_severity(None) == "medium"


def test_finding_from_loose_dict() -> None:
    f = finding_from_dict(
        {"path": "./app/db.py", "line": "12-14", "end_line": 3, "cwe": 89, "severity": "Critical"}
    )
    assert f == Finding("app/db.py", 12, 12, "issue", "CWE-89", "critical", "issue")


def test_finding_without_file_is_rejected() -> None:
    with pytest.raises(ValueError):
        finding_from_dict({"line": 3})


def test_dedupe_and_sort() -> None:
    a = Finding("a.py", 3, 3, "x", "CWE-1", "low", "t")
    b = Finding("a.py", 3, 4, "y", "CWE-1", "high", "t2")
    c = Finding("b.py", 1, 1, "z", None, "critical", "t3")
    assert dedupe([a, b, c]) == [a, c]
    assert [f.file for f in sort_by_severity([a, c])] == ["b.py", "a.py"]
