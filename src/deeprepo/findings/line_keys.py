"""The one normal form of a line of code, on both sides of coverage (decision 80).

A prompt carries a file's lines in some format; coverage, the Episode's audit figure and the
oracle's reading all compare *keys*: a line with every formatting layer a prompt builder
adds taken off. :func:`line_keys` computes them for a whole text in a few regex passes:

* CRLF and lone CR become LF; runs of blanks (tabs or spaces) become one space;
* on the left, repeated until none is left: blanks, block-quote marks (``>``), diff markers
  (``+``, ``-``), prompt wrapper tags (``<file path=...>``, ``<line n="3">``,
  ``<![CDATA[``) and numbering in any common style (``12 | ``, ``12: ``, ``12<tab>``,
  ``L12 ``, ``[12] ``, ``12. ``, ``12) ``, ``line 12: ``, ``  12  ``);
* on the right, repeated: numbering after a comment or bar mark (``  # 12``, ``  // 12``,
  ``  -- 12``, ``  ; 12``, ``  | 12``, ``/* 12 */``) and the wrapper's closing tags;
* XML/HTML entities decoded (to a fixpoint: a line escaped twice is still the line).

A file's own lines go through the same function, so a code line that happens to start with
a number, a ``-`` or a ``>`` loses it on both sides and still matches: no format needs the
code to look a particular way. Two lines that differ only in such a layer share a key;
coverage compares line *pairs*, so that costs nothing.

JSON or Python string wrapping (a file as one escaped string, a list of quoted lines, a
``{"path": ..., "content": ...}`` object) is undone by :func:`views`: a second view of the
prompt made of its string literals, decoded, one after the other.

Keys are remembered by line (bounded): prompts repeat a codebase's lines, so most are looked
up rather than computed.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from itertools import compress, count, repeat
from operator import is_

__all__ = [
    "MIN_LINE_LENGTH",
    "line_keys",
    "outside_literals",
    "shown_number",
    "split_lines",
    "views",
]

#: Keys at least this long are *non-trivial*: the lines coverage counts.
MIN_LINE_LENGTH = 8

_TAGS = r"(?:file|line|ln|l|code|source|src|content|snippet|chunk|text|document|doc|lines|pre)"
_NUMBER = r"\[?(?:[Ll](?:ine)?[ \t]?)?\d{1,7}\]?"
# Only lines with a layer match (indentation alone is left to ``str.strip``). Anchored on "\n"
# (callers prepend one): twice as fast as ``^`` with MULTILINE.
_LAYER = (
    r"(?:>|[+-]|<"
    + _TAGS
    + r"\b[^<>\n]*>|<!\[CDATA\[|"
    + _NUMBER
    + r"(?:[ \t]*[|:.)\]][ \t]?|[ \t]))"
)
# Possessive blanks: no layer starts with one, so giving them back one at a time to retry the
# layers (every indented line that has none) only costs: a quarter of the time on code.
_LEFT_RE = re.compile(r"\n[ \t\f\v]*+(?:" + _LAYER + r"[ \t\f\v]*+)+")
# Applied to the lines that end in a digit, ``>`` or ``/`` only: a pattern tried at every
# position of a prompt costs several times more than the whole key.
_SUFFIX = (
    r"(?:(?:#|//|--|;|\|)[ \t]*(?:[Ll](?:ine)?[ \t]?)?\d{1,7}(?:[ \t]*\*/)?"
    r"|/\*[ \t]*(?:[Ll](?:ine)?[ \t]?)?\d{1,7}[ \t]*\*/|</" + _TAGS + r">|\]\]>)"
)
_RIGHT_RE = re.compile(r"(?:[ \t]*" + _SUFFIX + r")+[ \t]*$")
_SUFFIX_ENDS = tuple("0123456789>/")
_SUFFIX_MARKS = frozenset("#/-;|<]")  # a suffix has one of them
_ENTITY_RE = re.compile(r"&(?:[A-Za-z]{2,8}|#\d{1,7}|#[xX][0-9A-Fa-f]{1,6});")
_LEFT_NUMBER_RE = re.compile(
    r"(?:[ \t>+-]|<" + _TAGS + r"\b[^<>\n]*>|<!\[CDATA\[)*\[?(?:[Ll](?:ine)?[ \t]?)?(\d{1,7})\]?"
    r"(?:[ \t]*[|:.)\]][ \t]?|[ \t])"
)
_RIGHT_NUMBER_RE = re.compile(
    r"[ \t](?:#|//|--|;|\||/\*)[ \t]*(?:[Ll](?:ine)?[ \t]?)?(\d{1,7})(?:[ \t]*\*/)?"
    r"(?:</" + _TAGS + r">|[ \t])*$"
)


def split_lines(text: str) -> list[str]:
    """``text``'s lines, CRLF and lone CR read as line ends (as :func:`line_keys` counts)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


