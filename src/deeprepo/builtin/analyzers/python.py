"""bandit on Python source, mapped through ``deeprepo/data/bandit_map.json``.

:func:`run_bandit` takes a whole file (or, when the file is not known, a slice
of it) and returns :class:`WorkerFinding` records with lines relative to the
text, plus an :class:`AnalyzerWarning` when the text does not parse: bandit
reads Python with the running interpreter's grammar, so a file written for a
newer Python than the one deeprepo runs on is not analysed, and says so.

bandit's ``# nosec`` comments are ignored here: the repository under analysis is
untrusted (DESIGN §10), and a planted ``# nosec`` must not hide a bug from the
audit. A run honours them only when asked (``--honour-nosec``), after the analyzers,
and counts what they suppressed (``findings/suppress.py``).
"""

from __future__ import annotations

import ast
import json
import logging
import os
import platform
import re
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from deeprepo.base.errors import ConfigError
from deeprepo.base.pyparse import PARSE_LOCK, parse_python
from deeprepo.builtin.analyzers.findings import (
    SEVERITY_RANK,
    AnalyzerWarning,
    WorkerFinding,
    password_context,
)
from deeprepo.builtin.analyzers.pyuse import JUDGED_TESTS, SourceIndex
from deeprepo.builtin.analyzers.secrets import looks_like_secret, names_a_non_secret
from deeprepo.builtin.analyzers.signing import HINT as SIGNING_HINT
from deeprepo.builtin.analyzers.signing import signing_key_findings

__all__ = ["PYTHON_SUFFIXES", "is_python", "python_parser", "run_bandit", "weak_hash_upgrade"]

PYTHON_SUFFIXES = (".py", ".pyw", ".pyi")
_CONFIDENCE_RANK = {"undefined": 0, "low": 1, "medium": 2, "high": 3}
# A slice cut mid-statement does not parse; drop at most this many lines from each end.
_MAX_TRIM = 25
_SECRET_TESTS = frozenset({"B105", "B106", "B107"})
# bandit's text for B105-B107 ends with the literal: "Possible hardcoded password: 'x'".
_BANDIT_LITERAL = re.compile(r":\s*(['\"])(.*)\1\s*$", re.S)
_PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class _BanditMap:
    min_confidence: str
    drop: frozenset[str]
    tests: dict[str, dict[str, str]]
    password_context: dict[str, Any]


