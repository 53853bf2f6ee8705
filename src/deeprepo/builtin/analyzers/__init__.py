"""Well-kept analyzers wrapped as pure functions of text, for the ``static`` worker.

- Python: bandit (``python``), through the ``bandit_map.json`` table.
- JavaScript/TypeScript, HTML templates and Python web code: semgrep's open-source
  engine with deeprepo's own rules (``semgrep``; ``deeprepo/data/semgrep``).
- Every file: detect-secrets, judged by :func:`~.secrets.looks_like_secret`
  (``secrets``).

:func:`analyze_texts` runs them over a batch of whole files (one semgrep
process for the batch) and returns one :class:`FileResult` per file: findings
merged across analyzers (one per real issue) and warnings for what an analyzer
could not read. :func:`analyze_file` does the same for one text that may be a
slice of a file, with lines shifted to the original file.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from deeprepo.base.pyparse import parse_python
from deeprepo.builtin.analyzers.findings import (
    AnalyzerWarning,
    FileResult,
    WorkerFinding,
    merge_findings,
)
from deeprepo.builtin.analyzers.python import is_python, run_bandit, weak_hash_upgrade
from deeprepo.builtin.analyzers.secrets import (
    ScanBudgetExceeded,
    looks_like_secret,
    run_detect_secrets,
    secrets_warning,
)
from deeprepo.builtin.analyzers.secrets import secrets_budget_s as budget_for
from deeprepo.builtin.analyzers.semgrep import run_semgrep, semgrep_applies, semgrep_available
from deeprepo.builtin.analyzers.templates import template_finding_matters

__all__ = [
    "AnalyzerWarning",
    "FileResult",
    "WorkerFinding",
    "analyze_file",
    "analyze_file_result",
    "analyze_texts",
    "is_python",
    "looks_like_secret",
    "merge_findings",
    "run_bandit",
    "run_detect_secrets",
    "run_semgrep",
    "semgrep_applies",
    "semgrep_available",
]


def analyze_texts(
    files: Sequence[tuple[str, str]],
    *,
    whole_files: bool = True,
    semgrep: Callable[[Sequence[tuple[str, str]]], list[FileResult]] = run_semgrep,
    stop: threading.Event | None = None,
    secrets_budget_s: float | None = None,
) -> list[FileResult]:
    """Every analyzer that applies, over ``(path, text)`` pairs; lines relative to each text.

    With ``whole_files=False`` the texts are slices (bandit then trims a
    statement cut at either end instead of refusing the text). ``semgrep``
    scans the files it is given in one go (the static worker passes one that
    also scans files it expects to be asked about next).

    The texts are untrusted: a file whose secrets scan passes ``secrets_budget_s``, or
    every file left once ``stop`` is set, gets a warning (the file is not analysed) instead of a hang.
    The budget defaults to :func:`~.secrets.secrets_budget_s` of each file's size.
    """
    semgrep_at = [i for i, (path, text) in enumerate(files) if semgrep_applies(path, text)]
    # semgrep runs in its own process: start it first and run the in-process
    # analyzers meanwhile, so both cores are busy.
    scan = _background().submit(semgrep, [files[i] for i in semgrep_at]) if semgrep_at else None
    out: list[tuple[list[WorkerFinding], list[AnalyzerWarning]]] = []
    for path, text in files:
        found: list[WorkerFinding] = []
        warnings: list[AnalyzerWarning] = []
        if stop is not None and stop.is_set():  # the run is over: start nothing more
            warnings.append(_NOT_STARTED)
            out.append((found, warnings))
            continue
        if is_python(path, text):
            bandit_found, bandit_warned = run_bandit(text, whole_file=whole_files)
            found += bandit_found
            warnings += bandit_warned
        try:
            budget = secrets_budget_s if secrets_budget_s is not None else budget_for(len(text))
            found += run_detect_secrets(path, text, budget_s=budget, stop=stop)
        except ScanBudgetExceeded as exc:
            warnings.append(secrets_warning(exc, budget))
        out.append((found, warnings))
    by_semgrep = dict(zip(semgrep_at, scan.result(), strict=True)) if scan is not None else {}
    results = []
    for i, ((path, text), (found, warnings)) in enumerate(zip(files, out, strict=True)):
        if i in by_semgrep:
            # A template's unescaped output is XSS only in HTML and only for data a user sets.
            found += [
                f
                for f in by_semgrep[i].findings
                if template_finding_matters(
                    f.tool.removeprefix("semgrep:"), path, text, f.line, f.end_line
                )
            ]
            warnings += by_semgrep[i].warnings
        lines = text.split("\n")
        found = [weak_hash_upgrade(f, lines) for f in found]
        if any(f.cwe == "CWE-798" for f in found):
            prose = _prose_lines(path, text, lines)
            found = [f for f in found if f.cwe != "CWE-798" or f.line not in prose]
        results.append(FileResult(tuple(merge_findings(found)), tuple(warnings)))
    return results


_NOT_STARTED = AnalyzerWarning(
    "analyzers", "not analysed by analyzers: the run ended before this file's turn"
)
_POOL_LOCK = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _background() -> ThreadPoolExecutor:
    """Threads that wait on semgrep processes (and on each other's batches)."""
    global _pool
    with _POOL_LOCK:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="deeprepo-semgrep")
        return _pool


def analyze_file_result(path: str, text: str, start_line: int = 1) -> FileResult:
    """:func:`analyze_texts` for one text taken at ``start_line`` of its file (a slice when > 1)."""
    (result,) = analyze_texts([(path, text)], whole_files=False)
    shift = start_line - 1
    return FileResult(tuple(f.shifted(shift) for f in result.findings), result.warnings)


def analyze_file(path: str, text: str, start_line: int = 1) -> list[WorkerFinding]:
    """The findings of :func:`analyze_file_result`, lines in the original file."""
    return list(analyze_file_result(path, text, start_line).findings)


_COMMENT_PREFIXES = ("#", "//", "/*", "* ", "<!--", "--")


def _prose_lines(path: str, text: str, lines: list[str]) -> set[int]:
    """Lines of comments and Python docstrings: an example ``SECRET_KEY = 'dev'`` there is documentation."""
    out = {n for n, line in enumerate(lines, 1) if line.lstrip().startswith(_COMMENT_PREFIXES)}
    if is_python(path, text):
        try:
            tree = parse_python(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return out
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out