# Keys already computed, by line: prompts repeat a codebase's lines (a file in slices, every
# rollout of a task the same files), so most lines are looked up, not computed. Bounded: it
# starts over past _MEMO_LINES. Dict reads and writes are atomic, so threads may share it.
_MEMO: dict[str, str] = {}
_MEMO_LINES = 100_000


class _TextMemo:
    """Results by whole text, bounded by the characters of the texts held (it starts over
    past ``chars``). The same prompt is read several times in a rollout (the Episode's audit
    figure, the reward's per-prompt dispatch figures, the oracle's reading) and an index is
    built again over the same files: a whole text is looked up for the price of hashing it,
    where the line memo still splits it and looks up every line. Dict reads and writes are
    atomic, so threads may share it; the count is only a bound."""

    def __init__(self, chars: int) -> None:
        self._held: dict[str, tuple[str, ...]] = {}
        self._chars = 0
        self._limit = chars

    def get(self, text: str) -> tuple[str, ...] | None:
        return self._held.get(text)

    def put(self, text: str, value: tuple[str, ...]) -> None:
        if len(text) > self._limit:
            return
        if self._chars + len(text) > self._limit:
            self._held.clear()
            self._chars = 0
        self._held[text] = value
        self._chars += len(text)

    def clear(self) -> None:
        self._held.clear()
        self._chars = 0

    def through(self, text: str, work: Callable[[str], list[str]]) -> list[str]:
        """``work(text)``, remembered: a fresh list each call (callers may change it)."""
        known = self._held.get(text)
        if known is not None:
            return list(known)
        out = work(text)
        self.put(text, tuple(out))
        return out


_TEXT_MEMO_CHARS = 8_000_000  # per memo: a few MB of prompts, with their keys
_KEYS_BY_TEXT = _TextMemo(_TEXT_MEMO_CHARS)
_VIEWS_BY_PROMPT = _TextMemo(_TEXT_MEMO_CHARS)


def line_keys(text: str) -> list[str]:
    """The key of every line of ``text`` (one per :func:`split_lines` line; ``""`` for a
    line that is only formatting)."""
    return _KEYS_BY_TEXT.through(text, _keys_by_line)


