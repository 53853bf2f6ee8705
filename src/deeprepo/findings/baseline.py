"""``--baseline FILE``: the findings of an earlier run, by fingerprint, and the findings of
this run that are not new.

FILE is an earlier run's ``findings.sarif`` (``partialFingerprints``) or ``findings.json``
(each finding's ``fingerprint``). The SARIF file lists every finding of that run, set-aside
ones too (a suppression removed since then does not make a finding look new), so it is the
baseline to keep; findings.json lists only the findings the run reported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Baseline, Finding, SetAside, sort_by_severity
from deeprepo.base.records import RunResult
from deeprepo.findings.fingerprint import FINGERPRINT_KEY, fingerprints

__all__ = ["load_baseline", "run_fingerprints", "subtract"]


def _sarif_prints(log: dict[str, Any]) -> set[str] | None:
    prints: set[str] = set()
    for run in log.get("runs") or []:
        for result in (run or {}).get("results") or []:
            value = ((result or {}).get("partialFingerprints") or {}).get(FINGERPRINT_KEY)
            if not isinstance(value, str):
                return None
            prints.add(value)
    return prints


def _json_prints(findings: list[Any]) -> set[str] | None:
    prints: set[str] = set()
    for finding in findings:
        value = finding.get("fingerprint") if isinstance(finding, dict) else None
        if not isinstance(value, str):
            return None
        prints.add(value)
    return prints


def load_baseline(path: Path) -> Baseline:
    """The fingerprints of the findings in ``path``; a file that is not a deeprepo
    findings.sarif or findings.json is a usage error saying what to give instead."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"--baseline {path} does not exist; give an earlier run's "
            "findings.sarif or findings.json"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(
            f"--baseline {path} cannot be read as JSON ({exc}); give an earlier "
            "run's findings.sarif or findings.json"
        ) from None
    prints: set[str] | None = None
    if isinstance(data, dict) and isinstance(data.get("runs"), list):
        prints = _sarif_prints(data)
    elif isinstance(data, list):
        prints = _json_prints(data)
    if prints is None:
        raise UsageError(
            f"--baseline {path} is not a deeprepo findings.sarif or findings.json with "
            "fingerprints (older versions wrote none); give the run's findings.sarif, or run "
            "the baseline again"
        )
    return Baseline(str(path), frozenset(prints))


def run_fingerprints(result: RunResult, files: Mapping[str, str]) -> frozenset[str]:
    """Every finding of a run, set-aside ones too, by fingerprint: the run as a baseline."""
    everything = [*result.findings, *(s.finding for s in result.set_aside)]
    return frozenset(fingerprints(sort_by_severity(everything), files))


def subtract(
    findings: Sequence[tuple[Finding, str]], baseline: Baseline
) -> tuple[list[Finding], list[SetAside]]:
    """The findings (each with its fingerprint) not in the baseline, and those that are."""
    kept: list[Finding] = []
    known: list[SetAside] = []
    for finding, fingerprint in findings:
        if fingerprint in baseline.fingerprints:
            known.append(SetAside(finding, "baselined", baseline.source))
        else:
            kept.append(finding)
    return kept, known
