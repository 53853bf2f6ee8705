"""Suppressions written in the source: ``# deeprepo: ignore[RULE] reason`` and, when the
policy honours them, the analyzers' own ``# nosec`` and ``# nosemgrep``.

A comment suppresses the findings whose lines it sits on (any line of the finding's range),
or, on a line of its own, the findings of the next line. ``RULE`` is a CWE (``CWE-78`` or
``78``), a finding kind (``command-injection``) or an analyzer's rule id (bandit's ``B602``,
a semgrep rule's name); several are comma-separated; none (``# deeprepo: ignore``) suppresses
every finding on the line. Whatever follows is the reason, recorded with the finding.
``//`` comments work as ``#`` ones (JavaScript, TypeScript and the C family).

A suppressed finding is never dropped: it leaves the result and the ``--fail-on`` gate and
is counted and listed in every output (:class:`~deeprepo.base.finding.SetAside`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from deeprepo.base.finding import Finding, SetAside, normalize_cwe

__all__ = ["SuppressionPolicy", "suppress"]

_COMMENT = r"(?:#|//)\s*"
_DEEPREPO = re.compile(_COMMENT + r"deeprepo:\s*ignore\b(?:\[([^\]]*)\])?(.*)", re.IGNORECASE)
# bandit: ``# nosec``, ``# nosec B602``, ``# nosec: B602, B607``
_NOSEC = re.compile(r"#\s*nosec\b:?([\s\w,-]*)", re.IGNORECASE)
# semgrep: ``# nosemgrep``, ``// nosemgrep: rule-id, other-id``
_NOSEMGREP = re.compile(_COMMENT + r"nosem(?:grep)?\b(?::\s*([\w.,\s-]*))?", re.IGNORECASE)
_ONLY_COMMENT = re.compile(r"\s*(?:#|//)")
_ANALYZER_RULE = re.compile(r"\[(?:bandit|semgrep) ([^\],\s]+)")


@dataclass(frozen=True)
class SuppressionPolicy:
    """Which comments in the source suppress findings."""

    #: ``# deeprepo: ignore[...]`` comments (the repository's config may turn them off).
    inline: bool = True
    #: bandit's ``# nosec`` and semgrep's ``# nosemgrep`` (``--honour-nosec``).
    honour_nosec: bool = False


@dataclass(frozen=True)
class _Comment:
    rules: tuple[str, ...]  # empty: every finding
    reason: str
    text: str


def _rules(spec: str | None) -> tuple[str, ...]:
    return tuple(r for r in re.split(r"[\s,]+", spec or "") if r)


def _comments(line: str, policy: SuppressionPolicy) -> list[_Comment]:
    found: list[_Comment] = []
    if policy.inline and (m := _DEEPREPO.search(line)):
        reason = m.group(2).strip().removesuffix("*/").strip().lstrip(":-– ").strip()
        found.append(_Comment(_rules(m.group(1)), reason, m.group(0).strip()))
    if policy.honour_nosec:
        if m := _NOSEC.search(line):
            # bandit reads test ids only (B602); other words after it are prose.
            ids = tuple(r for r in _rules(m.group(1)) if re.fullmatch(r"B\d+", r, re.I))
            found.append(_Comment(ids, "", "# nosec" + (" " + ",".join(ids) if ids else "")))
        if m := _NOSEMGREP.search(line):
            found.append(_Comment(_rules(m.group(1)), "", m.group(0).strip()))
    return found


def _matches(rule: str, finding: Finding) -> bool:
    lowered = rule.lower()
    if lowered == finding.kind.lower():
        return True
    if re.fullmatch(r"(?:cwe-?)?\d+", lowered) and normalize_cwe(rule) == finding.cwe:
        return True
    analyzer_rule = _ANALYZER_RULE.search(finding.detail)
    return analyzer_rule is not None and analyzer_rule.group(1).lower() == lowered


def _lines_of(finding: Finding, lines: Sequence[str]) -> list[str]:
    """The finding's own lines, and the line above when it holds only a comment."""
    start, end = finding.start_line, min(finding.end_line, len(lines))
    own = list(lines[start - 1 : end]) if 1 <= start <= len(lines) else []
    above = lines[start - 2] if 2 <= start <= len(lines) + 1 else ""
    return [*own, above] if _ONLY_COMMENT.match(above) else own


def suppress(
    findings: Sequence[Finding], files: Mapping[str, str], policy: SuppressionPolicy
) -> tuple[list[Finding], list[SetAside]]:
    """The findings no comment suppresses, and the suppressed ones with the comment and its
    reason (order kept in both)."""
    kept: list[Finding] = []
    suppressed: list[SetAside] = []
    split: dict[str, list[str]] = {}
    for finding in findings:
        text = files.get(finding.file)
        if text is None:
            kept.append(finding)
            continue
        lines = split.setdefault(finding.file, text.split("\n"))
        hit = next(
            (
                c
                for line in _lines_of(finding, lines)
                for c in _comments(line, policy)
                if not c.rules or any(_matches(r, finding) for r in c.rules)
            ),
            None,
        )
        if hit is None:
            kept.append(finding)
        else:
            suppressed.append(SetAside(finding, "suppressed", hit.text, hit.reason))
    return kept, suppressed
