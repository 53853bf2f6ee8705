"""Set aside, before the outputs are written, the findings a comment suppresses and those
already in the baseline: out of the result and the ``--fail-on`` gate, counted and listed in
every output (``RunResult.set_aside``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from deeprepo.base.finding import Baseline, sort_by_severity
from deeprepo.base.records import RunResult
from deeprepo.findings.baseline import subtract
from deeprepo.findings.fingerprint import fingerprints
from deeprepo.findings.suppress import SuppressionPolicy, suppress

__all__ = ["set_aside_findings"]


def set_aside_findings(
    result: RunResult,
    files: Mapping[str, str],
    policy: SuppressionPolicy,
    baseline: Baseline | None,
) -> RunResult:
    """The result with suppressed, then baselined, findings moved to ``set_aside``.

    Fingerprints are taken over every finding the run made, sorted as ``findings.sarif``
    lists them, so they are the very ones the SARIF file carries (``report/sarif.py``)."""
    ordered = sort_by_severity(result.findings)
    prints = {id(f): fp for f, fp in zip(ordered, fingerprints(ordered, files), strict=True)}
    kept, aside = suppress(ordered, files, policy)
    if baseline is not None:
        kept, known = subtract([(f, prints[id(f)]) for f in kept], baseline)
        aside += known
    return replace(result, findings=kept, set_aside=[*result.set_aside, *aside], baseline=baseline)
