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
    scopes: dict[str, int] = field(default_factory=dict)  # scope -> file count (codebase.scope)
    ignored: int = 0  # paths that matched the root's .gitignore rules, not loaded
    run_folders: list[str] = field(default_factory=list)  # deeprepo's own outputs, not loaded
    #: Files deeprepo's own passes could not read safely (a manifest nested past the parser's
    #: recursion, a file past a size or time bound), one note each: the run names them.
    not_analysed: list[str] = field(default_factory=list)

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
    #: path -> scope (``source``, ``test``, ``vendored`` …; see :mod:`deeprepo.codebase.scope`).
    scopes: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # A summary, not every file's text: Python reprs objects it only means to name (at
        # the end of asyncio.run, its SIGINT handler's repr holds the main task's result, a
        # RunHandle), and a 40 MB codebase cost 110 MB and a third of a second there.
        meta = self.metadata
        return f"Codebase(root={meta.root!r}, files={len(self.files)}, chars={meta.chars})"

    def scope_of(self, path: str) -> str:
        """The scope of ``path``; a path not in the codebase is judged by its name alone."""
        scope = self.scopes.get(path)
        if scope is None:
            from deeprepo.codebase.scope import classify_scope

            scope = classify_scope(path)
        return scope

    def payload(self) -> dict[str, Any]:
        """The JSON-able data the sandbox kernel is started with."""
        return {
            "codebase": self.files,
            "file_tree": self.file_tree,
            "metadata": self.metadata.to_dict(),
        }
