"""The rules of which file content reached a worker (findings/coverage.py), one per test: the
line-length threshold, short files, JSON-escaped prompts and numbering prefixes
(docs/testing.md)."""

from __future__ import annotations

import json

import pytest

from deeprepo.findings.coverage import (
    CoverageIndex,
    covered_files,
    nontrivial_lines,
    prompt_lines,
)
from deeprepo.findings.line_keys import line_keys, views


def test_a_line_of_exactly_eight_characters_is_non_trivial() -> None:
    """Lines of 8 characters or more (stripped) count; 7 do not."""
    assert nontrivial_lines("  x = 1234  \nx = 123\n") == {"x = 1234"}


def test_a_short_file_with_blank_lines_is_covered_when_its_lines_were_sent() -> None:
    """A file of short lines is covered when every non-empty line reached a worker; its
    blank lines are not lines to send."""
    files = {"a.py": "a = 1\n\nb = 2\n"}
    assert covered_files(files, ["a = 1\nb = 2"]) == {"a.py"}
    assert CoverageIndex(files).fractions(prompt_lines(["a = 1\nb = 2"])) == {"a.py": 1.0}
    assert covered_files(files, ["a = 1"]) == set()


def test_prompt_lines_are_the_non_empty_ones() -> None:
    """The prompt-line set holds no empty line, however many blank lines prompts have."""
    lines = prompt_lines(["first line here\n\n   \n", "\n"])
    assert "" not in lines and "first line here" in lines


def test_a_prompt_with_three_escaped_newlines_is_read_unescaped() -> None:
    """A file embedded as one JSON string (three escaped newlines or more) is covered."""
    # The short first and last lines are trivial: the quotes around them do not matter.
    text = "a = 1\nvalue_two = 2\nvalue_three = 3\nb = 4"
    prompt = f"Audit this: {json.dumps(text)}"
    assert prompt.count("\\n") == 3
    assert covered_files({"a.py": text}, [prompt]) == {"a.py"}


def test_a_code_line_starting_with_a_number_counts_as_written_on_the_first_line() -> None:
    """A line that starts with a number is kept as written too, even as a prompt's first."""
    files = {"a.py": "1 + compute_total(x)\n"}
    assert covered_files(files, ["1 + compute_total(x)\nmore"]) == {"a.py"}


@pytest.mark.parametrize(
    ("escaped", "plain"),
    [
        ("a\\nb", ["a", "b"]),
        ("a\\tb", ["a b"]),
        ('say \\"hi\\"', ['say "hi"']),
        ("c:\\\\new", ["c:\\new"]),  # an escaped backslash before n is not a newline
        ("\\u00e9t\\u00e9", ["\u00e9t\u00e9"]),
    ],
)
def test_a_string_literal_is_read_with_each_escape_undone(escaped: str, plain: list[str]) -> None:
    """Each JSON/Python string escape is undone, an escaped backslash first; the literal's
    lines stand on lines of their own in the unwrapped view."""
    prompt = "\\n\\n\\n " + '"' + escaped + '"'
    unwrapped = views(prompt)[-1]
    keys = [k for k in line_keys(unwrapped) if k]
    assert keys[-len(plain) :] == plain


def test_a_key_loses_every_formatting_layer_and_nothing_else() -> None:
    """Numbering on either side, quotes, diff markers and wrapper tags go; the code stays."""
    assert line_keys("  12 | 34 | value") == ["value"]
    assert line_keys("  plain   code  ") == ["plain code"]
    assert line_keys("12 | ") == [""]
    assert line_keys('+<line n="3">x = f(y)  # 3</line>') == ["x = f(y)"]
    assert line_keys("> > &lt;b&gt; &amp;amp;") == ["<b> &"]
