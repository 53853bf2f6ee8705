"""Which true positives a worker reported: the reward's grounding part.

A submitted finding is *grounded* when a worker reported the same finding: a recorded
reply names it — the same file, a line within the tolerance of the submitted line, the
same bug class (CWE family) — and the prompt of that reply carried that file's code around
that line. The file is read by content, as the oracle reads it (``oracle_read``): a reply
naming a file its prompt did not show, or a line far from the code it showed, grounds
nothing, and a line cited in the prompt's own numbering (a slice renumbered from 1) is
mapped back to the file's. So a root that ignores its workers' replies and submits its own
guesses is grounded only where a worker happened to report the same thing.

A finding no worker reported may still rest on reading: the root's own REPL output (what it
was shown after each turn) may have carried the code around it. :func:`root_read` says so,
read by content the same way; the reward credits such a finding at its grounding floor and a
finding on code neither a worker nor the root was shown — a blind guess — at nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from deeprepo.base.finding import Finding, normalize_cwe
from deeprepo.base.jsonl import reply_json
from deeprepo.findings.families import FamilyTable, default_families
from deeprepo.findings.grading import DEFAULT_TOLERANCE
from deeprepo.rl.env.oracle_read import PromptReader, ShownFile

__all__ = [
    "Claim",
    "WorkerReport",
    "grounded",
    "reply_claims",
    "reply_items",
    "root_read",
    "root_views",
    "worker_reports",
]

_LINE_RE = re.compile(r"(?i)\blines?\b\W{0,3}(\d+)")


@dataclass(frozen=True)
class Claim:
    """One finding as a reply names it: file (None when unnamed), line, and its class when
    the reply gives one."""

    file: str | None
    line: int
    cwe: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class WorkerReport:
    """A finding a worker reported about code its prompt showed: the file, the file's line
    number, and the bug class (``None`` when the reply named none)."""

    file: str
    line: int
    family: str | None


def _text(value: object) -> str | None:
    return str(value) if isinstance(value, str | int) and str(value).strip() else None


def reply_claims(text: str) -> list[Claim]:
    """Every finding a worker's reply names: the items of its JSON (plain, fenced or inside
    prose), else every "line N" it mentions (no file, no class)."""
    # An object or a list, whichever opens first.
    for data in reply_json(text, earliest_first=True):
        if isinstance(data, dict):
            # One finding object is named by the keys a list item is named by.
            one = "line" in data or "start_line" in data
            data = data.get("findings", [data] if one else [])
        if not isinstance(data, list):
            continue
        out: list[Claim] = []
        for item in data:
            if not isinstance(item, dict):
                continue
            try:
                line = int(str(item.get("line", item.get("start_line", ""))).split("-")[0])
            except ValueError:
                continue
            name = item.get("file")
            out.append(
                Claim(
                    str(name).removeprefix("./") if name else None,
                    line,
                    _text(item.get("cwe")),
                    _text(item.get("kind")),
                )
            )
        return out
    return [Claim(None, int(m)) for m in _LINE_RE.findall(text)]


def reply_items(text: str) -> list[tuple[str | None, int]]:
    """``(file or None, line)`` of every finding a worker's reply names (:func:`reply_claims`)."""
    return [(c.file, c.line) for c in reply_claims(text)]


def _file_lines(view: ShownFile, cited: int) -> list[int]:
    """The file lines a worker citing ``cited`` means: those the prompt numbered so, else
    ``cited`` itself (an unnumbered prompt is cited in the file's numbering)."""
    return [n for n, shown in view.number.items() if shown == cited] or [cited]


def worker_reports(
    replies: Sequence[tuple[str, str]],
    codebase: Mapping[str, str],
    tolerance: int = DEFAULT_TOLERANCE,
    families: FamilyTable | None = None,
) -> list[WorkerReport]:
    """Every finding the workers reported about code their prompt carried: a claim counts
    for its named file, or, unnamed, for each file the prompt showed, when the prompt showed
    a line of that file within ``tolerance`` of the claimed one."""
    table = families or default_families()
    reader = PromptReader(codebase)
    out: list[WorkerReport] = []
    for prompt, reply in replies:
        claims = reply_claims(reply)
        if not claims:
            continue
        shown, _instruction, _size = reader.read(prompt)
        for claim in claims:
            family = table.label(claim.cwe, claim.kind) if claim.cwe or claim.kind else None
            for path in [claim.file] if claim.file else sorted(shown):
                view = shown.get(path)
                if view is None:
                    continue  # the prompt did not carry this file's code
                for n in _file_lines(view, claim.line):
                    if _near(view.text, n, tolerance):
                        out.append(WorkerReport(path, n, family))
    return out


def grounded(
    finding: Finding,
    reports: Sequence[WorkerReport],
    tolerance: int = DEFAULT_TOLERANCE,
    families: FamilyTable | None = None,
) -> bool:
    """Whether a worker reported ``finding`` as the root submitted it: same file, a line
    within ``tolerance`` of its start line, and the same bug class (CWE family, or CWE when
    outside the table) unless the worker named none."""
    table = families or default_families()
    path = finding.file.removeprefix("./")
    family = table.label(finding.cwe, finding.kind)
    cwe = normalize_cwe(finding.cwe)
    for r in reports:
        if r.file != path or abs(r.line - finding.start_line) > tolerance:
            continue
        if r.family is None or r.family == family or (cwe is not None and r.family == cwe):
            return True
    return False


def root_views(outputs: Sequence[str], codebase: Mapping[str, str]) -> dict[str, set[int]]:
    """The file lines the root was shown in its own outputs, read by content as a prompt is
    (a file counts where an output carried enough of it to be read: ``oracle_read``)."""
    reader = PromptReader(codebase)
    seen: dict[str, set[int]] = {}
    for text in outputs:
        if not text.strip():
            continue
        shown, _instruction, _size = reader.read(text)
        for path, view in shown.items():
            seen.setdefault(path, set()).update(view.text)
    return seen


def root_read(
    finding: Finding, seen: Mapping[str, set[int]], tolerance: int = DEFAULT_TOLERANCE
) -> bool:
    """Whether the root's own outputs (:func:`root_views`) showed it the code of ``finding``:
    a line of the same file within ``tolerance`` of its start line."""
    return _near(seen.get(finding.file.removeprefix("./"), ()), finding.start_line, tolerance)


def _near(shown: Iterable[int], line: int, tolerance: int) -> bool:
    """Whether a shown file line lies within ``tolerance`` of ``line``."""
    return any(abs(n - line) <= tolerance for n in shown)
