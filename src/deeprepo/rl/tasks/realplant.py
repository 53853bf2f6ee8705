"""Putting one catalogue block into a real file, in the host file's own style.

A block (a planted bug, a decoy or a clean helper from the catalogue) goes in as a top-level
function or constant before one of the host's anchors (``realcode.RealFile.anchors``: the
first lines of its top-level statements after the import header), with the blank lines the
host uses around top-level code; the imports it needs join the host's import header, written
the host's way (``require`` or ``import`` in JavaScript). It is adapted to the host where that
keeps the code valid: Python annotations dropped in an unannotated file, the host's quote
character, its indentation width and, in JavaScript, its use of semicolons.

Blocks keep their ``⟦tag:name⟧`` marks; the caller reads the final lines back with
``render.extract_marks``, so ground truth is never counted by hand.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass

from deeprepo.rl.tasks.realcode import RealFile

_JS_SPEC_RE = re.compile(r"^(?:\{\s*([\w, ]+?)\s*\}|(\w+))=(\S+)$")
_PY_STR_RE = re.compile(r"""(?<![\w'"\\])([rbfRBF]?)"([^"'\\\n{}]*)"(?!")""")
_JS_STR_RE = re.compile(r"""(?<![\w'"\\])"([^"'\\\n`$]*)"(?!")""")


@dataclass(frozen=True)
class HostStyle:
    """What a host file's own code looks like, read once from its text."""

    typed: bool  # python: uses annotations (``->``) somewhere
    single_quotes: bool  # prefers '…' over "…" for plain strings
    indent: int  # spaces per indentation level (0: one tab)
    semicolons: bool  # js: statements end with ``;``
    blank: int  # blank lines around top-level definitions
    var: bool = False  # js: declares with ``var`` rather than ``const``/``let``


def host_style(f: RealFile) -> HostStyle:
    """Read ``f``'s habits from its text (counts, not guesses)."""
    text = f.text
    py = f.lang == "python"
    single = len(re.findall(r"'[^'\n]*'", text)) > len(re.findall(r'"[^"\n]*"', text))
    # The smallest indentation code lines use is the step (class bodies sit at two steps).
    steps = Counter(
        len(ln) - len(ln.lstrip(" "))
        for ln in text.split("\n")
        if ln.startswith(" ") and not ln.lstrip().startswith(("*", "/*", "//", "#"))
    )
    indent = 4 if py or steps[2] < 3 else 2
    tabbed = sum(ln.startswith("\t") for ln in text.split("\n"))
    if not py and tabbed > sum(steps.values()):
        indent = 0
    ends = [
        ln.rstrip()
        for ln in text.split("\n")
        if ln.strip() and not ln.lstrip().startswith(("//", "*", "/*"))
    ]
    with_semi = sum(ln.endswith(";") for ln in ends)
    return HostStyle(
        typed=py and "->" in text,
        single_quotes=single,
        indent=indent,
        semicolons=py or with_semi * 4 > len(ends),
        blank=2 if py else 1,
        var=not py
        and len(re.findall(r"\bvar\s", text)) > len(re.findall(r"\b(?:const|let)\s", text)),
    )


def top_level_names(f: RealFile) -> set[str]:
    """Names the host binds at module level (so a planted block must not take them)."""
    if f.lang == "python":
        names: set[str] = set()
        for node in ast.parse(f.text).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        return names
    return (
        set(
            re.findall(
                r"(?m)^(?:export\s+)?(?:async\s+)?(?:function\*?|class|const|let|var)\s+(\w+)",
                f.text,
            )
        )
        | {
            n.strip()
            for m in re.finditer(r"(?m)^(?:const|let|var)\s*\{([^}]*)\}", f.text)
            for n in m.group(1).split(",")
            if n.strip().isidentifier()
        }
        | set(re.findall(r"(?m)^import\s+(\w+)", f.text))
    )


def js_import_names(spec: str) -> list[str]:
    """Names a catalogue JS import spec binds: ``fs`` → [fs], ``{exec}=child_process`` → [exec]."""
    m = _JS_SPEC_RE.match(spec)
    if m is None:
        return [spec.replace("-", "_")]
    if m.group(1):
        return [n.strip() for n in m.group(1).split(",")]
    return [m.group(2)]


def _js_import_line(spec: str, esm: bool, quote: str) -> str:
    m = _JS_SPEC_RE.match(spec)
    module = spec if m is None else m.group(3)
    names = js_import_names(spec)
    target = f"{{ {', '.join(names)} }}" if m is not None and m.group(1) else names[0]
    if esm:
        return f"import {target} from {quote}{module}{quote};"
    return f"const {target} = require({quote}{module}{quote});"


def import_lines(f: RealFile, imports: tuple[str, ...], style: HostStyle) -> list[str]:
    """The import lines a block needs that ``f`` does not already have, in the host's way."""
    out: list[str] = []
    have = f.text.split("\n")
    if f.lang == "python":
        for imp in imports:
            if imp not in have and imp not in out:
                out.append(imp)
        return out
    bound = top_level_names(f)
    quote = "'" if style.single_quotes else '"'
    for spec in imports:
        if all(n in bound for n in js_import_names(spec)):
            continue
        line = _js_import_line(spec, f.esm, quote)
        if style.var and line.startswith("const "):
            line = "var " + line.removeprefix("const ")
        if line not in out:
            out.append(line if style.semicolons else line.removesuffix(";"))
    return out


def adapt(code: str, lang: str, style: HostStyle) -> str:
    """``code`` written the host's way: quotes, indentation width and semicolons."""
    lines = code.split("\n")
    out: list[str] = []
    in_doc = False
    for ln in lines:
        if lang == "python" and ln.count('"""') % 2 == 1:
            in_doc = not in_doc
            out.append(ln)
            continue
        if in_doc or '"""' in ln:
            out.append(ln)
            continue
        if style.single_quotes:
            ln = (_PY_STR_RE if lang == "python" else _JS_STR_RE).sub(
                (lambda m: f"{m.group(1)}'{m.group(2)}'")
                if lang == "python"
                else (lambda m: f"'{m.group(1)}'"),
                ln,
            )
        if lang == "js" and style.var:
            ln = re.sub(r"^(\s*)(?:const|let) ", r"\1var ", ln)
        if lang == "js" and style.indent != 2:
            body = ln.lstrip(" ")
            level, odd = divmod(len(ln) - len(body), 2)
            ln = (
                "\t" * level + " " * odd
                if style.indent == 0
                else " " * (level * style.indent + odd)
            ) + body
        out.append(ln)
    if lang == "js" and not style.semicolons:
        out = _drop_semicolons(out)
    return "\n".join(out)


def _drop_semicolons(lines: list[str]) -> list[str]:
    out = list(lines)
    for i, ln in enumerate(lines):
        code, sep, marks = ln.partition("  ⟦")
        stripped = code.rstrip()
        if not stripped.endswith(";") or stripped.lstrip().startswith("for"):
            continue
        nxt = next((x.lstrip() for x in lines[i + 1 :] if x.strip()), "")
        if nxt[:1] in ("(", "[", "`", "+", "-", "/"):
            continue  # no statement break without the semicolon there
        out[i] = stripped[:-1] + (sep + marks if sep else "")
    return out


def insert(lines: list[str], anchor: int, block: str, style: HostStyle) -> None:
    """Insert ``block`` before line ``anchor`` (1-based, in ``lines`` as they are now), with
    ``style.blank`` blank lines on each side, counting the blank lines already there."""
    i = anchor - 1
    above = 0
    while above < i and not lines[i - 1 - above].strip():
        above += 1
    below = 0
    while i + below < len(lines) and not lines[i + below].strip():
        below += 1
    new = [""] * max(0, style.blank - above) + block.split("\n")
    if i + below < len(lines):  # code follows: keep it ``blank`` lines away
        new += [""] * max(0, style.blank - below)
    lines[i:i] = new


def add_imports(lines: list[str], after: int, imports: list[str]) -> None:
    """Put ``imports`` after line ``after`` (0: at the top, with a blank line after them)."""
    if not imports:
        return
    if after == 0 and lines and lines[0].startswith("#!"):
        lines[1:1] = ["", *imports]  # a shebang must stay the first line
    elif after == 0:
        lines[0:0] = [*imports, ""]
    else:
        lines[after:after] = imports
