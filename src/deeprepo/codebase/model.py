"""The in-memory repository the REPL holds as data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str  # "binary", "too-large (1,234,567 bytes > 1,000,000)", "symlink-outside-root", "unreadable: ..."


@dataclass(frozen=True)
class CodebaseMetadata:
    """Summary the root model sees first (and ``metadata`` in the REPL)."""

    root: str
    files: int
    chars: int
    lines: int
    languages: dict[str, int]  # language -> file count, most common first
    largest_files: list[tuple[str, int]]  # (path, chars), largest first, at most 10
    entry_points: list[str]
    skipped: list[SkippedFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. "decoded with replacement: a.txt"
    revision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["largest_files"] = [list(t) for t in self.largest_files]
        return d


@dataclass(frozen=True)
class Codebase:
    """Relative POSIX path → text, plus the tree and metadata."""

    files: dict[str, str]
    file_tree: str
    metadata: CodebaseMetadata

    def payload(self) -> dict[str, Any]:
        """The JSON-able data the sandbox kernel is started with."""
        return {
            "codebase": self.files,
            "file_tree": self.file_tree,
            "metadata": self.metadata.to_dict(),
        }
