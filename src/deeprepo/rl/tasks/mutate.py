"""Per-task mutations of block text that keep labels unpredictable from comments.

Every block — clean, planted bug or decoy — goes through the same steps, so a comment
or a docstring says nothing about the label of the code it sits in:

* :func:`strip_comments` drops docstrings and line comments (the synthetic generator drops
  them from every block: a planted block's own texts are unique to one snippet, and a clean
  block that kept its own while planted ones only had pool comments made a pool comment
  mean "planted");
* :func:`sprinkle_comments` adds comments drawn from one shared pool at random lines.

Both work on template text (marks and placeholders in place) and only touch lines that
are outside multi-line strings, so the code still parses and marks keep their lines.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

from deeprepo.rl.tasks.render import Block

# One pool for bugs, decoys and clean code alike: neutral remarks a codebase collects.
COMMENTS: tuple[str, ...] = (
    "Keep this in sync with the API documentation.",
    "See docs/architecture.md for the overall flow.",
    "Called from request handlers and from the batch jobs.",
    "Kept small on purpose; callers compose it.",
    "The order of these steps matters for the tests.",
    "Values come in as strings; convert before comparing.",
    "Errors propagate to the caller, which maps them to HTTP codes.",
    "Cheap enough to call on every request.",
    "This mirrors the behaviour of the previous release.",
    "Reviewed during the last security pass.",
    "Do not log the raw value here.",
    "Part of the public API of this module.",
    "Used by the admin dashboard as well.",
    "Returns early when there is nothing to do.",
    "Simplified after the v2 migration.",
    "Tested in the integration suite.",
    "TODO: add metrics once the dashboard exists.",
    "TODO: move to the settings module.",
    "NOTE: the caller owns the connection lifetime.",
    "NOTE: keep the response shape stable for mobile clients.",
    "Input has already been parsed at this point.",
    "Small helper, kept here to avoid an import cycle.",
    "Behaviour covered by the regression tests.",
    "Defaults match the values in the deployment guide.",
)
_PY_DOC_OPEN = re.compile(r'^\s*[rbu]?("""|\'\'\')')
_MARK = re.compile(r"⟦[^⟧]*⟧")


@lru_cache(maxsize=8192)
def _string_state(code: str, lang: str) -> tuple[bool, ...]:
    """For each line: does it start inside a multi-line string (so nothing may go before it)?"""
    lines = code.split("\n")
    quotes = ('"""', "'''") if lang == "python" else ("`",)
    if not any(q in code for q in quotes):
        return (False,) * len(lines)
    inside: list[bool] = []
    open_q: str | None = None
    for line in lines:
        inside.append(open_q is not None)
        if lang == "python":
            for q in ('"""', "'''"):
                n = line.count(q)
                if open_q is None and n % 2 == 1:
                    open_q = q
                    break
                if open_q == q and n % 2 == 1:
                    open_q = None
                    break
        else:
            if line.count("`") % 2 == 1:
                open_q = None if open_q else "`"
    return tuple(inside)


@lru_cache(maxsize=8192)
def strip_comments(code: str, lang: str) -> str:
    """Drop function docstrings and whole-line comments (not lines carrying marks)."""
    lines = code.split("\n")
    inside = _string_state(code, lang)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if inside[i] or "⟦" in line:
            out.append(line)
            i += 1
            continue
        if lang == "python" and _PY_DOC_OPEN.match(line) and out and out[-1].rstrip().endswith(":"):
            q = '"""' if '"""' in line else "'''"
            j = i if line.count(q) >= 2 else i + 1
            while j < len(lines) and q not in lines[j]:
                j += 1
            indent = len(line) - len(line.lstrip())
            nxt = next((ln for ln in lines[j + 1 :] if ln.strip()), "")
            if j < len(lines) and len(nxt) - len(nxt.lstrip()) == indent and nxt.strip():
                i = j + 1
                while i < len(lines) and not lines[i].strip():
                    i += 1
                continue
        if (lang == "python" and stripped.startswith("#")) or (
            lang == "js" and stripped.startswith("//")
        ):
            i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def sprinkle_comments(rng: random.Random, code: str, lang: str, count: int) -> str:
    """Insert ``count`` comments from the pool before random lines outside strings."""
    if count <= 0:
        return code
    lines = code.split("\n")
    inside = _string_state(code, lang)
    spots = [
        i
        for i, line in enumerate(lines)
        if line.strip()
        and not inside[i]
        and not (i and lines[i - 1].rstrip().endswith("\\"))
        and not _MARK.sub("", line)
        .strip()
        .startswith((")", "]", "}", "else", "elif", "except", "finally", "catch", "."))
    ]
    if not spots:
        return code
    lead = "# " if lang == "python" else "// "
    for i in sorted(rng.sample(spots, min(count, len(spots))), reverse=True):
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines.insert(i, indent + lead + rng.choice(COMMENTS))
    return "\n".join(lines)


