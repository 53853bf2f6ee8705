"""What a file imports, read from its text: nothing is executed.

Python: the import statements are found by a line-anchored regex and parsed with :mod:`ast`
(only those statements, so a 5,000-file repository takes a fraction of a second); a file
where a candidate sits inside a triple-quoted string, or whose statements do not parse on
their own, is parsed whole; a file that does not parse at all keeps the statements that do.

JavaScript / TypeScript: ``import … from 'x'``, ``import 'x'``, ``export … from 'x'``,
``require('x')`` and ``import('x')`` with a literal specifier, from the text with its
line and block comments removed.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import NamedTuple

from deeprepo.base.pyparse import parse_python

__all__ = ["PyImport", "js_imports", "python_imports"]


class PyImport(NamedTuple):
    """One ``import`` / ``from … import`` target: ``from ..a.b import c`` is
    ``PyImport("a.b", ("c",), 2)``; ``import a.b`` is ``PyImport("a.b", (), 0)``."""

    module: str
    names: tuple[str, ...]
    level: int


# A line that starts an import statement (after indentation, or after `try:`/`else:` on
# one line is rare enough to leave to the whole-file parse of files that need it).
_PY_CANDIDATE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.][\w. \t]*import\b|import[ \t]+\w)", re.M)
_TRIPLE = re.compile(r"\"\"\"|'''")


def python_imports(text: str) -> list[PyImport]:
    """The imports of a Python file's ``text`` (function-level and conditional
    ones included, those under ``if TYPE_CHECKING:`` left out: they never run)."""
    if "import" not in text:
        return []
    starts = [m.start() for m in _PY_CANDIDATE.finditer(text)]
    if not starts:
        return []
    if '"""' in text or "'''" in text:
        spans = _triple_quoted(text)
        if spans is None:  # a stray triple quote: the pairing cannot be trusted
            return _parse_whole(text, _statements(text, starts))
        starts = [s for s in starts if bisect.bisect_right(spans, s) % 2 == 0]
    if "TYPE_CHECKING" in text:
        starts = _outside_type_checking(text, starts)
    if not starts:
        return []
    statements = _statements(text, starts)
    try:
        tree = parse_python("\n".join(statements))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _parse_whole(text, statements)
    return _collect(tree.body)


def _statements(text: str, starts: list[int]) -> list[str]:
    """The statements at ``starts``, each once: a start inside the previous statement (a
    continuation line that happens to read ``import x``) is part of it, not a new one.

    Linear in the text: a hostile file of ``from a import (`` lines with no ``)`` or of
    ``import a \\`` continuations must not rescan the rest of the file from every line.
    """
    out: list[str] = []
    last_close = text.rfind(")")
    covered = 0
    for start in starts:
        if start < covered:
            continue
        end = _statement_end(text, start, last_close)
        out.append(text[start:end].strip())
        covered = end
    return out


def _statement_end(text: str, start: int, last_close: int) -> int:
    """Where the logical line from ``start`` ends: through a closing ``)`` or ``\\``
    continuations."""
    end = text.find("\n", start)
    end = len(text) if end == -1 else end
    code = text[start:end].split("#", 1)[0]  # a "(" in a comment opens nothing
    if "(" in code and ")" not in code.split("(", 1)[1]:
        if last_close >= end:
            end = text.find(")", end) + 1
    else:
        line_start = start
        while text[line_start:end].rstrip().endswith("\\"):
            nxt = text.find("\n", end + 1)
            if nxt == -1:
                return len(text)
            line_start, end = end + 1, nxt
    return end


def _triple_quoted(text: str) -> list[int] | None:
    """Boundaries ``[open, close, open, close, ...]`` of the triple-quoted strings, paired
    naively; ``None`` when one is left open (a triple quote in a comment or a one-line
    string), so that the caller parses the whole file rather than trust the pairs."""
    spans: list[int] = []
    quote = ""
    for m in _TRIPLE.finditer(text):
        token = m.group()
        if not quote:
            quote = token
            spans.append(m.start())
        elif token == quote:
            quote = ""
            spans.append(m.end())
    return None if quote else spans


