"""``trajectory.jsonl``: written turn by turn, flushed and synced, so a crash
loses nothing already done."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from deeprepo.orchestrator.records import Turn


class TrajectoryWriter:
    """Append-only JSON-lines log: a ``start`` record, one ``turn`` per turn, an ``end``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = path.open("a", encoding="utf-8")

    def _write(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def start(self, **info: Any) -> None:
        self._write({"type": "start", **info})

    def turn(self, turn: Turn) -> None:
        self._write({"type": "turn", **turn.to_dict()})

    def end(self, **info: Any) -> None:
        self._write({"type": "end", **info})

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_trajectory(path: Path) -> list[dict[str, Any]]:
    """Read back every complete record (a torn last line from a crash is ignored)."""
    records: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
