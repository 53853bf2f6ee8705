"""Where a run's outputs go when the user gives no ``--out``."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

RUNS_DIR = Path("deeprepo-runs")


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