_TYPE_CHECKING_IF = re.compile(
    r"^([ \t]*)if[ \t]+(?:\w+\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#.*)?$", re.M
)
_CODE_LINE = re.compile(r"^([ \t]*)[^\s#]", re.M)


def _outside_type_checking(text: str, starts: list[int]) -> list[int]:
    """``starts`` less those in the indented body of an ``if TYPE_CHECKING:``."""
    blocks: list[tuple[int, int]] = []
    covered = 0
    for m in _TYPE_CHECKING_IF.finditer(text):
        if m.end() < covered:
            continue  # nested in the previous block: already left out with it
        indent = len(m.group(1).expandtabs())
        end = len(text)
        for line in _CODE_LINE.finditer(text, m.end()):
            if len(line.group(1).expandtabs()) <= indent:
                end = line.start()
                break
        blocks.append((m.end(), end))
        covered = end
    # The blocks are disjoint and in order: one bisection per start, not one scan of them all.
    bounds = [x for block in blocks for x in block]
    return [s for s in starts if bisect.bisect_right(bounds, s) % 2 == 0]


def _parse_whole(text: str, statements: list[str]) -> list[PyImport]:
    try:
        return _collect(parse_python(text).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    found: list[PyImport] = []
    for statement in statements:  # a file that does not parse: each statement on its own
        try:
            found.extend(_collect(parse_python(statement).body))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return found


def _collect(body: list[ast.stmt]) -> list[PyImport]:
    """Imports anywhere in ``body``, walking statements only (expressions hold none)."""
    found: list[PyImport] = []
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            found.extend(PyImport(alias.name, (), 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names if a.name != "*")
            found.append(PyImport(node.module or "", names, node.level or 0))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(reversed(node.orelse))  # `if TYPE_CHECKING:` never runs
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    stack.extend(reversed(children))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


# ------------------------------------------------------------------------------ JavaScript

# Line comments that fill their line (a `//` after code may sit in a URL); block comments are
# removed by `_strip_block_comments`.
_JS_LINE_COMMENT = re.compile(r"^[ \t]*//.*", re.M)
_JS_SPEC = r"""(['"])([^'"\n]+)\1"""
_JS_IMPORT = re.compile(
    r"\b(?<![$.])(?:"
    # import x from '…', import {a, b} from '…', export * from '…', export {a} from '…'
    # The clause is read a word at a time (atomic, so a word is never split) and never runs
    # into the next import/export: a file of bare `import` lines would otherwise be scanned
    # 1,000 characters from each of them.
    r"(?:import|export)\b(?:(?!(?:import|export)\b)(?>\w+)|[^\w'\";()=]){0,1000}?"
    r"\bfrom\s*" + _JS_SPEC + r"|"
    # import '…' (side effects)
    r"import\s*" + _JS_SPEC.replace(r"\1", r"\3") + r"|"
    # require('…'), import('…')
    r"(?:require|import)\s*\(\s*" + _JS_SPEC.replace(r"\1", r"\5") + r"\s*[,)]"
    r")"
)


def js_imports(text: str) -> list[str]:
    """The module specifiers a JavaScript / TypeScript file imports, in order."""
    if "import" not in text and "require" not in text and "export" not in text:
        return []
    if "/*" in text:
        text = _strip_block_comments(text)
    if "//" in text:
        text = _JS_LINE_COMMENT.sub("", text)
    found: list[str] = []
    for m in _JS_IMPORT.finditer(text):
        spec = m.group(2) or m.group(4) or m.group(6)
        if spec:
            found.append(spec)
    return found


def _strip_block_comments(text: str) -> str:
    """``text`` without its ``/* ... */`` comments; an unclosed one is left as it is.

    One pass with ``str.find``: the regex ``/\\*[\\s\\S]*?\\*/`` rescans the rest of the file
    from every unclosed ``/*``, and ``/*a`` repeated over a megabyte never finishes.
    """
    out: list[str] = []
    pos = 0
    while (start := text.find("/*", pos)) != -1:
        end = text.find("*/", start + 2)
        if end == -1:
            break  # unclosed: no later `/*` can close either
        out.append(text[pos:start])
        pos = end + 2
    out.append(text[pos:])
    return "".join(out)
