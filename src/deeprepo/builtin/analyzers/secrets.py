"""Hardcoded secrets: detect-secrets' scan, and what counts as a secret's value.

detect-secrets finds candidates; :func:`looks_like_secret` decides whether a
value is one. It is used for every tool's secret findings (bandit's B105-B107,
semgrep's rules, detect-secrets), so ``"SECRET_KEY": None``, ``changeme``,
``${API_KEY}``, ``os.environ[...]`` or a field name like ``"password_reset"``
are never reported, whoever matched them. Entropy alone is not enough: a
high-entropy string counts only on a line that names a secret, and never when
the line says it is a hash, a commit or a checksum.

The secret value is never put into a finding.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from deeprepo.base.errors import ConfigError
from deeprepo.builtin.analyzers.findings import AnalyzerWarning, WorkerFinding

__all__ = [
    "SECRETS_BUDGET_S",
    "SECRETS_BUDGET_S_PER_MB",
    "SECRET_FIX",
    "ScanBudgetExceeded",
    "looks_like_secret",
    "names_a_secret",
    "run_detect_secrets",
    "secrets_budget_s",
    "secrets_warning",
]

SECRET_FIX = (
    "Remove the value from the source, read it from the environment or a secrets manager, "
    "and rotate it: it stays in the repository history."
)
# detect-secrets' regexes are super-linear on some lines: its assignment pattern has
# `` *``, `` +`` and `` *`` in a row, so ``password`` + 2,000 spaces costs 25 s (cubic), and
# a few others are quadratic in a line's length. The repository is untrusted, so what the
# plugins see is bounded: runs of blanks are cut to three (no plugin needs more), and a
# line is fed in overlapping windows of ``_SCAN_WIDTH`` characters. A window then costs
# at most a fraction of a second, and a file's scan stops at its budget.
_BLANK_RUN = re.compile(r"[ \t]{4,}")
_SCAN_WIDTH = 1000
_SCAN_OVERLAP = 200  # a secret cut by one window's edge is whole in the next
#: Seconds of detect-secrets one file may take, plus ``SECRETS_BUDGET_S_PER_MB`` for each
#: megabyte of it: real code scans at 3-6 s a megabyte on a loaded core, a file built to be
#: slow at a hundred times that. ``DEEPREPO_SECRETS_BUDGET_S`` in the environment sets a
#: fixed budget instead (:func:`secrets_budget_s`).
SECRETS_BUDGET_S = 20.0
SECRETS_BUDGET_S_PER_MB = 60.0


def secrets_budget_s(chars: int = 0) -> float:
    """The budget for a file of ``chars`` characters (``DEEPREPO_SECRETS_BUDGET_S`` when set
    to a positive number)."""
    try:
        value = float(os.environ.get("DEEPREPO_SECRETS_BUDGET_S", ""))
    except ValueError:
        value = 0.0
    if value > 0:
        return value
    return SECRETS_BUDGET_S + SECRETS_BUDGET_S_PER_MB * chars / 1_000_000


class ScanBudgetExceeded(Exception):
    """A file's scan passed its deadline (or the run stopped); ``line`` is where it was."""

    def __init__(self, line: int, stopped: bool = False) -> None:
        super().__init__(line)
        self.line = line
        self.stopped = stopped


def secrets_warning(exc: ScanBudgetExceeded, budget_s: float) -> AnalyzerWarning:
    """The warning that names a file whose secrets scan was cut short."""
    why = (
        "the run stopped"
        if exc.stopped
        else f"over its {budget_s:g} s budget (lines built to make its regexes slow?)"
    )
    return AnalyzerWarning(
        "detect-secrets",
        f"not analysed by detect-secrets: stopped at line {exc.line}, {why}",
    )


def _bounded_lines(source: list[str]) -> list[str]:
    """Each line as the plugins see it: blank runs after the indentation cut to three."""
    out = []
    for line in source:
        if "    " in line or "\t" in line:
            body = line.lstrip(" \t")
            line = line[: len(line) - len(body)] + _BLANK_RUN.sub("   ", body)
        out.append(line)
    return out


