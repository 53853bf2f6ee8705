"""deeprepo's own outputs inside a repository, which a load never reads.

A run writes its folder (``calls.jsonl``, ``trajectory.jsonl``, ``metrics.json``,
``trajectory.html`` …) under ``./deeprepo-runs/`` by default, which is often inside the
repository being analysed; reading it back made every rerun audit the last one (three runs
in a row audited 14, 20, then 26 files) and, with a paid worker, pay to read it. So a walk
skips, always and whatever ``.gitignore`` says, every directory that is one of:

- a path the caller names (the run's ``--out`` folder, the default runs folder);
- a folder named ``deeprepo-runs`` (the default runs folder of a run started there);
- a folder that looks like a run folder: ``calls.jsonl`` beside ``trajectory.jsonl`` or
  ``metrics.json`` (a run folder written anywhere with ``--out``).

The root itself is never skipped: analysing a run folder on purpose still works.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

__all__ = ["RUNS_DIR_NAME", "RunFolders", "looks_like_run_folder"]

#: The folder, under the working directory, that runs write to when given no ``--out``.
RUNS_DIR_NAME = "deeprepo-runs"
#: The call log only a deeprepo run writes, and the files one of which always stands beside it.
_MARKER = "calls.jsonl"
_COMPANIONS = ("trajectory.jsonl", "metrics.json")


def looks_like_run_folder(names: Collection[str]) -> bool:
    """True when a directory holding these file names is a deeprepo run folder."""
    return _MARKER in names and any(name in names for name in _COMPANIONS)


class RunFolders:
    """The run folders one walk meets: which to skip, and the list of those skipped."""

    def __init__(self, exclude: Iterable[str | Path] = ()) -> None:
        # The walk joins names onto the real path of the root and follows no link, so its
        # directory paths are real paths too: compared as strings, no system call each.
        self._paths = {os.path.realpath(os.fspath(p)) for p in exclude}
        self.skipped: list[str] = []  # relative paths, "dir/" form, in the walk's order

    def named(self, rel: str, abs_path: str, name: str) -> bool:
        """Skip (and count) the directory ``rel`` if its name or path says it is one."""
        if name == RUNS_DIR_NAME or abs_path in self._paths:
            self.skipped.append(rel + "/")
            return True
        return False

    def holds_run(self, rel_dir: str, names: Collection[str]) -> bool:
        """Skip (and count) the listed directory ``rel_dir`` if its files make it one."""
        if rel_dir and looks_like_run_folder(names):
            self.skipped.append(rel_dir)
            return True
        return False

    def note(self) -> str | None:
        """The load note naming what was skipped, or ``None``."""
        if not self.skipped:
            return None
        shown = sorted(self.skipped)
        more = f" and {len(shown) - 5:,} more" if len(shown) > 5 else ""
        plural = "folder" if len(shown) == 1 else "folders"
        return (
            f"{len(shown):,} {plural} of deeprepo's own outputs (run folders) not loaded: "
            f"{', '.join(shown[:5])}{more}"
        )
