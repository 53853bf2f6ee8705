"""What the viewer keeps of each record it reads from a run folder: what a page can show.

A run folder is untrusted input. A record of ``calls.jsonl`` or ``trajectory.jsonl`` may hold
a megabyte of text, or a list of a million empty objects, in a field the page shows or in one
it never reads. Each record is rebuilt here as it is read (``base.jsonl.read_bounded``'s
``shrink``), so that memory follows the page and the rest of the line is freed at once:

- a text the page shows keeps its head and tail (three quarters and one, as the page cuts),
  and how many characters were left out (under :data:`HIDDEN`, so the page still says how
  much it cut);
- any other value is bounded in depth, list length, keys and string length
  (:func:`bounded`), and only the keys the viewer reads are kept of a call.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CALL_TEXT_BUDGET",
    "CALL_TEXT_HEAD",
    "CALL_TEXT_TAIL",
    "HIDDEN",
    "CallShrinker",
    "TurnShrinker",
    "bounded",
    "hidden_of",
]

#: The key under which a shrunk record holds what was left out. No JSON object read from a
#: file holds a tuple or a dict of counts under it once the shrinker has set it.
HIDDEN = "\0hidden"
#: Of each text of a call (system, prompt, response, error), the viewer keeps this many
#: characters of the head and of the tail: as much as the page ever shows of one sub-call
#: text (``Limits.call_field_max``).
CALL_TEXT_HEAD, CALL_TEXT_TAIL = 6_000, 2_000
#: Characters of call text kept in all (a system prompt shared by calls counted once): past
#: it, calls are kept without their text, and the page says so where it would show them.
CALL_TEXT_BUDGET = 64_000_000
#: Of a turn's reply, output and each code block: as much as the page shows (``turn_field``).
TURN_TEXT_HEAD, TURN_TEXT_TAIL = 45_000, 15_000
#: Code blocks of one turn kept (the rest counted under HIDDEN).
MAX_CODE_BLOCKS = 200
_CALL_TEXTS = ("system", "prompt", "response", "error")
_CALL_FIELDS = (
    "seq", "turn", "t", "role", "model", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_write_tokens", "cost_usd", "latency_s", "cached", "finish_reason", "truncated",
)  # fmt: skip
_TURN_TEXTS = ("reply", "output")


def bounded(value: Any, depth: int = 3, items: int = 200, chars: int = 2_000) -> Any:
    """``value`` with every list cut to ``items``, every object to ``items`` keys, every
    string to ``chars`` characters, and nothing nested deeper than ``depth``."""
    if isinstance(value, str):
        return value[:chars]
    if isinstance(value, list):
        return [bounded(v, depth - 1, items, chars) for v in value[:items]] if depth > 0 else []
    if isinstance(value, dict):
        if depth <= 0:
            return {}
        kept = list(value.items())[:items]
        return {str(k)[:chars]: bounded(v, depth - 1, items, chars) for k, v in kept}
    return value


def _cut(value: str, head: int, tail: int) -> str:
    return value[:head] + value[-tail:] if len(value) > head + tail else value


class CallShrinker:
    """Keeps of each call record the fields the viewer reads: each text's head and tail, and
    no text at all once :data:`CALL_TEXT_BUDGET` characters are kept."""

    def __init__(self) -> None:
        self.left = CALL_TEXT_BUDGET
        self.systems: dict[str, str] = {}  # one copy of each system prompt, however many use it

    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {k: bounded(record[k], 1) for k in _CALL_FIELDS if k in record}
        hidden = []
        for key in _CALL_TEXTS:
            value = record.get(key)
            if not isinstance(value, str):
                out[key] = bounded(value, 1)
                hidden.append(0)
                continue
            kept = _cut(value, CALL_TEXT_HEAD, CALL_TEXT_TAIL)
            if key == "system" and kept in self.systems:
                kept = self.systems[kept]
            elif len(kept) > self.left:
                kept = ""
            else:
                self.left -= len(kept)
                if key == "system":
                    self.systems[kept] = kept
            out[key] = kept
            hidden.append(len(value) - len(kept))
        out[HIDDEN] = tuple(hidden)
        return out


class TurnShrinker:
    """Keeps of each trajectory record a bounded copy (:func:`bounded`) with the reply, the
    output and the code blocks cut to what the page shows."""

    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        texts = {k: record.pop(k) for k in _TURN_TEXTS if isinstance(record.get(k), str)}
        blocks = record.pop("code_blocks", None)
        out: dict[str, Any] = bounded(record)
        hidden: dict[str, Any] = {}
        for key, value in texts.items():
            out[key] = _cut(value, TURN_TEXT_HEAD, TURN_TEXT_TAIL)
            hidden[key] = len(value) - len(out[key])
        if isinstance(blocks, list):
            kept = [b if isinstance(b, str) else "" for b in blocks[:MAX_CODE_BLOCKS]]
            out["code_blocks"] = [_cut(b, TURN_TEXT_HEAD, TURN_TEXT_TAIL) for b in kept]
            hidden["code_blocks"] = [
                len(b) - len(c) for b, c in zip(kept, out["code_blocks"], strict=True)
            ]
            hidden["code_blocks_left_out"] = max(0, len(blocks) - MAX_CODE_BLOCKS)
        out[HIDDEN] = hidden
        return out


def hidden_of(record: dict[str, Any], key: str, index: int | None = None) -> int:
    """Characters of ``record[key]`` (of its ``index``-th item) a shrinker left out."""
    hidden = record.get(HIDDEN)
    if not isinstance(hidden, dict):
        return 0
    value = hidden.get(key, 0)
    if index is not None:
        value = value[index] if isinstance(value, list) and index < len(value) else 0
    return value if isinstance(value, int) else 0
