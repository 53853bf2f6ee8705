"""Pull the code the root model wants to run out of its reply.

Pure functions: ``<think>`` sections are removed, then fenced blocks tagged
``python``, ``py``, ``repl`` or bare are taken in order. Blocks in other
languages (``json``, ``bash``, ``text`` ...) are prose, not code. A last fence
left open (the model was cut off) still counts up to the end of the reply.
"""

from __future__ import annotations

import re

_THINK_BLOCK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_OPEN_RE = re.compile(r"^[ \t]*(`{3,})[ \t]*([A-Za-z0-9_+.-]*)[^\n`]*$")
CODE_TAGS = frozenset({"", "python", "py", "python3", "repl", "ipython"})


def strip_think(text: str) -> str:
    """Remove ``<think>…</think>``; an unclosed ``<think>`` hides the rest, and a lone
    ``</think>`` (the opening tag was in the chat template) hides what precedes it."""
    lower = text.lower()
    if "<th" not in lower and "</th" not in lower:
        # No tag of either kind, in any case the regex folds ("t" and "h" fold to nothing
        # else): most replies, spared the regex and the searches below (~0.1 ms at 40 KB).
        return text
    text = _THINK_BLOCK_RE.sub("", text)
    lower = text.lower()
    close = lower.find("</think>")
    if close != -1 and "<think>" not in lower[:close]:
        text = text[close + len("</think>") :]
        lower = text.lower()
    opened = lower.find("<think>")
    if opened != -1:
        text = text[:opened]
    return text


def extract_code_blocks(reply: str) -> list[str]:
    """Return the code of every python/repl/bare fenced block, in order."""
    lines = strip_think(reply).split("\n")
    # Every fence, opening or closing, holds three backticks: only those lines are looked
    # at, and a block's body is a slice (a reply is mostly code, ~1,000 lines for the expert).
    ticks = [k for k, line in enumerate(lines) if "```" in line]
    blocks: list[str] = []
    t = 0
    while t < len(ticks):
        start = ticks[t]
        t += 1
        m = _FENCE_OPEN_RE.match(lines[start])
        if not m:
            continue
        fence, tag = m.group(1), m.group(2).lower()
        end = len(lines)  # a fence left open runs to the end of the reply
        closed = False
        while t < len(ticks):
            stripped = lines[ticks[t]].strip()
            t += 1
            if stripped.startswith(fence) and stripped.strip("`") == "":
                end, closed = ticks[t - 1], True
                break
        if tag in CODE_TAGS:
            code = "\n".join(lines[start + 1 : end]).strip("\n")
            if code.strip():
                blocks.append(code)
        if not closed:
            break
    return blocks
