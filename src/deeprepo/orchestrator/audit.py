"""What a run must audit, and whether it did (one truth about coverage).

A run's *audit set* is every non-empty file whose scope (:mod:`deeprepo.codebase.scope`)
is among the audited scopes: by default every scope but ``docs``; ``--include-scope`` and
``--exclude-scope`` change it. A file is *audited* when at least
:data:`AUDIT_MIN_FRACTION` of its non-trivial lines reached a worker *in order*
(``findings.coverage``: shuffled or sampled lines are not an audit) through a prompt the
worker *answered* (a prompt refused by a budget or one whose call failed does not count).
The run is complete only when the root set its answer and every file of the audit set was
audited; otherwise :func:`shortfall` says why, with the option that would change it.

With analyzers as the worker (the ``static`` sub-model), a file also needs every analyzer
that applies to it to have read it: :func:`with_not_analysed` takes out of the audited
files those an analyzer could not read (Python that does not parse under the interpreter
bandit runs on, a semgrep failure, semgrep not installed) and says so in the reason. No
analyzer stands in for another: bandit's rules, semgrep's and detect-secrets' look for
different things, so a file detect-secrets read but bandit could not parse is not audited.
A run that cut findings at a cap (:func:`cut_reason`) is incomplete too.

This is the one coverage figure the console, ``report.md`` and ``metrics.json`` show
(the reward computes its own shares from the same prompts, see ``env/reward.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from deeprepo.base.errors import UsageError
from deeprepo.base.records import NotAnalysed, RunResult, StopReason
from deeprepo.codebase.scope import SCOPES
from deeprepo.findings.coverage import DEFAULT_MIN_FRACTION, CoverageIndex, Shown

__all__ = [
    "AUDIT_MIN_FRACTION",
    "DEFAULT_AUDIT_SCOPES",
    "DispatchStats",
    "audit_set",
    "audited_files",
    "cut_reason",
    "parse_scopes",
    "shortfall",
    "with_not_analysed",
]

#: In-order share of a file's non-trivial lines that must reach a worker for the file to
#: count as audited. Half a file is not an audit: a whole file sent (in one prompt or in
#: slices) scores 1.0; the slack absorbs lines a prompt builder may drop (a long data table).
#: A yes/no per file, for the people reading "audited N of M"; the reward credits the share
#: itself (decision 80).
AUDIT_MIN_FRACTION = DEFAULT_MIN_FRACTION
#: Scopes audited unless the user says otherwise: prose is not code.
DEFAULT_AUDIT_SCOPES: frozenset[str] = frozenset(s for s in SCOPES if s != "docs")


def parse_scopes(include: Iterable[str] = (), exclude: Iterable[str] = ()) -> frozenset[str]:
    """The audited scopes from ``--include-scope`` / ``--exclude-scope`` values.

    Each value may hold several scopes separated by commas; ``all`` means every scope.
    ``include`` replaces the default set; ``exclude`` removes from it.
    """

    def split(values: Iterable[str], flag: str) -> set[str]:
        out: set[str] = set()
        for value in values:
            for part in str(value).split(","):
                name = part.strip().lower()
                if not name:
                    continue
                if name == "all":
                    out.update(SCOPES)
                elif name in SCOPES:
                    out.add(name)
                else:
                    raise UsageError(
                        f"{flag}: unknown scope {part.strip()!r}; choose from "
                        f"{', '.join(SCOPES)} or all"
                    )
        return out

    included = split(include, "--include-scope")
    chosen = set(included) if included else set(DEFAULT_AUDIT_SCOPES)
    chosen -= split(exclude, "--exclude-scope")
    if not chosen:
        raise UsageError("--include-scope/--exclude-scope leave no scope to audit")
    return frozenset(chosen)


def audit_set(
    files: Mapping[str, str], scopes: Mapping[str, str], audited_scopes: Iterable[str]
) -> list[str]:
    """Sorted paths the run must audit: non-empty files whose scope is audited."""
    wanted = frozenset(audited_scopes)
    return sorted(
        path
        for path, text in files.items()
        if text.strip() and scopes.get(path, "source") in wanted
    )


def audited_files(
    files: Mapping[str, str],
    answered_prompts: Iterable[str],
    among: Iterable[str],
    *,
    shown: Shown | None = None,
) -> list[str]:
    """The paths of ``among`` whose content reached a worker, in order, through answered
    prompts (``shown``: what they showed, ``coverage.shown_in``, when the caller has it)."""
    targets = set(among)
    subset = {p: files[p] for p in targets if p in files}
    index = CoverageIndex(subset)
    if shown is None:
        covered = index.covered(answered_prompts, AUDIT_MIN_FRACTION)
    else:
        covered = index.covered_by(shown, AUDIT_MIN_FRACTION)
    return sorted(covered & targets)


@dataclass(frozen=True)
class DispatchStats:
    """What became of the prompts the root sent to workers."""

    answered: int = 0
    refused: int = 0  # refused by a budget before any call was made
    failed: int = 0  # calls that failed for good (provider errors, bad prompts)
    budget_kind: str | None = None  # "sub_calls", "cost" or "timeout": what refused them
    first_error: str | None = None


_BUDGET_OPTION = {
    "sub_calls": "raise --max-sub-calls",
    "cost": "raise --max-cost",
    "timeout": "raise --timeout",
}


def shortfall(
    *,
    unaudited: int,
    answered: bool,
    stop_reason: StopReason,
    stop_detail: str,
    stats: DispatchStats,
    findings_cut: int = 0,
    max_turns: int | None = None,
) -> str:
    """Why the run is incomplete, with the option to change; ``""`` when it is complete.
    ``max_turns`` is set when the root ran out of turns and answered on the extra final one:
    files it never sent are then the limit's doing, not the prompt's."""
    if stop_reason == "interrupted":
        return "interrupted (Ctrl-C or SIGTERM); continue with --resume"
    reasons: list[str] = []
    if stats.refused:
        option = _BUDGET_OPTION.get(stats.budget_kind or "", "raise the budget")
        kind = stats.budget_kind
        budget = f"the {kind.replace('_', '-')} budget" if kind else "a budget"
        reasons.append(f"{stats.refused} worker prompts refused by {budget} ({option})")
    if stats.failed:
        first = f"; first: {stats.first_error}" if stats.first_error else ""
        reasons.append(f"{stats.failed} worker calls failed{first}")
    if stop_reason in ("budget", "timeout", "error", "max_turns") and stop_detail:
        hint = {
            "max_turns": " (raise --max-turns)",
            "timeout": "" if "--timeout" in stop_detail else " (raise --timeout)",
        }.get(stop_reason, "")
        reasons.append(f"stopped on {stop_reason}: {stop_detail}{hint}")
    if unaudited and not reasons and max_turns is not None:
        reasons.append(
            f"the root reached --max-turns {max_turns} before sending them to a worker and "
            "answered on its final turn (raise --max-turns)"
        )
    if unaudited and not reasons:
        reasons.append(
            "the root did not send them to a worker (try --prompt exhaustive, or "
            "--exclude-scope for scopes you do not need)"
        )
    if not answered and not reasons:
        reasons.append(f"the root never set its answer ({stop_reason})")
    if findings_cut:
        reasons.append(cut_reason(findings_cut))
    if not unaudited and answered and not findings_cut:
        return ""
    return "; ".join(reasons)


def cut_reason(findings_cut: int) -> str:
    """The reason a run that dropped findings at a cap gives."""
    return (
        f"{findings_cut:,} findings cut by a cap on findings per cell, turn or run "
        "(record fewer, merged findings per cell)"
    )


def with_not_analysed(
    result: RunResult, unread: Mapping[tuple[str, str], str], python_parser: str = ""
) -> RunResult:
    """``result`` with the audit-set files an analyzer could not read taken out of the
    audited ones and named in :attr:`RunResult.not_analysed` (``unread`` maps
    ``(path, analyzer)`` to why), and ``python_parser`` recorded."""
    audit = set(result.files_covered) | set(result.unaudited)
    gaps = [
        NotAnalysed(path, tool, reason)
        for (path, tool), reason in sorted(unread.items())
        if path in audit
    ]
    if not gaps:
        return replace(result, python_parser=python_parser)
    paths = {g.path for g in gaps}
    reason = not_analysed_reason(gaps)
    return replace(
        result,
        files_covered=[p for p in result.files_covered if p not in paths],
        not_analysed=gaps,
        python_parser=python_parser,
        incomplete_reason="; ".join(r for r in (result.incomplete_reason, reason) if r),
    )


def not_analysed_reason(gaps: list[NotAnalysed]) -> str:
    """How many files each analyzer could not read, with one reason as an example."""
    by_tool: dict[str, list[NotAnalysed]] = {}
    for g in gaps:
        by_tool.setdefault(g.tool, []).append(g)
    parts = []
    for tool, group in by_tool.items():
        example = group[0].reason.removeprefix(f"not analysed by {tool}: ")
        parts.append(f"{len(group):,} not read by {tool} (e.g. {example[:160]})")
    files = len({g.path for g in gaps})
    return f"{files:,} file(s) not analysed: " + "; ".join(parts)
