"""Unique finds: findings of one configuration that no other configuration found.

Two findings are *the same find* when they are on the same file, in the same CWE family
(``data/cwe_families.json``: by CWE, else by kind; the CWE itself when it has no family)
and their start lines are at most ``tolerance`` lines apart. A configuration's findings
over its repetitions on one repository are first merged into distinct finds (so a bug seen
in three repetitions counts once); a find is unique when no other configuration has a
finding that is the same find on that repository.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from deeprepo.base.finding import Finding
from deeprepo.findings.families import FamilyTable, default_families

__all__ = ["distinct_finds", "same_find", "unique_finds"]


def _family(f: Finding, table: FamilyTable) -> str:
    return table.label(f.cwe, f.kind)


def same_find(a: Finding, b: Finding, tolerance: int, table: FamilyTable | None = None) -> bool:
    """Same file, same CWE family, start lines within ``tolerance``."""
    t = table or default_families()
    return (
        a.file.removeprefix("./") == b.file.removeprefix("./")
        and abs(a.start_line - b.start_line) <= tolerance
        and _family(a, t) == _family(b, t)
    )


def _key(f: Finding, table: FamilyTable) -> tuple[str, str]:
    return f.file.removeprefix("./"), _family(f, table)


def distinct_finds(
    findings: Sequence[Finding], tolerance: int, table: FamilyTable | None = None
) -> list[Finding]:
    """One representative per find, in the order first seen."""
    t = table or default_families()
    kept: list[Finding] = []
    lines: dict[tuple[str, str], list[int]] = {}
    for f in findings:
        seen = lines.setdefault(_key(f, t), [])
        if not any(abs(f.start_line - n) <= tolerance for n in seen):
            kept.append(f)
            seen.append(f.start_line)
    return kept


def unique_finds(
    by_config: Mapping[str, Sequence[Finding]], tolerance: int, table: FamilyTable | None = None
) -> dict[str, list[Finding]]:
    """For one repository: configuration → its distinct finds no other configuration made."""
    t = table or default_families()
    lines: dict[str, dict[tuple[str, str], list[int]]] = {}
    for name, findings in by_config.items():
        index: dict[tuple[str, str], list[int]] = {}
        for f in findings:
            index.setdefault(_key(f, t), []).append(f.start_line)
        lines[name] = index
    out: dict[str, list[Finding]] = {}
    for name, findings in by_config.items():
        out[name] = [
            f
            for f in distinct_finds(findings, tolerance, t)
            if not any(
                abs(f.start_line - n) <= tolerance
                for other, index in lines.items()
                if other != name
                for n in index.get(_key(f, t), ())
            )
        ]
    return out