@cache
def _bandit_map() -> _BanditMap:
    """The bandit-test → finding table shipped as ``deeprepo/data/bandit_map.json``."""
    try:
        raw = json.loads(resources.files("deeprepo.data").joinpath("bandit_map.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read deeprepo/data/bandit_map.json ({exc}); reinstall deeprepo"
        ) from exc
    return _BanditMap(
        min_confidence=str(raw.get("min_confidence", "medium")).lower(),
        drop=frozenset(raw.get("drop", [])),
        tests=dict(raw.get("tests", {})),
        password_context=dict(raw.get("password_context", {})),
    )


@cache
def _bandit_config() -> Any:
    """bandit's default configuration, built once per process."""
    try:
        from bandit.core import config as b_config
    except ImportError as exc:  # pragma: no cover - bandit is a core dependency
        raise ConfigError("the static worker needs bandit: pip install bandit") from exc
    # bandit logs a warning per unknown word in a ``# nosec`` comment and per
    # unparseable file; they say nothing the findings do not.
    logging.getLogger("bandit").setLevel(logging.ERROR)
    return b_config.BanditConfig()


def _parseable_window(text: str) -> tuple[str, int] | None:
    """The part of ``text`` that parses as Python, and how many lines were cut at its top.

    A slice of a file may start inside an indented block or cut a statement in
    two. Dedenting, then dropping the lines up to a syntax error near either
    end (at most ``_MAX_TRIM`` per end), recovers the rest. An error in the
    middle means the file is not Python 3; ``None`` then.
    """
    lines = text.split("\n")
    head, tail = 0, len(lines)
    while head < tail:
        window = textwrap.dedent("\n".join(lines[head:tail]))
        try:
            parse_python(window)
        except SyntaxError as exc:
            bad = min(tail - 1, head + max(1, exc.lineno or 1) - 1)
            near_top = bad - head < tail - bad
            if near_top and bad + 1 <= _MAX_TRIM:
                head = bad + 1
            elif not near_top and len(lines) - bad <= _MAX_TRIM:
                tail = bad
            else:
                return None
            continue
        except (ValueError, RecursionError, MemoryError):  # null bytes, nested too deep
            return None
        return (window, head) if window.strip() else None
    return None


def _syntax_warning(exc: SyntaxError, offset: int = 0) -> AnalyzerWarning:
    where = f"line {(exc.lineno or 1) + offset}: {exc.msg}" if exc.lineno else exc.msg
    return AnalyzerWarning(
        "bandit",
        f"not analysed by bandit: does not parse as Python {_PYTHON_VERSION} ({where}); "
        "written for a newer Python, or not Python 3",
    )


def _too_deep(exc: BaseException) -> AnalyzerWarning:
    return AnalyzerWarning(
        "bandit",
        f"not analysed by bandit: nested too deep for Python's parser ({type(exc).__name__})",
    )


def run_bandit(
    text: str, *, whole_file: bool = True
) -> tuple[list[WorkerFinding], list[AnalyzerWarning]]:
    """bandit on Python source; lines are relative to ``text`` (1-based).

    A whole file must parse as it is. A slice (``whole_file=False``) may start
    inside a block or cut a statement, so it is dedented and trimmed first.
    """
    from bandit.core import manager

    if whole_file:
        try:
            parse_python(text)
        except SyntaxError as exc:
            return [], [_syntax_warning(exc)]
        except ValueError:  # null bytes
            return [], [AnalyzerWarning("bandit", "not analysed by bandit: null bytes in source")]
        except (RecursionError, MemoryError) as exc:
            return [], [_too_deep(exc)]
        window, offset = text, 0
    else:
        found = _parseable_window(text)
        if found is None:
            try:
                parse_python(textwrap.dedent(text))
            except SyntaxError as exc:
                return [], [_syntax_warning(exc)]
            except (RecursionError, MemoryError) as exc:
                return [], [_too_deep(exc)]
            except ValueError:
                pass
            return [], [
                AnalyzerWarning("bandit", "not analysed by bandit: the slice does not parse")
            ]
        window, offset = found
    table = _bandit_map()
    mgr = manager.BanditManager(_bandit_config(), "file", quiet=True, ignore_nosec=True)
    with tempfile.TemporaryDirectory(prefix="deeprepo-bandit-") as tmp:
        path = os.path.join(tmp, "snippet.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(window)
        mgr.discover_files([path])
        with PARSE_LOCK:  # bandit parses the file itself
            mgr.run_tests()
        issues = mgr.get_issue_list()
        if mgr.skipped:  # bandit caught its own failure (its visitor recursed too deep)
            reason = str(mgr.skipped[0][1])[:120]
            return [], [AnalyzerWarning("bandit", f"not analysed by bandit: {reason}")]
    out = []
    lines = window.split("\n")
    index = _index(window) if any(str(i.test_id) in JUDGED_TESTS for i in issues) else None
    for issue in issues:
        finding = _from_bandit_issue(issue, table, offset)
        if finding is None:
            continue
        test_id = str(issue.test_id)
        if test_id in _SECRET_TESTS and names_a_non_secret(
            lines[finding.line - offset - 1] if 0 < finding.line - offset <= len(lines) else ""
        ):
            continue
        # random, /tmp, 0.0.0.0 and mark_safe are bugs only by how their value is used.
        if (
            test_id in JUDGED_TESTS
            and index is not None
            and not index.used_as_flagged(test_id, finding.line - offset, finding.end_line - offset)
        ):
            continue
        out.append(finding)
    if SIGNING_HINT.search(window):
        tree = index.tree if index is not None else _parse(window)
        if tree is not None:
            out += signing_key_findings(tree, offset)
    return out, []


def _parse(source: str) -> ast.Module | None:
    try:
        return parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _index(source: str) -> SourceIndex | None:
    tree = _parse(source)
    try:
        return SourceIndex(tree) if tree is not None else None
    except RecursionError:
        return None


def _from_bandit_issue(issue: Any, table: _BanditMap, offset: int) -> WorkerFinding | None:
    test_id = str(issue.test_id)
    if test_id in table.drop:
        return None
    rule = table.tests.get(test_id, {})
    floor = rule.get("min_confidence", table.min_confidence)
    if _CONFIDENCE_RANK.get(str(issue.confidence).lower(), 0) < _CONFIDENCE_RANK.get(floor, 2):
        return None
    if test_id in _SECRET_TESTS:
        literal = _BANDIT_LITERAL.search(str(issue.text))
        if literal is None or not looks_like_secret(literal.group(2)):
            return None
    rng = [int(n) for n in (issue.linerange or [issue.lineno])] or [int(issue.lineno)]
    start = max(1, min(rng)) + offset
    end = max(start, max(rng) + offset)
    bandit_cwe = getattr(getattr(issue, "cwe", None), "id", 0)
    kind = rule.get("kind", str(getattr(issue, "test", "") or test_id).replace("_", "-"))
    cwe = rule.get("cwe") or (f"CWE-{bandit_cwe}" if bandit_cwe else None)
    severity = rule.get("severity", str(issue.severity).lower())
    title = rule.get("title", str(issue.text))
    # Rules for secrets carry their own detail so the secret itself is never echoed.
    detail = rule.get("detail", str(issue.text))
    return WorkerFinding(
        line=start,
        end_line=end,
        kind=kind,
        cwe=cwe,
        severity=severity if severity in SEVERITY_RANK else "medium",
        title=title,
        detail=f"{detail} [bandit {test_id}, confidence {str(issue.confidence).lower()}]",
        fix=rule.get("fix", ""),
        tool=f"bandit:{test_id}",
    )


def weak_hash_upgrade(finding: WorkerFinding, lines: list[str]) -> WorkerFinding:
    """A weak hash on lines that name a password is password storage (CWE-916), from any tool."""
    ctx = _bandit_map().password_context
    if finding.cwe != "CWE-328" or not password_context(lines, finding.line, finding.end_line):
        return finding
    return WorkerFinding(
        line=finding.line,
        end_line=finding.end_line,
        kind=ctx["kind"],
        cwe=ctx["cwe"],
        severity=ctx["severity"],
        title=ctx["title"],
        detail=finding.detail,
        fix=ctx["fix"],
        tool=finding.tool,
    )


def python_parser() -> str:
    """The interpreter whose grammar bandit parses with (deeprepo's own): a file written for a
    newer Python does not parse under it and is named as not analysed."""
    return f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"


def is_python(path: str, text: str) -> bool:
    """By suffix, or a ``python`` shebang for extension-less scripts."""
    if path.lower().endswith(PYTHON_SUFFIXES):
        return True
    first = text.split("\n", 1)[0]
    return first.startswith("#!") and "python" in first
