"""Well-kept analyzers (bandit, detect-secrets) wrapped as pure functions of text.

:func:`analyze_file` takes a file's path and text (or a slice of it) and returns
:class:`WorkerFinding` records with line numbers in the *original* file. Python
goes through bandit and detect-secrets; every other file through detect-secrets
only. Both libraries are imported lazily, and their one-time setup is cached so
a batch of hundreds of files pays for it once.

bandit's ``# nosec`` comments are ignored: the repository under analysis is
untrusted (DESIGN §10), and a planted ``# nosec`` must not hide a bug from the
audit. detect-secrets' ``# pragma: allowlist secret`` is still honoured.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import tempfile
import textwrap
import threading
from dataclasses import asdict, dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from deeprepo.errors import ConfigError

PYTHON_SUFFIXES = (".py", ".pyw", ".pyi")
_CONFIDENCE_RANK = {"undefined": 0, "low": 1, "medium": 2, "high": 3}
_SEVERITY_RANK = {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
# Words that put a weak hash in password-storage context (CWE-916 rather than CWE-328).
_PASSWORD_WORDS = re.compile(r"passw(?:or)?d|passphrase|\bpwd\b|\bpass\b|credential", re.IGNORECASE)
# How many lines above a weak-hash call may name the password (e.g. the ``def`` line).
_PASSWORD_LOOKBACK = 3
# A slice cut mid-statement does not parse; drop at most this many lines from each end.
_MAX_TRIM = 25
# Entropy detectors fire on hashes, ids and test fixtures more often than the
# provider-specific and keyword detectors do.
_WEAKER_SECRET_TYPES = frozenset({"Base64 High Entropy String", "Hex High Entropy String"})
_SECRET_FIX = (
    "Remove the value from the source, read it from the environment or a secrets manager, "
    "and rotate it: it stays in the repository history."
)


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
            ast.parse(window)
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
        except ValueError:  # null bytes
            return None
        return (window, head) if window.strip() else None
    return None


def run_bandit(text: str) -> list[WorkerFinding]:
    """bandit on Python source; lines are relative to ``text`` (1-based)."""
    from bandit.core import manager

    found = _parseable_window(text)
    if found is None:
        return []
    window, offset = found
    table = _bandit_map()
    mgr = manager.BanditManager(_bandit_config(), "file", quiet=True, ignore_nosec=True)
    with tempfile.TemporaryDirectory(prefix="deeprepo-bandit-") as tmp:
        path = os.path.join(tmp, "snippet.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(window)
        mgr.discover_files([path])
        mgr.run_tests()
        issues = mgr.get_issue_list()
    source_lines = text.split("\n")
    out = []
    for issue in issues:
        finding = _from_bandit_issue(issue, table, offset, source_lines)
        if finding is not None:
            out.append(finding)
    return out


def _from_bandit_issue(
    issue: Any, table: _BanditMap, offset: int, source_lines: list[str]
) -> WorkerFinding | None:
    test_id = str(issue.test_id)
    if test_id in table.drop:
        return None
    rule = table.tests.get(test_id, {})
    floor = rule.get("min_confidence", table.min_confidence)
    if _CONFIDENCE_RANK.get(str(issue.confidence).lower(), 0) < _CONFIDENCE_RANK.get(floor, 2):
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
    fix = rule.get("fix", "")
    ctx = table.password_context
    if test_id in ctx.get("applies_to", ()):
        lo = max(0, start - 1 - _PASSWORD_LOOKBACK)
        if _PASSWORD_WORDS.search("\n".join(source_lines[lo:end])):
            kind, cwe, severity = ctx["kind"], ctx["cwe"], ctx["severity"]
            title, fix = ctx["title"], ctx["fix"]
    return WorkerFinding(
        line=start,
        end_line=end,
        kind=kind,
        cwe=cwe,
        severity=severity if severity in _SEVERITY_RANK else "medium",
        title=title,
        detail=f"{detail} [bandit {test_id}, confidence {str(issue.confidence).lower()}]",
        fix=fix,
        tool=f"bandit:{test_id}",
    )


_SECRETS_LOCK = threading.Lock()
_VERIFY_FILTER = "detect_secrets.filters.common.is_ignored_due_to_verification_policies"


def _ensure_secret_plugins() -> None:
    """Enable detect-secrets' default plugins in its process-wide settings (once).

    detect-secrets keeps its settings in a global; the default set is what
    ``detect-secrets scan`` uses. Callers hold ``_SECRETS_LOCK``.
    """
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import get_filters, get_settings

    settings = get_settings()
    if not settings.plugins:
        classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
        settings.configure_plugins([{"name": cls.__name__} for cls in classes])
    # With this filter configured, plugins verify candidates against live
    # services; deeprepo never touches the network from the analyzers.
    if settings.filters.pop(_VERIFY_FILTER, None) is not None:
        get_filters.cache_clear()


def _any_plugin_matches(plugins: list[Any], path: str, lines: list[tuple[int, str]]) -> bool:
    """Whether any plugin matches any line, before filters.

    Filters only remove candidates, so a file with no raw match has no
    finding; most files have none, and this direct pass is several times
    cheaper than the library's injected per-line loop, which then runs (with
    its filters and context) only on files that have a match.
    """
    try:
        return any(
            plugin.analyze_line(filename=path, line=line.rstrip(), line_number=n)
            for n, line in lines
            for plugin in plugins
        )
    except Exception:  # a plugin that wants more than this: let the library decide
        return True


def run_detect_secrets(path: str, text: str) -> list[WorkerFinding]:
    """detect-secrets' default plugins over ``text``; lines relative to ``text``.

    ``path`` picks the file-type rules (e.g. quoting in Python vs YAML). The
    secret value is never put into the finding.
    """
    try:
        # The library's own per-line loop (filters, context) without its file
        # reading, so text already in memory is scanned as ``scan_file`` would.
        from detect_secrets.core.scan import _process_line_based_plugins
    except ImportError as exc:  # pragma: no cover - detect-secrets is a core dependency
        raise ConfigError(
            "the static worker needs detect-secrets 1.x: pip install 'detect-secrets>=1.5,<2'"
        ) from exc

    from detect_secrets.settings import get_plugins

    lines = list(enumerate(text.split("\n"), 1))
    with _SECRETS_LOCK:
        _ensure_secret_plugins()
        if not _any_plugin_matches(get_plugins(), path, lines):
            return []
        secrets = list(_process_line_based_plugins(lines, path))
    by_line: dict[int, list[str]] = {}
    for secret in secrets:
        types = by_line.setdefault(int(secret.line_number), [])
        if secret.type not in types:
            types.append(str(secret.type))
    out = []
    for line, types in sorted(by_line.items()):
        weak = all(t in _WEAKER_SECRET_TYPES for t in types)
        out.append(
            WorkerFinding(
                line=line,
                end_line=line,
                kind="hardcoded-secret",
                cwe="CWE-798",
                severity="medium" if weak else "high",
                title="Hardcoded secret in source"
                if not weak
                else "Possible secret (high-entropy string)",
                detail=(
                    f"detect-secrets matched this line ({', '.join(types)}). "
                    "Anyone who can read the code or its history has the value."
                ),
                fix=_SECRET_FIX,
                tool="detect-secrets",
            )
        )
    return out


def is_python(path: str, text: str) -> bool:
    """By suffix, or a ``python`` shebang for extension-less scripts."""
    if path.lower().endswith(PYTHON_SUFFIXES):
        return True
    first = text.split("\n", 1)[0]
    return first.startswith("#!") and "python" in first


def merge_findings(findings: list[WorkerFinding]) -> list[WorkerFinding]:
    """One finding per (line, CWE or kind): the most severe wins, bandit before others on ties."""
    best: dict[tuple[int, str], WorkerFinding] = {}
    for f in findings:
        key = (f.line, f.cwe or f.kind)
        old = best.get(key)
        if old is None or _SEVERITY_RANK[f.severity] > _SEVERITY_RANK[old.severity]:
            best[key] = f
    return sorted(best.values(), key=lambda f: (f.line, f.end_line, f.cwe or "", f.kind))


def analyze_file(path: str, text: str, start_line: int = 1) -> list[WorkerFinding]:
    """All analyzers that apply to ``path``; lines shifted so ``text`` starts at ``start_line``."""
    found = run_bandit(text) if is_python(path, text) else []
    found += run_detect_secrets(path, text)
    shift = start_line - 1
    if shift:
        found = [replace(f, line=f.line + shift, end_line=f.end_line + shift) for f in found]
    return merge_findings(found)