def _scan_units(lines: list[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` pieces the plugins scan: a line longer than ``_SCAN_WIDTH``
    in overlapping windows (the same line number for each)."""
    step = _SCAN_WIDTH - _SCAN_OVERLAP
    for n, line in enumerate(lines, 1):
        if len(line) <= _SCAN_WIDTH:
            yield n, line
            continue
        for at in range(0, len(line) - _SCAN_OVERLAP, step):
            yield n, line[at : at + _SCAN_WIDTH]


_ENTROPY_TYPES = frozenset({"Base64 High Entropy String", "Hex High Entropy String"})
_NOT_VALUES = frozenset(
    {"none", "null", "nil", "undefined", "true", "false", "password", "passwd", "secret",
     "token", "key", "apikey", "api_key", "bearer", "basic", "oauth", "auth", "empty"}
)  # fmt: skip
_PLACEHOLDER = re.compile(
    r"change[-_ ]?me|changeit|replace[-_ ]?(?:me|this|with)|your[-_ ]|^<.*>$|\$\{|\{\{|\}\}|%\(|%s"
    r"|\{\d*\}|x{4,}|\*{3,}|\.{3}|^(?:dummy|fake|sample|example|placeholder|redacted|todo|fixme)"
    r"|(?:dummy|fake|sample|example|placeholder|redacted)$|^os\.|^process\.env|getenv",
    re.IGNORECASE,
)
# Prose, not a key: a prompt or an error message ("Enter password:", "Invalid token").
_MESSAGE = re.compile(
    r"\S\s+\S+\s+\S|[:!?,]\s|[:?]$|(?i:\b(?:invalid|enter|please|wrong|required|missing|incorrect)\b)"
)
# A name, not a value: ``"password_reset"``, ``"x-auth-token"``, ``"SECRET_KEY"``.
_IDENTIFIER = re.compile(r"^(?:[a-z]+(?:[-_.:][a-z]+)+|[A-Z]+(?:[-_.:][A-Z]+)*)$")
# A string annotation (``secret: "Optional[str]" = None``), not a default value.
_TYPE_EXPRESSION = re.compile(r"^[A-Za-z_][\w.]*\[.*\]$")
# Names that hold secrets; plain ``key`` is too common (cache keys, dict keys) to count.
_SECRET_NAME = re.compile(
    r"secret|passw|passwd|pwd|token|api[-_]?key|apikey|private[-_]?key|access[-_]?key"
    r"|signing[-_]?key|encryption[-_]?key|client[-_]?secret|credential|auth[-_]?key",
    re.IGNORECASE,
)
# The name of an assignment or key whose value is public even if the name mentions a secret.
_NON_SECRET_NAME = re.compile(
    r"\w*(?:salt|_iv|header|field|_name|_param|_url|_uri|_path|_file|_env|_var|_prefix|_type|_length)"
    r"[\"']?\s*(?::\s*\w+\s*)?[:=]",
    re.IGNORECASE,
)
# Lines that say the long hex or base64 string is not a secret.
_NOT_SECRET_CONTEXT = re.compile(
    r"sha\d*|md5|hash|digest|checksum|commit|\brev\b|revision|etag|fingerprint|integrity"
    r"|uuid|guid|\bid\b|_id\b|gzip|zlib|base64\.b64decode|png|jpe?g|gif|font|woff|data:|image",
    re.IGNORECASE,
)


def looks_like_secret(value: str | None) -> bool:
    """Whether a literal value could be a real secret (not a placeholder, name or reference)."""
    if value is None:
        return False
    v = value.strip().strip("\"'`").strip()
    if len(v) < 4 or v.lower() in _NOT_VALUES:
        return False
    if _PLACEHOLDER.search(v) or _MESSAGE.search(v):
        return False
    if _IDENTIFIER.match(v) or _TYPE_EXPRESSION.match(v):
        return False
    if v.startswith(("/", "./", "../", "~/")) or ("://" in v and "@" not in v):
        return False  # a path or a URL without credentials in it
    return len(set(v)) > 2  # "aaaa", "0000"


def names_a_non_secret(line: str) -> bool:
    """Whether the name assigned on ``line`` holds something public by design.

    ``PASSWORD_SALT``, ``TOKEN_HEADER``, ``SECRET_KEY_NAME``, ``password_field``:
    the name mentions a secret, the value is a salt, a header or a field name.
    """
    return bool(_NON_SECRET_NAME.search(line))


def names_a_secret(text: str) -> bool:
    """Whether ``text`` (a line, minus the value) names something secret."""
    return bool(_SECRET_NAME.search(text))


def _entropy_hit_is_secret(line: str, value: str) -> bool:
    context = line.replace(value, " ")
    return names_a_secret(context) and not _NOT_SECRET_CONTEXT.search(context)


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


def _any_plugin_matches(
    plugins: list[Any], path: str, lines: list[tuple[int, str]], deadline: _Deadline
) -> bool:
    """Whether any plugin matches any line, before filters.

    Filters only remove candidates, so a file with no raw match has no
    finding; most files have none, and this direct pass is several times
    cheaper than the library's injected per-line loop, which then runs (with
    its filters and context) only on files that have a match.
    """
    for n, line in lines:
        deadline.check(n)
        try:
            if any(
                plugin.analyze_line(filename=path, line=line.rstrip(), line_number=n)
                for plugin in plugins
            ):
                return True
        except Exception:  # a plugin that wants more than this: let the library decide
            return True
    return False


class _Deadline:
    """Checked between lines: past ``at`` (monotonic) or once ``stop`` is set, the scan ends."""

    def __init__(self, budget_s: float, stop: threading.Event | None) -> None:
        self.at = time.monotonic() + budget_s
        self.stop = stop
        self._count = 0

    def check(self, line: int) -> None:
        self._count += 1
        if self._count % 16:  # the clock costs more than a short line's scan
            return
        if self.stop is not None and self.stop.is_set():
            raise ScanBudgetExceeded(line, stopped=True)
        if time.monotonic() > self.at:
            raise ScanBudgetExceeded(line)


def run_detect_secrets(
    path: str,
    text: str,
    *,
    budget_s: float | None = None,
    stop: threading.Event | None = None,
) -> list[WorkerFinding]:
    """detect-secrets' default plugins over ``text``, judged; lines relative to ``text``.

    ``path`` picks the file-type rules (e.g. quoting in Python vs YAML). The scan sees
    bounded pieces of each line (:func:`_scan_units`) and raises
    :class:`ScanBudgetExceeded` past ``budget_s`` seconds (default: :func:`secrets_budget_s`
    for the text's size) or once ``stop`` is set.
    """
    shown = warnings.showwarning
    try:
        # The library's own per-line steps (filters, context) without its file reading,
        # so text already in memory is scanned as ``scan_file`` would.
        from detect_secrets.core.scan import _is_filtered_out, _scan_line
        from detect_secrets.util.code_snippet import get_code_snippet
    except ImportError as exc:  # pragma: no cover - detect-secrets is a core dependency
        raise ConfigError(
            "the static worker needs detect-secrets 1.x: pip install 'detect-secrets>=1.5,<2'"
        ) from exc
    if warnings.showwarning is not shown:
        # Importing detect-secrets calls logging.captureWarnings(True): deeprepo's own
        # warnings (a run log not written, a page not written …) would go to an
        # unconfigured logger and never reach the console.
        logging.captureWarnings(False)

    from detect_secrets.settings import get_plugins

    lines = _bounded_lines(text.split("\n"))
    units = list(_scan_units(lines))
    context_lines = [line[:_SCAN_WIDTH] for line in lines]
    budget = secrets_budget_s(len(text)) if budget_s is None else budget_s
    secrets: list[tuple[Any, str]] = []
    with _SECRETS_LOCK:
        # The budget is the scan's, not the queue's: started before the lock, a file that
        # waited behind other files' scans under load ran out of time unscanned.
        deadline = _Deadline(budget, stop)
        _ensure_secret_plugins()
        plugins = get_plugins()
        if not _any_plugin_matches(plugins, path, units, deadline):
            return []
        # ``_process_line_based_plugins`` unrolled, so that the deadline is checked
        # between pieces and each candidate is judged on the piece it came from (never a
        # whole megabyte line, which the judging regexes would be slow on too).
        for n, piece in units:
            deadline.check(n)
            stripped = piece.rstrip()
            snippet = get_code_snippet(lines=context_lines, line_number=n)
            if _is_filtered_out(["line"], filename=path, line=stripped, context=snippet):
                continue
            for plugin in plugins:
                for secret in _scan_line(
                    plugin=plugin, filename=path, line=stripped, line_number=n, context=snippet
                ):
                    if not _is_filtered_out(
                        ["context"],
                        filename=secret.filename,
                        secret=secret.secret_value,
                        plugin=plugin,
                        line=stripped,
                        context=snippet,
                    ):
                        secrets.append((secret, piece))
    by_line: dict[int, list[str]] = {}
    for secret, piece in secrets:
        n = int(secret.line_number)
        value = secret.secret_value
        if not looks_like_secret(value) or names_a_non_secret(piece):
            continue
        if secret.type in _ENTROPY_TYPES and not _entropy_hit_is_secret(piece, str(value)):
            continue
        types = by_line.setdefault(n, [])
        if secret.type not in types:
            types.append(str(secret.type))
    out = []
    for line, types in sorted(by_line.items()):
        weak = all(t in _ENTROPY_TYPES for t in types)
        out.append(
            WorkerFinding(
                line=line,
                end_line=line,
                kind="hardcoded-secret",
                cwe="CWE-798",
                severity="medium" if weak else "high",
                title="Possible secret (high-entropy value named as a secret)"
                if weak
                else "Hardcoded secret in source",
                detail=(
                    f"detect-secrets matched this line ({', '.join(types)}). "
                    "Anyone who can read the code or its history has the value."
                ),
                fix=SECRET_FIX,
                tool="detect-secrets",
            )
        )
    return out
