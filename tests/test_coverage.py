"""Coverage: which files' content (not just their path) reached a worker."""

from __future__ import annotations

import json
import random

import pytest

from deeprepo.base.prompts import file_audit_prompt, number_lines, strip_line_number
from deeprepo.findings.coverage import (
    CoverageIndex,
    coverable_files,
    covered_files,
    prompt_lines,
    shown_line_numbers,
)
from deeprepo.findings.line_keys import line_keys, shown_number


def _code(name: str, n: int) -> str:
    return "\n".join(
        f"    result_{name}_{i} = compute_{name}(value_{i}, factor={i})" for i in range(n)
    )


CODEBASE = {
    "app/a.py": _code("a", 40),
    "app/b.py": _code("b", 40),
    "app/__init__.py": "",
    "app/blank.py": "\n   \n",
    "app/short.py": "x = 1\ny = 2\n",
}


def test_coverable_excludes_empty_files() -> None:
    assert coverable_files(CODEBASE) == {"app/a.py", "app/b.py", "app/short.py"}
    assert CoverageIndex(CODEBASE).coverable == coverable_files(CODEBASE)


def test_path_only_prompt_is_not_coverage() -> None:
    prompts = [
        "Audit app/a.py and app/b.py and app/short.py for bugs.",
        '<file path="app/a.py">\n</file>',
    ]
    assert covered_files(CODEBASE, prompts) == set()


def test_content_in_audit_prompt_is_covered() -> None:
    prompts = [file_audit_prompt("app/a.py", CODEBASE["app/a.py"])]
    assert covered_files(CODEBASE, prompts) == {"app/a.py"}


def test_raw_content_without_markup_is_covered() -> None:
    assert covered_files(CODEBASE, ["please review:\n" + CODEBASE["app/b.py"]]) == {"app/b.py"}


def test_file_split_across_prompts() -> None:
    lines = CODEBASE["app/a.py"].split("\n")
    first = file_audit_prompt("app/a.py", "\n".join(lines[:20]))
    second = file_audit_prompt("app/a.py", "\n".join(lines[20:]), start_line=21)
    assert covered_files(CODEBASE, [first, second]) == {"app/a.py"}
    # Half a file is not "read": 90% of its non-trivial lines are (36 of 40).
    assert covered_files(CODEBASE, [first]) == set()
    part = file_audit_prompt("app/a.py", "\n".join(lines[:35]))
    assert covered_files(CODEBASE, [part]) == set()
    most = file_audit_prompt("app/a.py", "\n".join(lines[:36]))
    assert covered_files(CODEBASE, [most]) == {"app/a.py"}
    assert covered_files(CODEBASE, [first], min_fraction=0.5) == {"app/a.py"}


def _styles(text: str) -> dict[str, str]:
    lines = text.split("\n")
    return {
        "audit prompt": file_audit_prompt("app/a.py", text),
        "N | ": number_lines(text, start=500),
        "N: ": "\n".join(f"{i}: {ln}" for i, ln in enumerate(lines, 1)),
        "N<tab>": "\n".join(f"{i}\t{ln}" for i, ln in enumerate(lines, 1)),
        "LN ": "\n".join(f"L{i} {ln}" for i, ln in enumerate(lines, 1)),
        "  N  ": "\n".join(f"  {i}  {ln}" for i, ln in enumerate(lines, 1)),
        "[N] ": "\n".join(f"[{i}] {ln}" for i, ln in enumerate(lines, 1)),
        "N. ": "\n".join(f"{i}. {ln}" for i, ln in enumerate(lines, 1)),
        "line N: ": "\n".join(f"line {i}: {ln}" for i, ln in enumerate(lines, 1)),
        "fenced": "### app/a.py\n```python\n" + text + "\n```",
        "quoted": "\n".join("> " + ln for ln in lines),
        "json string": json.dumps({"file": "app/a.py", "text": text}),
        "no header": "Say OK.\n" + text,
    }


@pytest.mark.parametrize("style", list(_styles("x")))
def test_content_counts_in_any_common_shape(style: str) -> None:
    assert covered_files(CODEBASE, [_styles(CODEBASE["app/a.py"])[style]]) == {"app/a.py"}


def test_a_line_that_starts_with_a_number_is_kept() -> None:
    codebase = {"t.py": "\n".join(f"{1000 + i} if flag_{i} else fallback_{i}" for i in range(20))}
    assert covered_files(codebase, [codebase["t.py"]]) == {"t.py"}
    assert covered_files(codebase, [number_lines(codebase["t.py"])]) == {"t.py"}
    assert line_keys("  12: x = compute(y)") == ["x = compute(y)"]
    assert shown_number("  12: x = compute(y)") == 12
    assert shown_number("x = compute(y)  # 12") == 12
    assert shown_number("x = 12") is None


def test_numbered_lines_are_stripped() -> None:
    numbered = number_lines(CODEBASE["app/b.py"], start=500)
    assert covered_files(CODEBASE, [numbered]) == {"app/b.py"}
    # A numbered line has the key of the line prompts.strip_line_number gives back.
    text = number_lines("a\n  b | c\n\n    12 | already\n1|x", start=7) + "\n 3 | y\nplain | z"
    stripped = "\n".join(strip_line_number(ln) for ln in text.split("\n"))
    assert line_keys(text) == line_keys(stripped)


def test_short_line_files_need_every_line() -> None:
    assert covered_files(CODEBASE, ["x = 1\n"]) == set()
    assert covered_files(CODEBASE, ["x = 1\n", "   y = 2"]) == {"app/short.py"}


def test_fractions_small_and_large_queries_agree() -> None:
    index = CoverageIndex(CODEBASE)
    half = "\n".join(CODEBASE["app/a.py"].split("\n")[:10])
    small = prompt_lines([half])
    assert index.fractions(small) == {"app/a.py": pytest.approx(0.25)}
    # A query as large as the codebase takes the per-file intersection path.
    big = small | prompt_lines([CODEBASE["app/b.py"]]) | {f"filler line {i}" for i in range(200)}
    assert index.fractions(big) == {"app/a.py": pytest.approx(0.25), "app/b.py": 1.0}


def test_shown_line_numbers_count_like_number_lines() -> None:
    text = "first line here\n\nthird line here\nfourth"
    assert shown_line_numbers(text, prompt_lines([number_lines(text)])) == {1, 3, 4}
    assert shown_line_numbers(text, {"third line here"}) == {3}


def test_300_files_in_300_prompts_are_all_covered() -> None:
    # The speed target (0.5 s) is benchmarks/bench_speed_targets.py's to measure.
    rng = random.Random(0)
    words = ["value", "self.items", "return", "config", "=", "(", ")", "request.args", "if", "None"]
    codebase = {
        f"pkg/mod{i}.py": "\n".join(
            "    " + " ".join(rng.choice(words) for _ in range(6)) for _ in range(200)
        )
        for i in range(300)
    }
    prompts = [file_audit_prompt(p, t) for p, t in codebase.items()]
    assert 8_000 < sum(map(len, prompts)) / len(prompts) < 12_000
    assert covered_files(codebase, prompts) == set(codebase)