def mutate_block(
    rng: random.Random,
    block: Block,
    lang: str,
    strip: bool,
    rate: float,
    shape: Shape,
    method: bool = False,
) -> Block:
    """The block in the project's shape, its own comments dropped (``strip``, else at random),
    pool comments added."""
    code = reshape(rng, block.code, lang, shape)
    if lang == "js" and shape.js_arrows and not method:
        code = to_arrow(code)
    if strip or rng.random() < 0.5:
        code = strip_comments(code, lang)
    n = 1 if rng.random() < rate else 0
    if n and rng.random() < 0.25:
        n = 2
    code = sprinkle_comments(rng, code, lang, n)
    imports = block.imports
    if lang == "python" and shape.drop_return_types:
        imports = _used_imports(imports, code)
    if code == block.code and imports == block.imports:
        return block
    return Block(
        block.key,
        code,
        imports,
        block.names,
        block.uses,
        block.exports,
        block.ctx,
        block.tag,
    )


# --- shape mutations ----------------------------------------------------------------------------


class Shape(NamedTuple):
    """How one project writes code: a formatter's line width and a few habits."""

    wrap: int  # wrap calls on lines longer than this (0: never)
    drop_return_types: bool  # python: no annotations on parameters and returns
    js_arrows: bool  # js: module functions as ``const f = (…) => {…};``
    js_let: bool  # js: ``let`` for local bindings
    temp_rate: float  # share of ``return EXPR`` written as ``name = EXPR`` + ``return name``


def choose_shape(rng: random.Random) -> Shape:
    return Shape(
        wrap=rng.choice((0, 72, 80, 88, 100)),
        drop_return_types=rng.random() < 0.4,
        js_arrows=rng.random() < 0.35,
        js_let=rng.random() < 0.3,
        temp_rate=rng.choice((0.0, 0.1, 0.25)),
    )


_TRAIL_MARKS = re.compile(r"((?:[ \t]*⟦[^⟧]*⟧)+)$")
_RET_TYPE = re.compile(r"^(\s*(?:async )?def .*\)|\s*\))( -> .+):$")
_RETURN = re.compile(r"^(\s*)return (.+?)(;?)$")
_TEMP_NAMES = ("result", "value", "out", "payload_out", "answer")


def _split_marks(line: str) -> tuple[str, str]:
    m = _TRAIL_MARKS.search(line)
    return (line[: m.start()], m.group(1)) if m else (line, "")


def _brackets(text: str, start: int = 0, stop_at: str = "") -> Iterator[tuple[int, str, int]]:
    """``(index, bracket, depth after it)`` for each bracket of ``text`` from ``start``, outside
    string literals, up to a ``stop_at`` character outside strings (a comment); a last
    ``(len(text), quote, depth)`` names an unclosed string (or "")."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if ch == stop_at and not quote:
            break
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            depth += 1
            yield i, ch, depth
        elif ch in ")]}":
            depth -= 1
            yield i, ch, depth
        i += 1
    yield len(text), quote, depth


def _close_index(line: str, start: int) -> int:
    """Index of the bracket closing ``line[start]`` on the same line, or -1 (strings skipped)."""
    for i, ch, depth in _brackets(line, start):
        if i < len(line) and depth == 0 and ch in ")]}":
            return i if ch == ")" else -1
    return -1


def _open_parens(line: str) -> list[int]:
    return [i for i, ch, _ in _brackets(line, stop_at="#") if ch == "("]


def _wrap(line: str, lang: str) -> list[str] | None:
    """``f(a, b)`` → ``f(`` / ``    a, b`` / ``)`` for the outermost call closed on the line."""
    if "`" in line or line.lstrip().startswith(("#", "//")):
        return None
    for start in _open_parens(line):
        end = _close_index(line, start)
        inner = line[start + 1 : end].strip() if end > 0 else ""
        if end < 0 or len(inner) < 12 or inner.endswith(","):
            continue
        indent = line[: len(line) - len(line.lstrip())]
        step = "    " if lang == "python" else "  "
        return [line[: start + 1], indent + step + inner, indent + line[end:]]
    return None


def reshape(rng: random.Random, code: str, lang: str, shape: Shape) -> str:
    """Apply the project's habits to one block (lines in multi-line strings are left alone)."""
    code = _fixed_shape(code, lang, shape.drop_return_types, shape.js_let, shape.wrap)
    if shape.temp_rate and "return " in code:
        code = _temporaries(rng, code, lang, shape.temp_rate)
    return code


