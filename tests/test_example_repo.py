"""The bundled example repository and its ground truth agree with each other."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
REPO = EXAMPLES / "vulnapi"
GROUND_TRUTH = EXAMPLES / "vulnapi.ground_truth.json"
KEYS = {
    "id",
    "file",
    "start_line",
    "end_line",
    "cwe",
    "acceptable_cwes",
    "kind",
    "severity",
    "description",
    "vulnerable",
}
FSTRING_OR_FORMAT = re.compile(r"""\bf["']|["']\s*%\s*[\w(]|\.format\(|["']\s*\+\s*\w""")


def _entries() -> list[dict[str, Any]]:
    data = json.loads(GROUND_TRUTH.read_text())
    assert isinstance(data, list)
    return data


def _lines(entry: dict[str, Any]) -> str:
    text = (REPO / entry["file"]).read_text().split("\n")
    return "\n".join(text[entry["start_line"] - 1 : entry["end_line"]])


def _files() -> list[Path]:
    return sorted(p for p in REPO.rglob("*") if p.is_file())


def test_repository_has_the_expected_shape() -> None:
    files = [p.relative_to(REPO).as_posix() for p in _files()]
    assert 8 <= len(files) <= 15
    for required in ("README.md", "requirements.txt"):
        assert required in files
    py = [f for f in files if f.endswith(".py")]
    assert len(py) >= 8
    assert any("/routes/" in f for f in py)
    assert any(f.endswith(".html") for f in files)


@pytest.mark.parametrize("path", [p for p in _files() if p.suffix == ".py"], ids=lambda p: p.name)
def test_every_python_file_parses(path: Path) -> None:
    ast.parse(path.read_text(), filename=str(path))


def test_ground_truth_entries_are_well_formed() -> None:
    entries = _entries()
    assert len({e["id"] for e in entries}) == len(entries)
    for e in entries:
        assert set(e) == KEYS, e["id"]
        path = REPO / e["file"]
        assert path.is_file(), f"{e['id']}: {e['file']} does not exist"
        assert not Path(e["file"]).is_absolute() and ".." not in Path(e["file"]).parts
        n_lines = len(path.read_text().split("\n"))
        assert 1 <= e["start_line"] <= e["end_line"] <= n_lines, e["id"]
        assert re.fullmatch(r"CWE-\d+", e["cwe"]), e["id"]
        assert e["cwe"] in e["acceptable_cwes"], e["id"]
        assert isinstance(e["vulnerable"], bool)
        assert e["description"].strip()


def test_ground_truth_has_five_bugs_and_two_decoys() -> None:
    entries = _entries()
    vulnerable = [e for e in entries if e["vulnerable"]]
    decoys = [e for e in entries if not e["vulnerable"]]
    assert len(vulnerable) == 5 and len(decoys) == 2
    by_cwe = {e["cwe"] for e in vulnerable}
    assert by_cwe == {"CWE-89", "CWE-916", "CWE-798", "CWE-79", "CWE-78"}
    assert {"CWE-327", "CWE-328"} <= set(
        next(e for e in vulnerable if e["cwe"] == "CWE-916")["acceptable_cwes"]
    )
    assert {e["cwe"] for e in decoys} == {"CWE-89", "CWE-798"}


def _by_kind(kind: str, vulnerable: bool) -> dict[str, Any]:
    (entry,) = [e for e in _entries() if e["kind"] == kind and e["vulnerable"] is vulnerable]
    return entry


def test_sql_injection_lines_build_the_query_from_a_string_and_execute_it() -> None:
    code = _lines(_by_kind("sql-injection", True))
    assert "execute(" in code
    assert FSTRING_OR_FORMAT.search(code)


def test_parameterised_decoy_binds_its_value() -> None:
    code = _lines(_by_kind("sql-injection", False))
    assert "execute(" in code and "?" in code
    assert re.search(r",\s*\(\w+,\)\)", code), "the value goes in as a bound parameter"
    assert not FSTRING_OR_FORMAT.search(code)


def test_password_hash_lines_use_md5_on_the_password() -> None:
    code = _lines(_by_kind("weak-password-hash", True))
    assert "hashlib.md5(" in code and "password" in code


def test_hardcoded_secret_lines_assign_a_literal() -> None:
    code = _lines(_by_kind("hardcoded-secret", True))
    assert re.search(r"\b\w*(SECRET|KEY|TOKEN)\w*\s*=\s*\"[^\"]{16,}\"", code)


def test_secret_decoy_reads_the_environment() -> None:
    code = _lines(_by_kind("hardcoded-secret", False))
    assert "os.environ" in code or "os.getenv" in code
    assert not re.search(r"=\s*[\"']", code)


def test_xss_lines_wrap_interpolated_input_in_markup() -> None:
    code = _lines(_by_kind("xss", True))
    assert "Markup(" in code or "render_template_string(" in code
    assert re.search(r"\bf['\"].*<\w+", code), "HTML built with an f-string"


def test_command_injection_lines_run_a_shell_on_a_formatted_command() -> None:
    code = _lines(_by_kind("command-injection", True))
    assert "shell=True" in code or "os.system(" in code
    assert FSTRING_OR_FORMAT.search(code)


def test_command_injection_value_comes_from_the_request() -> None:
    entry = _by_kind("command-injection", True)
    text = (REPO / entry["file"]).read_text().split("\n")
    before = "\n".join(text[max(0, entry["start_line"] - 6) : entry["start_line"]])
    assert "require_json(" in before or "request." in before


def _comments(path: Path) -> list[str]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT]


def test_no_comment_points_at_a_planted_bug() -> None:
    telltale = re.compile(
        r"bug|vuln|inject|xss|insecure|unsafe|decoy|todo|fixme|cwe|md5|hardcod", re.IGNORECASE
    )
    for path in (p for p in _files() if p.suffix == ".py"):
        for comment in _comments(path):
            assert not telltale.search(comment), f"{path}: {comment}"
