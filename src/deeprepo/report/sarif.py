"""``findings.sarif``: a run's findings as SARIF 2.1.0, for GitHub code scanning and IDEs.

Valid against the OASIS schema (a test checks every kind of run), with what GitHub code
scanning reads beyond it: one rule per finding kind with ``properties.tags``
(``security``, ``external/cwe/cwe-N``) and ``security-severity``, a ``helpUri`` to the CWE
page, relative ``%SRCROOT%`` paths, ``partialFingerprints`` that stay the same for the same
finding across runs, and one ``invocation`` saying whether the run audited everything.

Text is JSON-encoded, never markdown-escaped: SARIF's ``text`` fields are plain text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, metadata
from typing import Any
from urllib.parse import quote

from deeprepo.base.finding import (
    SEVERITIES,
    Baseline,
    Finding,
    SetAside,
    in_repository,
    sort_by_severity,
)
from deeprepo.base.records import RunResult
from deeprepo.base.textsafe import one_line
from deeprepo.base.version import VERSION
from deeprepo.findings.fingerprint import FINGERPRINT_KEY, fingerprints

__all__ = [
    "FINGERPRINT_KEY",
    "INFORMATION_URI",
    "SARIF_SCHEMA",
    "fingerprints",
    "information_uri",
    "outside_note",
    "sarif_log",
]

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
#: Where ``tool.driver.informationUri`` points when the installed package declares no
#: homepage (``[project.urls]`` in pyproject.toml): the package's name on PyPI.
INFORMATION_URI = "https://pypi.org/project/deeprepo/"


def information_uri() -> str:
    """The package's declared homepage, else :data:`INFORMATION_URI`."""
    try:
        meta = metadata("deeprepo")
    except PackageNotFoundError:
        return INFORMATION_URI
    for entry in meta.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() in {"homepage", "home", "documentation", "source"} and url.strip():
            return str(url).strip()
    home = [str(h).strip() for h in meta.get_all("Home-page") or []]
    return home[0] if home and home[0].startswith("http") else INFORMATION_URI


LEVELS = {"critical": "error", "high": "error", "medium": "warning", "low": "note", "info": "note"}
#: GitHub's ``security-severity`` scale: >= 9.0 critical, 7.0-8.9 high, 4.0-6.9 medium,
#: 0.1-3.9 low; ``info`` findings get none (GitHub shows them without a security grade).
SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0"}
_CWE_NUMBER = re.compile(r"CWE-(\d+)")


def _cwe_number(cwe: str | None) -> str | None:
    m = _CWE_NUMBER.fullmatch(cwe or "")
    return m.group(1) if m else None


def _rule(kind: str, group: Sequence[Finding]) -> dict[str, Any]:
    cwes = sorted({c for f in group if (c := _cwe_number(f.cwe))}, key=int)
    main = Counter(c for f in group if (c := _cwe_number(f.cwe))).most_common(1)
    worst = min(
        (SEVERITIES.index(f.severity) for f in group if f.severity in SEVERITIES), default=2
    )
    severity = SEVERITIES[worst]
    title = f"{kind} (CWE-{main[0][0]})" if main else kind
    props: dict[str, Any] = {}
    if cwes:  # a kind without a CWE gets no tag: nothing says what it is
        # GitHub reads at most 20 tags a rule, and security-severity only with "security".
        props["tags"] = ["security", *(f"external/cwe/cwe-{c}" for c in cwes)][:20]
        if severity in SECURITY_SEVERITY:
            props["security-severity"] = SECURITY_SEVERITY[severity]
    rule: dict[str, Any] = {
        "id": kind,
        "name": "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", kind)) or "Finding",
        "shortDescription": {"text": title},
        "fullDescription": {
            "text": f"Findings of kind {kind}"
            + (f", weakness {', '.join('CWE-' + c for c in cwes)}" if cwes else "")
            + ", reported by a deeprepo run (see its report.md for the models that ran)."
        },
        "defaultConfiguration": {"level": LEVELS[severity]},
    }
    if props:
        rule["properties"] = props
    if main:
        rule["helpUri"] = f"https://cwe.mitre.org/data/definitions/{main[0][0]}.html"
    return rule


def _message(f: Finding) -> str:
    text = f.title.strip() or f.kind
    if f.detail.strip():
        text += (
            f". {f.detail.strip()}"
            if not text.endswith((".", "!", "?"))
            else f" {f.detail.strip()}"
        )
    if f.fix.strip():
        text += f" Fix: {f.fix.strip()}"
    return text