def _keys_by_line(text: str) -> list[str]:
    """:func:`line_keys` of ``text`` through the line memo."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    known = list(map(_MEMO.get, lines))
    missing = known.count(None)
    if not missing:
        return known  # type: ignore[return-value]  # no None left
    fresh: Iterable[tuple[str, str]]
    if missing * 2 > len(lines):  # mostly new (a first reading): the whole text at once
        keys = _computed(text)
        fresh = zip(lines, keys, strict=True)
    else:
        todo = list(compress(lines, map(is_, known, repeat(None))))
        computed = dict(zip(todo, _computed("\n".join(todo)), strict=True))
        keys = list(map(computed.get, lines, known))  # type: ignore[arg-type]
        fresh = computed.items()
    if len(_MEMO) + missing > _MEMO_LINES:
        _MEMO.clear()
    _MEMO.update(fresh)
    return keys


def _computed(text: str) -> list[str]:
    """:func:`line_keys` of ``text``, worked out."""
    keys = list(map(str.strip, _LEFT_RE.sub("\n", "\n" + text)[1:].split("\n")))
    # The rest, on the few lines that need it, found by C-level maps: a Python expression per
    # line would double the time of the whole.
    todo = set(compress(count(), map(str.endswith, keys, repeat(_SUFFIX_ENDS))))
    stripped = "\n".join(keys)  # indentation gone: a double space left is inside a line
    for mark in ("  ", "\t", "\f", "\v", "&"):
        if mark in stripped:
            todo.update(compress(count(), map(str.__contains__, keys, repeat(mark))))
    for i in todo:
        keys[i] = _finish(keys[i])
    return keys


def _finish(key: str) -> str:
    """A key with the right layers off, entities decoded and blanks made one space."""
    key = " ".join(key.split())
    if key.endswith(_SUFFIX_ENDS) and not _SUFFIX_MARKS.isdisjoint(key):
        key = _RIGHT_RE.sub("", key).rstrip()
    if "&" in key and _ENTITY_RE.search(key):
        return _decoded(key)
    return key


def _decoded(key: str) -> str:
    for _ in range(3):
        plain = html.unescape(key).replace("\n", " ")
        if plain == key:
            break
        key = plain
    return line_keys(key)[0]


def shown_number(raw: str) -> int | None:
    """The line number a prompt line shows, on the left or on the right, if any."""
    flat = raw.rstrip()
    m = _LEFT_NUMBER_RE.match(flat) or _RIGHT_NUMBER_RE.search(flat)
    return int(m.group(1)) if m else None


# String literals of one line each: JSON's and Python's double-quoted, Python's single-quoted.
_LITERAL_RES = (
    re.compile(r'"((?:[^"\\\n]|\\.)*)"'),
    re.compile(r"'((?:[^'\\\n]|\\.)*)'"),
)
# Literals in a row, as a list of code lines has them (``"a line", "b",`` or one a line): the
# first at least a short line long, the second an item (a comma or ``]`` after it, not a key's
# colon), so a JSON example in an instruction does not count.
_IN_A_ROW_RES = tuple(
    re.compile(
        q
        + r"(?<=[^"
        + q
        + r"\\\n]{"
        + str(MIN_LINE_LENGTH)
        + r"}"
        + q
        + r") ?,\s*"
        + q
        + r"(?=(?:[^"
        + q
        + r"\\\n]|\\.)*"
        + q
        + r"\s*[,\]])"
    )
    for q in "\"'"
)
# A long literal closing a list: a list of lines, however short (an opening bracket after a
# name or a closing bracket is a subscript, ``environ["SECRET_KEY"]``, not a list). The
# pattern opens with a character set, which the engine skips to in C; a group with a
# lookbehind first is tried at every position of the prompt (a quarter of a millisecond
# per 10 KB prompt).
_LIST_END_RES = tuple(
    re.compile(
        r"[\[,](?<![\w\])]\[)\s*"
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
_CLOSES_RE = {q: re.compile(q + r"\s*\]") for q in "\"'"}
# A literal that ends in an escaped newline after some content: a short file as one string.
_ENDS_ESCAPED_RE = re.compile(r"""\\n["'](?:(?<=[^"'\\\s]\\n["'])|(?<=\\["']\\n["']))""")
_ESCAPE_RE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "", "b": "", "f": "", "/": "/"}
# A prompt carrying a file as escaped strings holds many of either.
_WRAPPED_SIGNS = 3


def _unescape(m: re.Match[str]) -> str:
    code = m.group(1)
    if len(code) == 5:
        return chr(int(code[1:], 16))
    return _ESCAPES.get(code, code)


def _decoded_literal(body: str) -> str:
    return _ESCAPE_RE.sub(_unescape, body) if "\\" in body else body


def views(prompt: str) -> list[str]:
    """The texts a prompt shows code in: the prompt as written, and for a prompt that wraps
    code in string literals (three escaped newlines and half as many lines, a literal ending
    in one, three literals in a row, or a long one closing a list), each quoting style's
    literals decoded, one after the other (a list of lines is then the file's lines in a row,
    and a file as one string its lines, not joined to the wrapper around them)."""
    return _VIEWS_BY_PROMPT.through(prompt, _views)


def _views(prompt: str) -> list[str]:
    """:func:`views`, worked out."""
    out = [prompt]
    # ``in`` first: it stops at the first hit, where a count reads the whole prompt.
    # Code that uses "\\n" in its strings has a few escapes among many lines; a wrapped file,
    # as many escapes as lines.
    escaped = "\\n" in prompt and (
        ((n := prompt.count("\\n")) >= _WRAPPED_SIGNS and 2 * n >= prompt.count("\n"))
        or bool(('\\n"' in prompt or "\\n'" in prompt) and _ENDS_ESCAPED_RE.search(prompt))
    )
    for q, literal_re, row_re, end_re in zip(
        "\"'", _LITERAL_RES, _IN_A_ROW_RES, _LIST_END_RES, strict=True
    ):
        # Every sign below holds the quote: one memchr scan spares three of two characters.
        if not escaped and q not in prompt:
            continue
        # Counting first (in C) spares the patterns' scans of the prompts that have no rows.
        rows = q + "," in prompt and prompt.count(q + ",") >= _WRAPPED_SIGNS
        listed = q + "]" in prompt or (q + "\n" in prompt and _CLOSES_RE[q].search(prompt))
        if (
            escaped
            or (rows and len(row_re.findall(prompt)) >= _WRAPPED_SIGNS)
            or (listed and end_re.search(prompt))
        ):
            literals = literal_re.findall(prompt)
            if literals:
                out.append("\n".join(map(_decoded_literal, literals)))
    return out


def outside_literals(prompt: str) -> str:
    """``prompt`` without its string literals: the instruction around code it wraps in them."""
    for literal_re in _LITERAL_RES:
        prompt = literal_re.sub("", prompt)
    return prompt
