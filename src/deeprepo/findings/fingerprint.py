"""A finding's fingerprint: the one identity that SARIF's ``partialFingerprints``, the
``fingerprint`` of findings.json and ``--baseline``/``--since`` all use."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from deeprepo.base.finding import Finding

__all__ = ["FINGERPRINT_KEY", "fingerprints"]

#: Our own fingerprint's key in SARIF; GitHub's upload action adds its
#: ``primaryLocationLineHash``.
FINGERPRINT_KEY = "deeprepoFindingHash/v1"
_SPACES = re.compile(r"\s+")


def _line_text(files: Mapping[str, str], path: str, line: int) -> str | None:
    text = files.get(path)
    if text is None:
        return None
    lines = text.split("\n")
    return _SPACES.sub(" ", lines[line - 1]).strip() if 1 <= line <= len(lines) else None


def fingerprints(findings: Sequence[Finding], files: Mapping[str, str]) -> list[str]:
    """One stable fingerprint per finding: SHA-256 of its kind, its file and the text of its
    first line with runs of whitespace collapsed (so it survives lines moving, re-indenting
    and a rerun that words the title differently), cut to 32 hex digits, then ``:n`` for the
    n-th finding with the same hash in this run. A line the repository does not have (a
    finding on a missing file or past the end) is hashed by its number instead."""
    out: list[str] = []
    seen: Counter[str] = Counter()
    for f in findings:
        text = _line_text(files, f.file, f.start_line)
        anchor = f"text:{text}" if text is not None else f"line:{f.start_line}"
        digest = hashlib.sha256("\0".join((f.kind, f.file, anchor)).encode()).hexdigest()[:32]
        seen[digest] += 1
        out.append(f"{digest}:{seen[digest]}")
    return out
