"""The fast paths of coverage give what the straightforward ones give (decision 80's keys).

``line_keys`` and ``views`` remember whole texts, ``line_keys`` also single lines; two of the
patterns are spelled to fail fast (possessive blanks, a character set first); ``shown_in``
reads prompt by prompt. Each is pinned here to the plain form on the formats corpus and on
random prompts made of every layer a prompt builder adds.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from itertools import pairwise

import pytest
from test_coverage_formats import DEGRADED, FILES, HONEST

from deeprepo.findings import line_keys as lk
from deeprepo.findings.coverage import MIN_LINE_LENGTH, CoverageIndex, shown_in

# The patterns as they were first written: backtracking blanks, a lookbehind group first.
SLOW_LEFT_RE = re.compile(r"\n[ \t\f\v]*(?:" + lk._LAYER + r"[ \t\f\v]*)+")
SLOW_LIST_END_RES = tuple(
    re.compile(
        r"(?:(?<![\w\])])\[|,)\s*"
        + q
        + r"(?:[^"
        + q
        + r"\\\n]|\\.){"
        + str(MIN_LINE_LENGTH)
        + r",}"
        + q
        + r"(?:\s*,\s*"
        + q
        + q
        + r")*\s*\]"
    )
    for q in "\"'"
)

PIECES = [
    "    ", "\t", " ", "> ", ">", "+", "-", "12 | ", "7: ", "L3 ", "[4] ", "5. ", "6) ",
    "line 9: ", '<line n="2">', "</line>", "<file path='a.py'>", "</file>", "<![CDATA[",
    "]]>", "  # 12", "  // 3", " /* 4 */", '"', "'", ",", ", ", "[", "]", "\\n", "\\t",
    '\\"', "&amp;", "&lt;", "&#39;", "  ", "\f", "\v", "\r", "x",
]  # fmt: skip
CODE = ["value = compute(x)", "self.items", "return None", "config", "(", ")", "request.args"]
PIECES += CODE


def _random_prompt(rng: random.Random) -> str:
    lines = ["".join(rng.choices(PIECES, k=rng.randint(0, 7))) for _ in range(rng.randint(1, 40))]
    return rng.choice(["\n", "\r\n", "\n\n"]).join(lines)


def _quoted_prompt(rng: random.Random) -> str:
    """A prompt that wraps code lines in literals, so ``views`` has a second view to make."""
    q = rng.choice("\"'")
    code = [rng.choice(CODE) + " " + rng.choice(PIECES) for _ in range(rng.randint(1, 12))]
    items = [q + c.replace("\\", "\\\\").replace(q, "\\" + q) + q for c in code]
    # After a name or a bracket, ``[`` opens a subscript, not a list.
    opener = rng.choice(["\n[", " = [", "([", "x[", "][", ")[", "_["])
    return "Audit these lines:" + opener + rng.choice([", ", ",\n  "]).join(items) + "]"


def _corpus() -> list[str]:
    rng = random.Random(19)
    prompts = [p for make in HONEST.values() for p in make()]
    prompts += [p for make, _ in DEGRADED.values() for p in make()]
    prompts += list(FILES.values())
    prompts += [_random_prompt(rng) for _ in range(300)]
    prompts += [_quoted_prompt(rng) for _ in range(100)]
    return prompts


CORPUS = _corpus()


@pytest.fixture(autouse=True)
def fresh_memos(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with nothing remembered, so its first reading is worked out."""
    monkeypatch.setattr(lk, "_MEMO", {})
    monkeypatch.setattr(lk, "_KEYS_BY_TEXT", lk._TextMemo(lk._TEXT_MEMO_CHARS))
    monkeypatch.setattr(lk, "_VIEWS_BY_PROMPT", lk._TextMemo(lk._TEXT_MEMO_CHARS))


def _plain_keys(text: str) -> list[str]:
    """Every line worked out alone, nothing remembered."""
    return [lk._computed(line)[0] for line in lk.split_lines(text)]


def test_the_possessive_left_pattern_strips_what_the_backtracking_one_strips() -> None:
    for text in CORPUS:
        text = "\n" + text.replace("\r", "\n")
        assert lk._LEFT_RE.sub("\n", text) == SLOW_LEFT_RE.sub("\n", text)


def test_the_set_first_list_end_pattern_finds_what_the_lookbehind_one_finds() -> None:
    found = 0
    for text in CORPUS:
        for fast, slow in zip(lk._LIST_END_RES, SLOW_LIST_END_RES, strict=True):
            assert fast.findall(text) == slow.findall(text)
            found += bool(fast.search(text))
    assert found >= 50  # the corpus does hold lists of quoted lines


def test_remembered_keys_are_the_keys_worked_out_line_by_line() -> None:
    for text in CORPUS:
        plain = _plain_keys(text)
        assert lk.line_keys(text) == plain  # worked out
        assert lk.line_keys(text) == plain  # the whole text remembered
    lk._KEYS_BY_TEXT.clear()
    for text in CORPUS:
        assert lk.line_keys(text) == _plain_keys(text)  # line by line, remembered


def test_a_remembered_answer_is_a_copy_the_caller_may_change() -> None:
    text = CORPUS[0]
    keys = lk.line_keys(text)
    keys.append("changed")
    assert lk.line_keys(text) == _plain_keys(text)
    shown = lk.views(CORPUS[-1])
    assert len(shown) == 2
    shown.append("changed")
    assert len(lk.views(CORPUS[-1])) == 2


def test_remembered_views_are_the_views_worked_out() -> None:
    for prompt in CORPUS:
        assert lk.views(prompt) == lk._views(prompt)
        assert lk.views(prompt) == lk._views(prompt)
    assert sum(len(lk.views(p)) > 1 for p in CORPUS) >= 80


def test_the_memos_start_over_past_their_bound() -> None:
    memo = lk._TextMemo(10)
    memo.put("abcdef", ("abcdef",))
    memo.put("ghijkl", ("ghijkl",))  # 12 characters: the first goes
    assert memo.get("abcdef") is None
    assert memo.get("ghijkl") == ("ghijkl",)
    memo.put("x" * 11, ("x",))  # larger than the bound: never held
    assert memo.get("x" * 11) is None
    assert memo.get("ghijkl") == ("ghijkl",)


def _shown_joined(prompts: list[str]) -> tuple[frozenset[str], Counter[tuple[str, str]]]:
    """``shown_in`` as first written: every view joined by a barrier line, keyed at once."""
    barrier = "\n" + "\0" * MIN_LINE_LENGTH + "\n"
    texts = [view for prompt in prompts for view in lk._views(prompt)]
    keys = _plain_keys(barrier.join(texts))
    seq = [k for k in keys if len(k) >= MIN_LINE_LENGTH]
    return frozenset(keys) - {""}, Counter(pairwise(seq))


def test_shown_prompt_by_prompt_is_shown_joined() -> None:
    rng = random.Random(80)
    index = CoverageIndex(FILES)
    for _ in range(60):
        prompts = rng.sample(CORPUS, rng.randint(1, 6))
        shown = shown_in(prompts)
        lines, pairs = _shown_joined(prompts)
        assert shown.lines == lines
        assert shown.pairs == pairs
        assert index.shares(shown) == index.shares(type(shown)(lines, pairs))
