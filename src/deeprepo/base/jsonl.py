"""JSON-lines text split into its records: the one reader of deeprepo's ``.jsonl`` files.

Records are written with ``json.dumps(ensure_ascii=False)``, which leaves U+2028, U+0085,
``\\x1c`` … raw inside strings; ``str.splitlines()`` (and a file opened in text mode and
iterated) splits on some of those and tears a record in two. Every reader of deeprepo's
JSON-lines files splits here, on ``"\\n"`` only.

A run folder is untrusted input (shared, downloaded, edited): :func:`read_bounded` streams a
file and keeps at most a given number of records and bytes, so ten megabytes of ``{}``
lines cannot cost gigabytes of memory; what it left out is counted for the reader to say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "BoundedRead",
    "JsonlLimits",
    "iter_numbered_lines",
    "iter_objects",
    "numbered_lines",
    "read_bounded",
    "read_objects",
    "record_lines",
    "reply_json",
]


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


@dataclass(frozen=True)
class BoundedRead:
    """What :func:`read_bounded` kept of a JSON-lines file, and what it left out."""

    records: list[dict[str, Any]] = field(default_factory=list)
    bad: int = 0  # lines that held no JSON object (a torn last line, an edit)
    too_long: int = 0  # lines over the per-record limit, skipped unread
    not_read_bytes: int = 0  # the file's bytes past the record or byte limit, never read

    def left_out(self, name: str, max_records: int) -> list[str]:
        """One line for each kind of thing left out, naming the file (empty: nothing was)."""
        out = []
        if self.too_long:
            out.append(f"{name}: {self.too_long:,} record(s) too large to show, left out")
        if self.not_read_bytes:
            out.append(
                f"{name}: only the first {len(self.records):,} records read (at most "
                f"{max_records:,}, or the byte limit); {self.not_read_bytes:,} more bytes not shown"
            )
        return out


@dataclass(frozen=True)
class JsonlLimits:
    """How much of a JSON-lines file :func:`read_bounded` reads."""

    max_records: int
    max_line_bytes: int
    max_bytes: int
    #: Values one line may hold (its commas and colons, counted before parsing): a line of
    #: ``[{}, {}, …]`` is ten times its size once parsed, whatever its byte limit.
    max_line_items: int = 250_000


def read_bounded(
    path: Path,
    limits: JsonlLimits,
    shrink: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> BoundedRead:
    """The JSON objects of the file at ``path``, one a line, read as a stream: at most
    ``limits.max_records`` records and ``limits.max_bytes`` bytes of lines are read, a line
    longer than ``limits.max_line_bytes`` is skipped without being held, and each record is
    passed through
    ``shrink`` (a reader that shows only part of each record drops the rest here) before it
    is kept. Memory is bounded by the limits, never by the file."""
    records: list[dict[str, Any]] = []
    bad = too_long = kept_bytes = 0
    with path.open("rb") as fh:
        size = max(0, path.stat().st_size)
        for line in _lines(fh, limits.max_line_bytes):
            if line is None or _items(line) > limits.max_line_items:
                too_long += 1
                continue
            kept_bytes += len(line)
            record = _object(line)
            if record is None:
                bad += line.strip() != b""
                continue
            records.append(record if shrink is None else shrink(record))
            if len(records) >= limits.max_records or kept_bytes >= limits.max_bytes:
                break
        rest = max(0, size - fh.tell())
        if 0 < rest <= 1 << 16 and not fh.read().strip():
            rest = 0  # only blank lines were left
    return BoundedRead(records, bad, too_long, rest)


def iter_objects(
    path: Path, *, max_line_bytes: int, max_line_items: int = 250_000
) -> Iterator[dict[str, Any]]:
    """Every JSON object of the file at ``path``, one a line, streamed (a reader that only
    folds the records, the last sequence number say, holds one at a time); lines over
    ``max_line_bytes`` or ``max_line_items`` (see :class:`JsonlLimits`) and lines that hold
    no object are skipped."""
    with path.open("rb") as fh:
        for line in _lines(fh, max_line_bytes):
            if line is not None and _items(line) > max_line_items:
                continue
            record = None if line is None else _object(line)
            if record is not None:
                yield record


def iter_numbered_lines(
    path: Path, *, max_line_bytes: int, max_line_items: int = 250_000
) -> Iterator[tuple[int, str]]:
    """:func:`numbered_lines` of the file at ``path``, streamed: one line held at a time. A
    line longer than ``max_line_bytes`` comes back as ``"<line too long>"`` (no JSON), so
    a reader that needs every record says which line it could not read."""
    with path.open("rb") as fh:
        for n, line in enumerate(_lines(fh, max_line_bytes), 1):
            if line is None or _items(line) > max_line_items:
                yield n, "<line too long>"
            elif line.strip():
                yield n, line.decode("utf-8", errors="replace").rstrip("\n")


def _items(line: bytes) -> int:
    return line.count(b",") + line.count(b":")


def _object(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        record = json.loads(line.decode("utf-8", errors="replace"))
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _lines(fh: BinaryIO, max_line_bytes: int) -> Iterator[bytes | None]:
    """The lines of ``fh`` split on ``\\n`` only; None for a line over ``max_line_bytes``,
    which is read past in small blocks and never held whole."""
    while True:
        line = fh.readline(max_line_bytes + 1)
        if not line:
            return
        if len(line) > max_line_bytes and not line.endswith(b"\n"):
            while (chunk := fh.readline(1 << 16)) and not chunk.endswith(b"\n"):
                pass
            yield None
            continue
        yield line


_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_PAIRS = {"{": "}", "[": "]"}


def reply_json(text: str, openers: str = "{[", *, earliest_first: bool = False) -> Iterator[Any]:
    """The JSON values a model's reply holds, in the order a reader tries them: each fenced
    block, then the whole text; in each, from the first ``opener`` to the last matching
    closer (``openers`` in the order given, or whichever opens first). What does not parse
    is skipped, deep nesting included (a reply the analysed code talked into ``[[[[…``
    raises RecursionError, not ValueError)."""
    for cand in (*_FENCE_RE.findall(text), text):
        order = (
            sorted(openers, key=lambda o: cand.find(o) if o in cand else len(cand))
            if earliest_first
            else openers
        )
        for opener in order:
            start, end = cand.find(opener), cand.rfind(_PAIRS[opener])
            if start == -1 or end <= start:
                continue
            try:
                yield json.loads(cand[start : end + 1])
            except (ValueError, RecursionError):
                continue
