"""JSON-lines text split into its records: the one reader of deeprepo's ``.jsonl`` files.

Records are written with ``json.dumps(ensure_ascii=False)``, which leaves U+2028, U+0085,
``\\x1c`` … raw inside strings; ``str.splitlines()`` (and a file opened in text mode and
iterated) splits on some of those and tears a record in two. Every reader of deeprepo's
JSON-lines files splits here, on ``"\\n"`` only.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["numbered_lines", "read_objects", "record_lines"]


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line of ``text`` that can hold a record: split on
    "\\n" only, blank ones dropped, numbered from 1 as an editor counts them."""
    return [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]


def record_lines(text: str) -> list[str]:
    """The lines of ``text`` that can hold a record (:func:`numbered_lines` without numbers)."""
    return [line for _, line in numbered_lines(text)]


def read_objects(text: str) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of ``text``, one a line, and how many lines held none (a torn last
    line from a crash, a line edited by hand): readers that tolerate such lines skip them."""
    records: list[dict[str, Any]] = []
    bad = 0
    for line in record_lines(text):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            bad += 1
    return records, bad
