"""The records every analyzer returns, and the rules that apply across analyzers.

- :class:`WorkerFinding` is one finding in the worker JSON shape;
  :class:`AnalyzerWarning` says a file (or part of one) was not analysed.
- :func:`merge_findings` keeps one finding per real issue: the same CWE on the
  same line, or a secret reported by two tools a few lines apart, is one.
- :func:`password_context` turns a weak hash into password storage (CWE-916)
  when the lines around it name a password, whichever tool found the hash.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = [
    "SEVERITY_RANK",
    "AnalyzerWarning",
    "FileResult",
    "WorkerFinding",
    "merge_findings",
    "password_context",
]

SEVERITY_RANK = {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
# Words that put a weak hash in password-storage context (CWE-916 rather than CWE-328).
_PASSWORD_WORDS = re.compile(r"passw(?:or)?d|passphrase|\bpwd\b|\bpass\b|credential", re.IGNORECASE)
# How many lines above a weak-hash call may name the password (e.g. the ``def`` line).
_PASSWORD_LOOKBACK = 3
# Two tools' secret findings whose line ranges overlap (or touch) are one secret:
# bandit reports a call or assignment over all its lines, detect-secrets the value's.
_NEARBY_LINES = 1
_MERGE_NEARBY = frozenset({"CWE-798"})
# Which tool's wording wins a tie: the one with the most specific rule.
_TOOL_RANK = {"deeprepo": 4, "semgrep": 3, "bandit": 2, "detect-secrets": 1}


@dataclass(frozen=True)
class WorkerFinding:
    """One finding in the worker JSON shape, lines 1-based in the original file."""

    line: int
    end_line: int
    kind: str
    cwe: str | None
    severity: str
    title: str
    detail: str
    fix: str
    tool: str

    def to_json(self, file: str | None = None) -> dict[str, Any]:
        """The worker-JSON object; ``file`` is added when given (multi-file prompts)."""
        d = asdict(self)
        return {"file": file, **d} if file is not None else d

    def shifted(self, by: int) -> WorkerFinding:
        return replace(self, line=self.line + by, end_line=self.end_line + by) if by else self


@dataclass(frozen=True)
class AnalyzerWarning:
    """An analyzer could not read (part of) a file: its findings there are missing."""

    tool: str
    message: str

    def to_json(self, file: str) -> dict[str, str]:
        return {"file": file, "tool": self.tool, "message": self.message}


@dataclass(frozen=True)
class FileResult:
    """What the analyzers found in one file, and what they could not do."""

    findings: tuple[WorkerFinding, ...] = ()
    warnings: tuple[AnalyzerWarning, ...] = ()


def _tool_family(tool: str) -> str:
    return tool.split(":", 1)[0]


def _better(new: WorkerFinding, old: WorkerFinding) -> bool:
    a = (SEVERITY_RANK.get(new.severity, 0), _TOOL_RANK.get(_tool_family(new.tool), 0))
    b = (SEVERITY_RANK.get(old.severity, 0), _TOOL_RANK.get(_tool_family(old.tool), 0))
    return a > b


def merge_findings(findings: list[WorkerFinding]) -> list[WorkerFinding]:
    """One finding per real issue, sorted by line.

    Same line and CWE (or kind): one, the most severe, then the most specific
    tool. A hardcoded secret that another *tool* reports on an overlapping or
    adjacent range is the same secret (bandit names the whole call or
    assignment, detect-secrets the value's line); two secrets one tool found a
    line apart stay two.
    """
    best: dict[tuple[int, str], WorkerFinding] = {}
    for f in findings:
        key = (f.line, f.cwe or f.kind)
        old = best.get(key)
        if old is None or _better(f, old):
            best[key] = f
    kept: list[WorkerFinding] = []
    for f in sorted(best.values(), key=lambda f: (f.line, f.end_line, f.cwe or "", f.kind)):
        twin = next(
            (
                i
                for i, k in enumerate(kept)
                if f.cwe in _MERGE_NEARBY
                and k.cwe == f.cwe
                and _tool_family(k.tool) != _tool_family(f.tool)
                and f.line <= k.end_line + _NEARBY_LINES
                and k.line <= f.end_line + _NEARBY_LINES
            ),
            None,
        )
        if twin is None:
            kept.append(f)
        elif _better(f, kept[twin]):
            kept[twin] = f
    return kept


def password_context(lines: list[str], start: int, end: int) -> bool:
    """Whether lines ``start..end`` (1-based) or the few above them name a password."""
    lo = max(0, start - 1 - _PASSWORD_LOOKBACK)
    return bool(_PASSWORD_WORDS.search("\n".join(lines[lo:end])))