def outside_note(outside: Sequence[Finding], limit: int = 5) -> str:
    """The one line that says which findings named a path outside the repository (for the
    SARIF notification, report.md and the console); empty when none did."""
    if not outside:
        return ""
    paths = sorted({f.file for f in outside})
    shown = ", ".join(repr(one_line(p)[:120]) for p in paths[:limit])
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return (
        f"{len(outside)} finding(s) name a path outside the repository ({shown}{more}): "
        "left out of findings.sarif, kept in findings.json and report.md marked as such"
    )


def _invocation(result: RunResult, outside: Sequence[Finding]) -> dict[str, Any]:
    inv: dict[str, Any] = {
        "executionSuccessful": result.complete,
        "properties": {
            "stopReason": result.stop_reason,
            "filesAudited": len(result.files_covered),
            "filesToAudit": result.coverable_files,
            "unauditedPaths": result.unaudited,
            "salvaged": result.incomplete,
        },
    }
    notes: list[dict[str, Any]] = []
    if not result.complete:
        reason = result.incomplete_reason or result.stop_detail or result.stop_reason
        notes.append(
            {
                "descriptor": {"id": "incomplete-run"},
                "level": "error",
                "message": {
                    "text": f"Incomplete run: audited {len(result.files_covered)} of "
                    f"{result.coverable_files} files: {reason}"
                },
            }
        )
    if outside:
        notes.append(
            {
                "descriptor": {"id": "finding-outside-repository"},
                "level": "warning",
                "message": {"text": outside_note(outside)},
            }
        )
    if notes:
        inv["toolExecutionNotifications"] = notes
    return inv


def _set_aside_fields(aside: SetAside | None, baseline: Baseline | None, fp: str) -> dict[str, Any]:
    """``suppressions`` for a finding set aside (``inSource``: a comment; ``external``: the
    baseline), and, when the run had a baseline, every result's ``baselineState``."""
    out: dict[str, Any] = {}
    if aside is not None:
        suppression: dict[str, Any] = {
            "kind": "inSource" if aside.why == "suppressed" else "external",
            "status": "accepted",
        }
        justification = aside.reason or aside.source
        if justification:
            suppression["justification"] = justification
        out["suppressions"] = [suppression]
    if baseline is not None:
        out["baselineState"] = "unchanged" if fp in baseline.fingerprints else "new"
    return out


def sarif_log(result: RunResult, files: Mapping[str, str]) -> dict[str, Any]:
    """The SARIF log of one run (one ``run`` object); ``files`` is the codebase's text.

    A finding whose file is not a relative path inside the repository (``../x``,
    ``/etc/passwd``, ``file:///…``, ``https://…``; :func:`~deeprepo.base.finding.in_repository`)
    is left out and named in a ``toolExecutionNotifications`` entry: a location in this file
    is always under ``%SRCROOT%``. Findings set aside (suppressed, baselined) are results
    too, with ``suppressions``: a viewer shows them as such, and their fingerprints stay in
    the log for a later ``--baseline``."""
    aside = {id(s.finding): s for s in result.set_aside}
    ordered = sort_by_severity([*result.findings, *(s.finding for s in result.set_aside)])
    findings = [f for f in ordered if in_repository(f.file, files)]
    outside = [f for f in ordered if not in_repository(f.file, files)]
    kinds: dict[str, list[Finding]] = {}
    for f in findings:
        kinds.setdefault(f.kind, []).append(f)
    rules = [_rule(kind, group) for kind, group in kinds.items()]
    index = {kind: i for i, kind in enumerate(kinds)}
    results = []
    for f, fp in zip(findings, fingerprints(findings, files), strict=True):
        results.append(
            {
                "ruleId": f.kind,
                "ruleIndex": index[f.kind],
                "level": LEVELS.get(f.severity, "warning"),
                "message": {"text": _message(f)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {
                                # ":" encoded too: no first segment reads as a scheme.
                                "uri": quote(f.file, safe="/-._~!$&'()*+,;=@"),
                                "uriBaseId": "%SRCROOT%",
                            },
                            "region": {"startLine": f.start_line, "endLine": f.end_line},
                        }
                    }
                ],
                "partialFingerprints": {FINGERPRINT_KEY: fp},
                **_set_aside_fields(aside.get(id(f)), result.baseline, fp),
                "properties": {
                    "scope": f.scope,
                    "severity": f.severity,
                    "cwe": f.cwe,
                    "title": f.title,
                },
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "deeprepo",
                        "version": VERSION,
                        "semanticVersion": VERSION,
                        "informationUri": information_uri(),
                        "rules": rules,
                    }
                },
                "invocations": [_invocation(result, outside)],
                "results": results,
                "columnKind": "unicodeCodePoints",
                "properties": {
                    "rootModel": result.root_model,
                    "subModel": result.sub_model,
                    "auditScopes": result.audit_scopes,
                },
            }
        ],
    }
