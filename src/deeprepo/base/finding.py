"""The :class:`Finding` record and its normalisation from loose dicts."""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import asdict, dataclass
from typing import Any

SEVERITIES = ("critical", "high", "medium", "low", "info")
_SEVERITY_ALIASES = {
    "crit": "critical",
    "error": "high",
    "warning": "medium",
    "warn": "medium",
    "moderate": "medium",
    "minor": "low",
    "note": "info",
    "informational": "info",
    "none": "info",
}
_CWE_RE = re.compile(r"(?:CWE)?[-\s_:]*(\d{1,5})", re.IGNORECASE)
# "file:", "https:", "c:" (a drive), "javascript:": anything a reader could take for a scheme.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def in_repository(path: str, files: Container[str] = ()) -> bool:
    """Whether ``path`` (a finding's file, as a model or an analyzer named it) is a plain
    relative path inside the repository: not empty, not absolute, no ``..``, ``.`` or empty
    segment, no NUL. A path that is not one of ``files`` (the repository's own, whatever their
    names) must also name no scheme or drive (``file:``, ``https:``, ``C:``) and hold no
    backslash or control character. Only such paths are shown as repository locations
    (``findings.sarif``'s ``%SRCROOT%``); a finding on any other path is a claim about
    something that is not in the repository."""
    if not path or path.startswith("/") or "\0" in path:
        return False
    if any(part in ("", ".", "..") for part in path.split("/")):
        return False
    if path in files:
        return True
    return not _SCHEME.match(path) and not any(
        ch == "\\" or ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in path
    )


@dataclass(frozen=True)
class Finding:
    """One reported problem, located by file and line range (1-based, inclusive)."""

    file: str
    start_line: int
    end_line: int
    kind: str
    cwe: str | None
    severity: str
    title: str
    detail: str = ""
    fix: str = ""
    #: The file's scope (``source``, ``test``, ``vendored`` …; :mod:`deeprepo.codebase.scope`).
    scope: str = "source"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> tuple[str, int, str]:
        """Identity used to drop duplicates reported by several workers."""
        return (self.file, self.start_line, self.cwe or self.kind)


#: Why a finding was set aside: a comment in the source (``inSource`` in SARIF), or an earlier
#: run's findings given as the baseline (``external``).
SET_ASIDE_WHY = ("suppressed", "baselined")


@dataclass(frozen=True)
class SetAside:
    """A finding kept out of the result and the ``--fail-on`` gate, yet still counted and
    listed: suppressed by a comment on its line, or already in the baseline."""

    finding: Finding
    why: str  # one of SET_ASIDE_WHY
    #: What said so: the comment (``# deeprepo: ignore[CWE-78] reviewed``) or the baseline.
    source: str
    #: The reason the comment gives, if any (``reviewed``).
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.finding.to_dict(),
            "set_aside": self.why,
            "by": self.source,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Baseline:
    """The findings a run is compared with (``--baseline FILE``, ``--since REV``): a finding
    whose fingerprint is among them is not new, and is set aside as ``baselined``."""

    source: str  # what the reader is told: the file, or ``git revision HEAD~1``
    fingerprints: frozenset[str]


def normalize_cwe(value: object) -> str | None:
    """``89``, ``"cwe-89"``, ``"CWE 89"`` → ``"CWE-89"``; anything else → ``None``."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"CWE-{value}" if value > 0 else None
    m = _CWE_RE.search(str(value))
    return f"CWE-{int(m.group(1))}" if m else None


def normalize_severity(value: object) -> str:
    s = str(value or "").strip().lower()
    if s in SEVERITIES:
        return s
    return _SEVERITY_ALIASES.get(s, "medium")


def _as_int(value: object, default: int) -> int:
    try:
        return int(str(value).strip().split("-")[0]) if value is not None else default
    except (TypeError, ValueError):
        return default


def finding_from_dict(d: dict[str, Any]) -> Finding:
    """Build a Finding from a loose dict (worker JSON, ``add_finding`` call).

    Accepts ``line`` or ``start_line``; clamps lines to >= 1 and end >= start.
    Raises ``ValueError`` when there is no file.
    """
    file = str(d.get("file") or d.get("path") or "").strip()
    if not file:
        raise ValueError("finding has no file")
    start = max(1, _as_int(d.get("start_line", d.get("line")), 1))
    end = max(start, _as_int(d.get("end_line"), start))
    kind = str(d.get("kind") or d.get("type") or "issue").strip() or "issue"
    return Finding(
        file=file.removeprefix("./"),
        start_line=start,
        end_line=end,
        kind=kind,
        cwe=normalize_cwe(d.get("cwe")),
        severity=normalize_severity(d.get("severity")),
        title=str(d.get("title") or kind).strip(),
        detail=str(d.get("detail") or d.get("description") or "").strip(),
        fix=str(d.get("fix") or d.get("recommendation") or "").strip(),
    )


def dedupe(findings: list[Finding]) -> list[Finding]:
    """Keep the first finding per (file, start line, CWE or kind), in order."""
    seen: set[tuple[str, int, str]] = set()
    out: list[Finding] = []
    for f in findings:
        if f.key not in seen:
            seen.add(f.key)
            out.append(f)
    return out


def sort_by_severity(findings: list[Finding]) -> list[Finding]:
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (rank.get(f.severity, 9), f.file, f.start_line))
