"""Records of the task generator: ground-truth entries, generated tasks, the index.

A generated task is pure data (``files`` + ``ground_truth``) so the RL
environment can use it without touching the disk; :meth:`GeneratedTask.write`
puts it on disk in the layout ``<task_dir>/repo/...`` + ``ground_truth.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeprepo.base.errors import UsageError
from deeprepo.base.safefile import write_atomic

SIZES: dict[str, tuple[int, int]] = {"small": (5, 15), "medium": (30, 60), "large": (100, 300)}
"""Size name → inclusive band of file counts."""
LANGS: tuple[str, ...] = ("python", "js", "mixed")
"""``mixed`` repositories hold a Python service and a JavaScript (Express) service side by side."""


SUBSTRATES: tuple[str, ...] = ("synthetic", "real")
"""``synthetic``: generated Flask/Express projects; ``real``: bugs planted into vendored
open-source files (``realcode``)."""


def check_substrate(substrate: str) -> None:
    """Raise :class:`UsageError` naming the valid substrates for a bad ``substrate``."""
    if substrate not in SUBSTRATES:
        raise UsageError(f"unknown substrate {substrate!r}: use one of {', '.join(SUBSTRATES)}")


def check_size_lang(size: str, lang: str) -> None:
    """Raise :class:`UsageError` naming the valid choices for a bad ``size`` or ``lang``."""
    if size not in SIZES:
        raise UsageError(f"unknown size {size!r}: use one of {', '.join(SIZES)}")
    if lang not in LANGS:
        raise UsageError(f"unknown lang {lang!r}: use one of {', '.join(LANGS)}")


def dumps(data: Any) -> str:
    """The one JSON encoding the generator writes: sorted keys, indent 2, trailing newline."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Location:
    """A line in a file of the repository (paths relative to the repository root)."""

    file: str
    line: int

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line}


@dataclass(frozen=True)
class GroundTruthEntry:
    """One planted bug (``vulnerable=True``) or decoy (``vulnerable=False``).

    ``start_line``/``end_line`` are 1-based and inclusive and always contain the
    sink line. For a cross-file bug the range is at the sink and ``related``
    lists where the untrusted value enters.
    """

    id: str
    file: str
    start_line: int
    end_line: int
    cwe: str
    acceptable_cwes: tuple[str, ...]
    kind: str
    severity: str
    description: str
    vulnerable: bool
    cross_file: bool = False
    related: tuple[Location, ...] = ()
    sink_line: int = 0  # the exact sink line inside the range (not written to JSON)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "file": self.file,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "cwe": self.cwe,
            "acceptable_cwes": list(self.acceptable_cwes),
            "kind": self.kind,
            "severity": self.severity,
            "description": self.description,
            "vulnerable": self.vulnerable,
            "cross_file": self.cross_file,
            "related": [r.to_dict() for r in self.related],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GroundTruthEntry:
        """Read an entry written by :meth:`to_dict` (``sink_line`` is not stored)."""
        return cls(
            id=str(d["id"]),
            file=str(d["file"]),
            start_line=int(d["start_line"]),
            end_line=int(d["end_line"]),
            cwe=str(d["cwe"]),
            acceptable_cwes=tuple(str(c) for c in d.get("acceptable_cwes", [d["cwe"]])),
            kind=str(d.get("kind", "")),
            severity=str(d.get("severity", "medium")),
            description=str(d.get("description", "")),
            vulnerable=bool(d.get("vulnerable", True)),
            cross_file=bool(d.get("cross_file", False)),
            related=tuple(Location(str(r["file"]), int(r["line"])) for r in d.get("related", [])),
        )


@dataclass(frozen=True)
class GeneratedTask:
    """One repository with its ground truth, in memory."""

    task_id: str
    seed: int
    size: str
    lang: str
    domain: str
    files: dict[str, str]  # relative POSIX path → text, sorted by path
    ground_truth: tuple[GroundTruthEntry, ...]

    @property
    def bugs(self) -> tuple[GroundTruthEntry, ...]:
        return tuple(e for e in self.ground_truth if e.vulnerable)

    @property
    def decoys(self) -> tuple[GroundTruthEntry, ...]:
        return tuple(e for e in self.ground_truth if not e.vulnerable)

    def ground_truth_json(self) -> str:
        return dumps([e.to_dict() for e in self.ground_truth])

    def info(self) -> TaskInfo:
        return TaskInfo(
            id=self.task_id,
            seed=self.seed,
            size=self.size,
            lang=self.lang,
            domain=self.domain,
            files=len(self.files),
            bugs=len(self.bugs),
            decoys=len(self.decoys),
        )

    def write(self, task_dir: Path) -> None:
        """Write ``task_dir/repo/...`` and ``task_dir/ground_truth.json`` (byte-stable)."""
        repo = task_dir / "repo"
        for rel, text in self.files.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text, sync=False)
        write_atomic(task_dir / "ground_truth.json", self.ground_truth_json(), sync=False)


@dataclass(frozen=True)
class TaskInfo:
    """One line of ``index.json``."""

    id: str
    seed: int
    size: str
    lang: str
    domain: str
    files: int
    bugs: int
    decoys: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "seed": self.seed,
            "size": self.size,
            "lang": self.lang,
            "domain": self.domain,
            "files": self.files,
            "bugs": self.bugs,
            "decoys": self.decoys,
            "path": self.id,
        }


def read_ground_truth(path: Path) -> list[GroundTruthEntry]:
    """Load a ``ground_truth.json`` written by the generator."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise UsageError(
            f"{path} is not a ground-truth list; regenerate it with `deeprepo tasks generate`"
        )
    return [GroundTruthEntry.from_dict(d) for d in data]
