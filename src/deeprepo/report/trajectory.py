"""``trajectory.jsonl``: written turn by turn, flushed and synced, so a crash
loses nothing already done.

Records, one JSON object a line: ``start`` (the run's options, enough to rebuild it),
one ``turn`` per completed turn (with the ledger as it stood after the turn), ``end``;
a run continued with ``--resume`` adds a ``resume`` record and appends its turns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from deeprepo.base.closing import Closing
from deeprepo.base.errors import UnsafePathError
from deeprepo.base.jsonl import JsonlLimits, read_bounded
from deeprepo.base.records import Turn
from deeprepo.base.safefile import open_append, open_update

RUN_FILES = (
    "trajectory.jsonl",
    "calls.jsonl",
    "metrics.json",
    "findings.json",
    "findings.sarif",
    "report.md",
    "trajectory.html",
)


class TrajectoryWriter(Closing):
    """Append-only JSON-lines log: a ``start`` record, one ``turn`` per turn, an ``end``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = open_append(path)

    def _write(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def record(self, kind: str, **info: Any) -> None:
        """Write one record of type ``kind`` and sync it to disk."""
        self._write({"type": kind, **info})

    def start(self, **info: Any) -> None:
        self.record("start", **info)

    def turn(self, turn: Turn, **extra: Any) -> None:
        self._write({"type": "turn", **turn.to_dict(), **extra})

    def end(self, **info: Any) -> None:
        self.record("end", **info)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


#: The most a run file (trajectory.jsonl, calls.jsonl) read back whole may hold: far above
#: any run deeprepo makes, and a bound on the memory a hostile run folder can cost.
RUN_FILE_LIMITS = JsonlLimits(max_records=100_000, max_line_bytes=64 << 20, max_bytes=512 << 20)


def read_trajectory(path: Path) -> list[dict[str, Any]]:
    """Read back every complete record (a torn last line from a crash is ignored).

    Raises :class:`~deeprepo.base.errors.UnsafePathError` when the file is larger than
    :data:`RUN_FILE_LIMITS` allow: a run folder is untrusted, and a resume, an export or the
    run log must not lose records silently nor read without bound."""
    read = read_bounded(path, RUN_FILE_LIMITS)
    if read.too_long or read.not_read_bytes:
        raise UnsafePathError(
            f"{path} is too large to read safely ("
            + "; ".join(read.left_out(path.name, RUN_FILE_LIMITS.max_records))
            + "); deeprepo did not write it this way, so start a new run instead"
        )
    return read.records


def drop_torn_tail(path: Path) -> int:
    """Cut a last line that a crash left unfinished (no newline), so that records
    appended later start on a line of their own. Returns the bytes removed."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with open_update(path) as fh:
        # Records are at most a few MB; read back in blocks until a newline shows up.
        pos, tail = size, b""
        while pos > 0 and b"\n" not in tail:
            step = min(1 << 16, pos)
            pos -= step
            fh.seek(pos)
            tail = fh.read(step) + tail
        cut = size - len(tail) + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
        if cut == size:
            return 0
        fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
    return size - cut


def set_aside(out_dir: Path) -> list[Path]:
    """Move the outputs of an earlier run in ``out_dir`` out of the way: ``NAME.prev.EXT``
    (then ``NAME.prev2.EXT`` …, never overwriting), so a new run never appends to or mixes
    with the old trajectory. Returns the new paths."""
    present = [name for name in RUN_FILES if (out_dir / name).exists()]
    if not present:
        return []
    n = 1
    while True:
        suffix = "prev" if n == 1 else f"prev{n}"
        targets = {name: out_dir / _with_suffix(name, suffix) for name in present}
        if not any(t.exists() for t in targets.values()):
            break
        n += 1
    for name, target in targets.items():
        os.replace(out_dir / name, target)
    return list(targets.values())


def _with_suffix(name: str, suffix: str) -> str:
    stem, dot, ext = name.rpartition(".")
    return f"{stem}.{suffix}{dot}{ext}"
