"""The configuration's ``include`` and ``exclude`` paths: gitignore-style globs that narrow
a loaded codebase to the files the audit is about.

``exclude = ["tests/fixtures/", "*.min.js"]`` leaves those out; ``include = ["src/"]`` keeps
only what one of its globs names (the file, or a folder above it). A pattern means what it
means in a ``.gitignore`` at the target's root (:mod:`deeprepo.codebase.ignore`), ``!``
negation included. What was left out is counted in a load note, never silently gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deeprepo.base.errors import UsageError
from deeprepo.codebase.ignore import IgnoreRules
from deeprepo.codebase.loader import codebase_from_files
from deeprepo.codebase.model import Codebase

__all__ = ["PathFilter", "narrow"]


def _rules(key: str, patterns: Sequence[str]) -> IgnoreRules | None:
    if not patterns:
        return None
    rules = IgnoreRules(patterns)
    if rules.invalid:
        _, line, why = rules.invalid[0]
        raise UsageError(f"{key} pattern {line!r} is not a valid glob ({why}); fix or remove it")
    return rules


def _names(rules: IgnoreRules, path: str) -> bool:
    """A rule names ``path`` or a folder above it (the nearest decision wins)."""
    parts = path.split("/")
    for depth in range(len(parts), 0, -1):
        decided = rules.match("/".join(parts[:depth]), depth < len(parts))
        if decided is not None:
            return decided
    return False


@dataclass(frozen=True)
class PathFilter:
    """Which loaded paths the audit keeps (both empty: all of them)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def check(self) -> None:
        """Refuse a pattern that is not a valid glob, before any work."""
        _rules("include", self.include)
        _rules("exclude", self.exclude)


def narrow(codebase: Codebase, paths: PathFilter) -> Codebase:
    """The codebase without the files ``paths`` leaves out, with a note counting them."""
    if not paths.include and not paths.exclude:
        return codebase
    include, exclude = _rules("include", paths.include), _rules("exclude", paths.exclude)
    kept = {
        p: t
        for p, t in codebase.files.items()
        if (include is None or _names(include, p)) and (exclude is None or not _names(exclude, p))
    }
    left_out = len(codebase.files) - len(kept)
    if not kept:
        raise UsageError(
            f"the configuration's include/exclude paths leave none of the "
            f"{len(codebase.files)} loaded files to audit; check [tool.deeprepo] include and "
            "exclude"
        )
    meta = codebase.metadata
    notes = list(meta.notes)
    if left_out:
        notes.append(f"{left_out:,} file(s) left out by the configuration's include/exclude paths")
    return codebase_from_files(
        kept,
        root_name=meta.root,
        skipped=meta.skipped,
        notes=notes,
        revision=meta.revision,
        ignored=meta.ignored,
        run_folders=meta.run_folders,
    )
