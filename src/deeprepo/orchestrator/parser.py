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
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN_RE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(1), m.group(2).lower()
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence) and stripped.strip("`") == "":
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        if tag in CODE_TAGS:
            code = "\n".join(body).strip("\n")
            if code.strip():
                blocks.append(code)
        if not closed:
            break
    return blocks