@lru_cache(maxsize=8192)
def _fixed_shape(code: str, lang: str, untyped: bool, let: bool, wrap: int) -> str:
    """The deterministic habits (cached: clean blocks recur in every project)."""
    py = lang == "python"
    drop = py and untyped and "def " in code
    let = not py and let and "const " in code
    lines = code.split("\n")
    if not (drop or let or (wrap and any(len(ln) > wrap for ln in lines))):
        return code
    inside = _string_state(code, lang)
    out: list[str] = []
    for i, raw in enumerate(lines):
        if inside[i] or (i + 1 < len(lines) and inside[i + 1]) or not raw.strip():
            out.append(raw)
            continue
        line, marks = _split_marks(raw) if "⟦" in raw else (raw, "")
        new = [line]
        if drop and ("def " in line or line.lstrip().startswith(") ->")):
            m = _RET_TYPE.match(line)
            new = [_untyped_def(m.group(1) + ":" if m else line)]
        if let and "const " in line and line.startswith((" ", "\t")):
            new = [re.sub(r"^(\s+)const ", r"\1let ", new[0])]
        if wrap and len(new[0]) > wrap:
            wrapped = _wrap(new[0], lang)
            if wrapped:
                # A wrapped sink keeps its mark on the first line; its range must reach the close.
                sink = re.search(r"⟦([\w.-]+):sink⟧", marks)
                if sink and f"⟦{sink.group(1)}:end⟧" not in code:
                    wrapped[-1] += f"  ⟦{sink.group(1)}:end⟧"
                new = wrapped
        new[0] += marks
        out.extend(new)
    return "\n".join(out)


def _temporaries(rng: random.Random, code: str, lang: str, rate: float) -> str:
    """Some ``return EXPR`` lines as ``name = EXPR`` + ``return name``."""
    lines = code.split("\n")
    inside = _string_state(code, lang)
    used: set[str] | None = None
    out: list[str] = []
    for i, raw in enumerate(lines):
        m = _RETURN.match(raw) if "return " in raw and not inside[i] else None
        if m is None or rng.random() >= rate:
            out.append(raw)
            continue
        expr, marks = _split_marks(m.group(2)) if "⟦" in raw else (m.group(2), "")
        expr = expr.rstrip(";")
        nxt = next((ln.strip() for ln in lines[i + 1 :] if ln.strip()), "")
        if (
            re.fullmatch(r"[\w.\"']+", expr)  # a bare name or literal needs no temporary
            or nxt.startswith((".", "+", "-", "?", ":", "&", "|", "*", "/"))
            or expr.endswith(("(", "[", "{", ","))
            or not _balanced(expr)
        ):
            out.append(raw)
            continue
        if used is None:
            used = set(re.findall(r"\w+", code))
        name = next((n for n in _TEMP_NAMES if n not in used), "")
        if not name:
            out.append(raw)
            continue
        used.add(name)
        ind = m.group(1)
        if lang == "python":
            out += [f"{ind}{name} = {expr}{marks}", f"{ind}return {name}"]
        else:
            out += [f"{ind}const {name} = {expr};{marks}", f"{ind}return {name};"]
    return "\n".join(out)


def _balanced(expr: str) -> bool:
    for i, ch, depth in _brackets(expr):
        if depth < 0:
            return False
        if i == len(expr):
            return depth == 0 and not ch
    return True


_DEF = re.compile(r"^(\s*(?:async )?def [^(]+\()(.*)(\):)$")


def _split_params(params: str) -> list[str] | None:
    out: list[str] = []
    depth, quote, cur = 0, "", ""
    for ch in params:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        cur += ch
    if depth or quote:
        return None
    return [*out, cur] if cur.strip() else out


def _untyped_def(line: str) -> str:
    """``def f(a: int, b: str = "x"):`` → ``def f(a, b="x"):`` (one-line signatures only)."""
    m = _DEF.match(line)
    if not m or "lambda" in m.group(2):
        return line
    parts = _split_params(m.group(2))
    if parts is None:
        return line
    out: list[str] = []
    for p in parts:
        name, colon, rest = p.partition(":")
        if not colon:
            out.append(p.strip() if out else p.lstrip())
            continue
        default = rest.split("=", 1)[1].strip() if "=" in rest else None
        out.append(name.strip() + (f"={default}" if default is not None else ""))
    return m.group(1) + ", ".join(out) + m.group(3)


_JS_FN = re.compile(r"^(«afn»|«fn»|async function |function )([\w«»$]+)\((.*)\) \{$")


def to_arrow(code: str) -> str:
    """A module-level ``function f(a) {…}`` as ``const f = (a) => {…};``."""
    lines = code.split("\n")
    m = _JS_FN.match(lines[0])
    if not m or lines[-1] != "}":
        return code
    is_async = m.group(1) in ("«afn»", "async function ")
    lines[0] = f"const {m.group(2)} = {'async ' if is_async else ''}({m.group(3)}) => {{"
    lines[-1] = "};"
    return "\n".join(lines)


_TYPING_FROM = re.compile(r"^from (typing|collections\.abc) import (.+)$")


def _used_imports(imports: tuple[str, ...], code: str) -> tuple[str, ...]:
    """Typing imports an untyped block no longer needs are dropped."""
    out: list[str] = []
    for spec in imports:
        m = _TYPING_FROM.match(spec)
        if not m:
            out.append(spec)
            continue
        names = [n.strip() for n in m.group(2).split(",")]
        kept = [n for n in names if re.search(rf"\b{re.escape(n)}\b", code)]
        if kept:
            out.append(f"from {m.group(1)} import {', '.join(kept)}")
    return tuple(out)
