"""Which files' *content* reached a sub-LLM (DESIGN §7, decision 3).

A file is covered when at least ``min_fraction`` (default 0.9) of its distinct non-trivial
lines (stripped, at least :data:`MIN_LINE_LENGTH` characters) appear as lines of the prompts
sent to workers, in whatever shape the prompt carries them: bare, fenced, block-quoted
(``> ``), or numbered in any common style (``'   12 | '`` of the audit prompt, ``12: ``,
``12\t``, ``L12 ``, ``  12  ``, ``[12] ``, ``12. ``), or JSON-escaped inside one string
(``json.dumps(text)``). Every prompt line counts both as written and with such a prefix
removed, so a code line that happens to start with a number is never lost.
Naming a path is not coverage; splitting a file across several prompts is. A file whose
lines are all short is covered when every one of its non-empty lines appears. Empty files
are never coverable and stay out of the denominator (:func:`coverable_files`).

Everything is set arithmetic on one set of prompt lines, so 300 files against 300
prompts of 10 KB takes a few milliseconds.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

MIN_LINE_LENGTH = 8
DEFAULT_MIN_FRACTION = 0.9
# The prefix ``prompts.strip_line_number`` removes, matched on every line of a whole prompt in
# one pass: per-line calls cost ~0.1 s for 3 MB of prompts. A test pins the two together.
# Anchored on "\n" rather than ``^`` with MULTILINE: twice as fast (callers prepend "\n").
_NUMBER_PREFIXES_RE = re.compile(r"\n *\d+ \| ?")
# Any common numbering or quoting before a line, matched the same way (one pass per prompt).
_ANY_PREFIX = r"[ \t>]*(?:\[?(?:[Ll](?:ine)? ?)?\d{1,7}\]?(?:[ \t]*[|:.)\]][ \t]?|\t| +))?"
_ANY_PREFIXES_RE = re.compile(r"\n" + _ANY_PREFIX)
_ANY_PREFIX_RE = re.compile(_ANY_PREFIX)
# Lines whose text as written differs from their prefix-stripped text: only these need
# adding both ways (a code line that starts with a number, a quote mark or a bracket).
_PREFIX_LIKE_RE = re.compile(r"\n[ \t]*((?:[>\[\d]|[Ll](?:ine)? ?\d)[^\n]*)")
# A prompt carrying a file as one JSON-escaped string holds many of these.
_ESCAPED_NEWLINES = 3


def _stripped_lines(text: str) -> set[str]:
    out = set(map(str.strip, text.splitlines()))
    out.discard("")
    return out


def nontrivial_lines(text: str) -> frozenset[str]:
    """Distinct stripped lines of at least :data:`MIN_LINE_LENGTH` characters."""
    return frozenset(s for s in _stripped_lines(text) if len(s) >= MIN_LINE_LENGTH)


def prompt_lines(prompts: Iterable[str]) -> set[str]:
    """Every non-empty stripped line of the prompts, as written and with any numbering or
    quoting prefix removed (see the module docstring)."""
    out: set[str] = set()
    for prompt in prompts:
        _add_lines(out, prompt)
        if prompt.count("\\n") >= _ESCAPED_NEWLINES:
            _add_lines(out, unescape(prompt))
    out.discard("")
    return out


def _add_lines(out: set[str], text: str) -> None:
    out.update(map(str.strip, _ANY_PREFIXES_RE.sub("\n", "\n" + text).splitlines()))
    out.update(map(str.strip, _PREFIX_LIKE_RE.findall("\n" + text)))


def unescape(text: str) -> str:
    """Undo the JSON/Python string escapes a file's text gets when a prompt embeds it as one
    quoted string (``\\n``, ``\\t``, ``\\"``, ``\\\\``)."""
    return (
        text.replace("\\\\", "\0")
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace('\\"', '"')
        .replace("\\'", "'")
        .replace("\0", "\\")
    )


def line_variants(line: str) -> tuple[str, ...]:
    """One prompt line's stripped text, as written and without a numbering prefix (the
    per-line form of :func:`prompt_lines`)."""
    s = line.strip()
    bare = _ANY_PREFIX_RE.sub("", line, count=1).strip()
    return (s,) if bare == s or not bare else (s, bare)


def line_number_prefix(line: str) -> int | None:
    """The line number a prompt line is prefixed with (any common style), if any."""
    m = _NUMBER_RE.match(line)
    return int(m.group(1)) if m else None


_NUMBER_RE = re.compile(r"[ \t>]*\[?(?:[Ll](?:ine)? ?)?(\d{1,7})\]?(?:[ \t]*[|:.)\]][ \t]?|\t| +)")


def strip_numbering(text: str) -> str:
    """``prompts.strip_line_number`` applied to every line of ``text`` at once."""
    return _NUMBER_PREFIXES_RE.sub("\n", "\n" + text)[1:]


def coverable_files(codebase: Mapping[str, str]) -> set[str]:
    """Files that can be covered at all: those with non-whitespace content."""
    return {path for path, text in codebase.items() if text.strip()}


class CoverageIndex:
    """Per-file line sets of a codebase, built once and queried with prompt-line sets."""

    def __init__(self, codebase: Mapping[str, str]) -> None:
        self._files: dict[str, frozenset[str]] = {}  # path -> non-trivial lines
        self._short: dict[
            str, frozenset[str]
        ] = {}  # path -> all lines, for files without long ones
        self._by_line_cache: dict[str, list[str]] | None = None
        for path, text in codebase.items():
            lines = nontrivial_lines(text)
            if lines:
                self._files[path] = lines
            elif text.strip():
                self._short[path] = frozenset(_stripped_lines(text))
        self._total_lines = sum(map(len, self._files.values()))

    @property
    def _by_line(self) -> dict[str, list[str]]:
        """line -> files holding it; built on first use (only small queries need it)."""
        if self._by_line_cache is None:
            index: dict[str, list[str]] = defaultdict(list)
            for path, lines in self._files.items():
                for ln in lines:
                    index[ln].append(path)
            self._by_line_cache = dict(index)
        return self._by_line_cache

    @property
    def coverable(self) -> set[str]:
        return set(self._files) | set(self._short)

    def fractions(self, lines: set[str]) -> dict[str, float]:
        """Share of each file's non-trivial lines present in ``lines`` (files above 0 only)."""
        counts: dict[str, int] = defaultdict(int)
        # A prompt or two: walk its lines through the inverted index; many: intersect per file.
        if len(lines) * 4 < self._total_lines:
            for ln in lines:
                for path in self._by_line.get(ln, ()):
                    counts[path] += 1
        else:
            for path, flines in self._files.items():
                n = len(flines & lines)
                if n:
                    counts[path] = n
        out = {path: n / len(self._files[path]) for path, n in counts.items()}
        for path, short in self._short.items():
            if short <= lines:
                out[path] = 1.0
        return out

    def covered(
        self, prompts: Iterable[str], min_fraction: float = DEFAULT_MIN_FRACTION
    ) -> set[str]:
        """Files covered by these prompts (see the module docstring)."""
        return self.covered_by_lines(prompt_lines(prompts), min_fraction)

    def covered_by_lines(
        self, lines: set[str], min_fraction: float = DEFAULT_MIN_FRACTION
    ) -> set[str]:
        return {path for path, frac in self.fractions(lines).items() if frac >= min_fraction}


def covered_files(
    codebase: Mapping[str, str], prompts: Iterable[str], min_fraction: float = DEFAULT_MIN_FRACTION
) -> set[str]:
    """Files of ``codebase`` whose content reached a worker through ``prompts``."""
    return CoverageIndex(codebase).covered(prompts, min_fraction)


def shown_line_numbers(text: str, lines: set[str]) -> set[int]:
    """1-based numbers (counted as ``prompts.number_lines`` does) of the lines of ``text``
    whose stripped content is in ``lines``."""
    return {i for i, ln in enumerate(text.split("\n"), 1) if (s := ln.strip()) and s in lines}
