"""Per-task mutations of block text that keep labels unpredictable from comments.

Every block — clean, planted bug or decoy — goes through the same steps, so a comment
or a docstring says nothing about the label of the code it sits in:

* :func:`strip_comments` drops docstrings and line comments (always for planted blocks,
  whose texts are unique to one snippet; at random for clean ones);
* :func:`sprinkle_comments` adds comments drawn from one shared pool at random lines.

Both work on template text (marks and placeholders in place) and only touch lines that
are outside multi-line strings, so the code still parses and marks keep their lines.
"""

from __future__ import annotations

import random
import re

from deeprepo.tasks.render import Block

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


def _string_state(lines: list[str], lang: str) -> list[bool]:
    """For each line: does it start inside a multi-line string (so nothing may go before it)?"""
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
    return inside


def strip_comments(code: str, lang: str) -> str:
    """Drop function docstrings and whole-line comments (not lines carrying marks)."""
    lines = code.split("\n")
    inside = _string_state(lines, lang)
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
    inside = _string_state(lines, lang)
    spots = [
        i
        for i, line in enumerate(lines)
        if line.strip()
        and not inside[i]
        and not (i and lines[i - 1].rstrip().endswith("\\"))
        and not _MARK.sub("", line).strip().startswith((")", "]", "}", "else", "elif", "except", "finally", "catch", "."))
    ]
    if not spots:
        return code
    lead = "# " if lang == "python" else "// "
    for i in sorted(rng.sample(spots, min(count, len(spots))), reverse=True):
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines.insert(i, indent + lead + rng.choice(COMMENTS))
    return "\n".join(lines)


def mutate_block(rng: random.Random, block: Block, lang: str, planted: bool, rate: float) -> Block:
    """The block with its own comments maybe dropped and pool comments maybe added."""
    from dataclasses import replace

    code = block.code
    if planted or rng.random() < 0.5:
        code = strip_comments(code, lang)
    n = 1 if rng.random() < rate else 0
    if n and rng.random() < 0.25:
        n = 2
    code = sprinkle_comments(rng, code, lang, n)
    return block if code == block.code else replace(block, code=code)
