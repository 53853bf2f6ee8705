"""Where a run's outputs go when the user gives no ``--out``."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from deeprepo.base.errors import UsageError
from deeprepo.codebase.runfolders import RUNS_DIR_NAME

RUNS_DIR = Path(RUNS_DIR_NAME)


def check_out_dir(path: Path, flag: str = "--out") -> None:
    """Refuse, before any work, an output directory that cannot be one: an existing
    file, a path under a file, or a folder that cannot be written."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a directory (created if missing)")
    ancestor = path
    while not ancestor.exists():
        if ancestor.parent == ancestor:
            break
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise UsageError(f"{flag} {path}: {ancestor} is a file, so no directory can go there")
    if ancestor.exists() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: {ancestor} is not writable; choose another directory")


def make_out_dir(path: Path, flag: str = "--out") -> None:
    """Create the output directory, or say in one line why it cannot be (exit code 2)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot create it ({exc.strerror or exc}); choose another directory"
        ) from None


def new_run_dir(label: str, now: datetime | None = None) -> Path:
    """A folder that does not exist yet: ``deeprepo-runs/<UTC stamp>-<label>[-N]``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-") or "run"
    base = RUNS_DIR / f"{stamp}-{slug}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out
