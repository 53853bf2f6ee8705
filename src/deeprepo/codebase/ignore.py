"""``.gitignore`` rules compiled to regular expressions that cannot backtrack catastrophically.

A glob such as ``*a*a*a*a*a*a*a*a*a*a*b`` turned into ``[^/]*a[^/]*a…b`` makes a backtracking
engine (Python's ``re``) try every way of splitting a long name: a ten-star line and a
4,000-character file name hung the loader. Here every rule compiles to a regex whose only
choice points are cheap and bounded:

* A segment glob (between slashes) is split at its stars (a run of stars is one star) into
  fixed-width chunks. The middle chunks are found **leftmost and committed to** inside atomic
  groups, ``(?>[^/]*?chunk)``: the earliest place a chunk fits always leaves the most room for
  the rest, so committing loses no match and the engine never comes back. Only the last star
  backtracks, and the ``/`` that must follow the segment pins where it ends.
* ``**`` runs over whole segments. The chunks of segments between two ``**`` are found the
  same way (leftmost, atomic); only the last ``**`` backtracks, over segment boundaries.

Matching is therefore polynomial (about path length × pattern length per rule), never
exponential. Rules of one segment glob and no inner slash (``*.log``, ``build/``) match at
any depth, so they are matched against the path's last segment alone; a combined regex of
those rules (on the last segment) and one of the rest (on the path) screen each path first,
so a path that no rule matches (most of them) costs two regex calls.

Semantics are git's (checked against ``git ls-files`` in the tests): blank lines and ``#``
comments, ``\\`` escapes, trailing spaces, ``!`` negation, a leading or middle ``/`` anchoring
the rule to its file's directory, a trailing ``/`` for directories only, ``*``, ``?``,
``[...]`` classes (``!``/``^`` negation, ranges, POSIX classes; never matching ``/``), and
``**`` leading, middle and trailing (``dir/**`` is everything inside ``dir``, not ``dir``).
The last matching rule decides. A file inside an ignored directory cannot be re-included:
the walk never enters an ignored directory (``pathspec``, used before, matched parents itself,
let a file's own rule beat its ignored parent's, and let ``[!a]`` match ``/``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["IgnoreRules", "InvalidPattern"]

_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}

_SEGMENT = "[^/]*/"  # one whole segment and its slash (a path is matched as path + "/")


class InvalidPattern(ValueError):
    """A line of an ignore file that is not a valid pattern (e.g. a reversed range)."""


class _Rule(NamedTuple):
    regex: re.Pattern[str]
    ignore: bool  # False for a negated (``!``) rule
    dir_only: bool
    by_name: bool  # matched against the last segment alone (see _parse)


class IgnoreRules:
    """The rules of one ignore file; :meth:`match` says what they decide for a path."""

    def __init__(self, lines: Iterable[str]) -> None:
        rules: list[_Rule] = []
        sources: dict[bool, list[str]] = {False: [], True: []}  # by_name -> regex sources
        #: (line number, text, why) of each line that is not a valid pattern; it is skipped.
        self.invalid: list[tuple[int, str, str]] = []
        for number, line in enumerate(lines, 1):
            try:
                parsed = _parse(line)
            except (InvalidPattern, re.error) as exc:
                self.invalid.append((number, line, str(exc)))
                continue
            if parsed is not None:
                source, ignore, dir_only, by_name = parsed
                rules.append(_Rule(re.compile(source), ignore, dir_only, by_name))
                sources[by_name].append(source)
        self._rules = tuple(rules)
        # One call each rules out every rule for the many paths that none names.
        self._name_screen = _screen(sources[True])
        self._path_screen = _screen(sources[False])

    def __len__(self) -> int:
        return len(self._rules)

    def match(self, path: str, is_dir: bool) -> bool | None:
        """``True`` if a rule ignores ``path`` (relative, ``/``-separated), ``False`` if a
        negated rule re-includes it, ``None`` if no rule names it. The last matching rule
        wins. Parent directories are not looked at: the walk never enters an ignored one."""
        full = path + "/"
        name = full[path.rfind("/") + 1 :]  # the last segment and its slash
        if (self._name_screen is None or self._name_screen.fullmatch(name) is None) and (
            self._path_screen is None or self._path_screen.fullmatch(full) is None
        ):
            return None
        for rule in reversed(self._rules):
            if (is_dir or not rule.dir_only) and rule.regex.fullmatch(
                name if rule.by_name else full
            ) is not None:
                return rule.ignore
        return None


def _screen(sources: list[str]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{s})" for s in sources)) if sources else None


def _parse(line: str) -> tuple[str, bool, bool, bool] | None:
    """One ignore-file line → (regex source, ignore, directories only, by name), or ``None``.

    A rule of one segment glob and no slash but a trailing one (``*.log``, ``build/``: most
    lines of a real ``.gitignore``) matches at any depth, so it is compiled for the path's
    last segment alone (``name/``): the same answers, since a segment glob never matches a
    ``/``, without trying the rule at every segment of the path."""
    line = line.rstrip("\r\n")
    # Trailing spaces are dropped unless escaped with a backslash.
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    ignore = True
    if line.startswith("!"):
        ignore, line = False, line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    if dir_only:
        line = line.rstrip("/")
    anchored = "/" in line
    if anchored:
        line = line.lstrip("/")
        quirk = _after_literal_prefix(line)
        if quirk is not None:
            return quirk, ignore, dir_only, False
    segments = [s for s in line.split("/") if s]
    if not segments:
        return None
    if not anchored:
        if not _is_double_star(segments[0]):
            return _segment(segments[0]) + "/", ignore, dir_only, True
        segments.insert(0, "**")  # matches at any depth
    return _translate(segments), ignore, dir_only, False


def _is_double_star(segment: str) -> bool:
    """A whole segment of two stars or more is ``**``."""
    return len(segment) >= 2 and not segment.strip("*")


def _after_literal_prefix(body: str) -> str | None:
    """git compares an anchored pattern's literal prefix (up to its first ``*?[\\``) as a
    string and wildmatches the rest on its own, so stars right after the prefix and before a
    ``/`` or the end are a ``**`` even inside a segment: ``ab**/c`` matches ``abc``, ``ab/c``
    and ``abx/y/c``; ``ab**`` matches everything below ``ab…``. Other patterns give ``None``."""
    lit = next((i for i, ch in enumerate(body) if ch in "*?[\\"), len(body))
    if lit == 0 or body[lit - 1] == "/" or not body.startswith("**", lit):
        return None
    end = lit
    while end < len(body) and body[end] == "*":
        end += 1
    if end < len(body) and body[end] != "/":
        return None
    prefix = re.escape(body[:lit])
    rest = [s for s in body[end + 1 :].split("/") if s]
    if not rest:
        return prefix + "[\\s\\S]*"  # a trailing ``**``: anything, slashes included
    return prefix + "(?:[\\s\\S]*/)?" + _translate(rest)


def _translate(segments: list[str]) -> str:
    """Segments (``**`` or a glob) → a regex that fully matches ``path + "/"``."""
    # Chunks of segment globs between the ``**`` markers.
    chunks: list[list[str]] = [[]]
    for seg in segments:
        if _is_double_star(seg):
            if chunks[-1] or len(chunks) == 1:
                chunks.append([])
            # ``**/**`` is one ``**``: nothing to add.
        else:
            chunks[-1].append(_segment(seg) + "/")
    if len(chunks) == 1:  # no ``**``: the segments must start at the top
        return "".join(chunks[0])
    parts = ["".join(chunks[0])]
    for chunk in chunks[1:-1]:
        parts.append(f"(?>(?:{_SEGMENT})*?{''.join(chunk)})")
    last = chunks[-1]
    # A trailing ``**`` is "everything inside": one segment at least.
    parts.append(f"(?:{_SEGMENT})*{''.join(last)}" if last else f"(?:{_SEGMENT})+")
    return "".join(parts)


def _segment(glob: str) -> str:
    """One segment glob → a regex for exactly one segment (no ``/``), linear to match."""
    pieces: list[list[str]] = [[]]  # fixed-width pieces between stars
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            while i < n and glob[i] == "*":
                i += 1
            pieces.append([])
            continue
        if ch == "?":
            pieces[-1].append("[^/]")
        elif ch == "[":
            cls, i = _bracket(glob, i)
            pieces[-1].append(cls)
            continue
        elif ch == "\\":
            if i + 1 >= n:
                raise InvalidPattern("a pattern cannot end with a backslash")
            i += 1
            pieces[-1].append(re.escape(glob[i]))
        else:
            pieces[-1].append(re.escape(ch))
        i += 1
    texts = ["".join(p) for p in pieces]
    if len(texts) == 1:
        return texts[0]
    middle = "".join(f"(?>[^/]*?{t})" for t in texts[1:-1] if t)
    return f"{texts[0]}{middle}[^/]*{texts[-1]}"


def _bracket(glob: str, start: int) -> tuple[str, int]:
    """The ``[...]`` class at ``glob[start]`` → (regex class, index after it). An unclosed
    bracket is a literal ``[``."""
    i, n = start + 1, len(glob)
    negate = i < n and glob[i] in "!^"
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while i < n and (glob[i] != "]" or first):
        first = False
        ch = glob[i]
        if ch == "[" and glob.startswith("[:", i):
            close = glob.find(":]", i + 2)
            name = glob[i + 2 : close] if close > 0 else ""
            if name not in _POSIX_CLASSES:
                raise InvalidPattern(f"unknown character class [:{name}:]")
            members.append(_POSIX_CLASSES[name])
            i = close + 2
            continue
        if ch == "\\" and i + 1 < n:
            i += 1
            ch = glob[i]
        if i + 2 < n and glob[i + 1] == "-" and glob[i + 2] != "]":
            hi = glob[i + 2]
            if hi == "\\" and i + 3 < n:
                hi = glob[i + 3]
                i += 1
            if ord(hi) < ord(ch):
                raise InvalidPattern(f"reversed range {ch}-{hi}")
            members.append(f"{_class_char(ch)}-{_class_char(hi)}")
            i += 3
            continue
        members.append(_class_char(ch))
        i += 1
    if i >= n:  # no closing bracket: a literal "["
        return re.escape("["), start + 1
    body = "".join(members)
    # A class never matches "/" (it separates segments), negated or not.
    return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), i + 1


def _class_char(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch
