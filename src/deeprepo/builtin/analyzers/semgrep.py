"""semgrep's open-source engine with deeprepo's own rules (``deeprepo/data/semgrep/*.yml``).

One :func:`run_semgrep` call scans a batch of files (all the JavaScript,
TypeScript, template and Python files of one prompt) in one semgrep process:
its start-up, not the scan, is most of the cost. Files are written under
numbered folders of a private temporary directory (never under a path taken
from the prompt), with their base names, so semgrep picks the language from
the extension and the template rules' ``paths`` apply.

semgrep runs with local rules only: ``--metrics=off``, no version check, no
registry, no login (checked in a network namespace). Its rules are authored in
YAML with anchors for shared source lists, which semgrep's own YAML reader
does not resolve, so they are expanded once into a JSON config.

When semgrep is missing or fails, each file gets an :class:`AnalyzerWarning`
instead of silently having no findings.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from deeprepo.builtin.analyzers.findings import (
    SEVERITY_RANK,
    AnalyzerWarning,
    FileResult,
    WorkerFinding,
)
from deeprepo.builtin.analyzers.secrets import looks_like_secret

__all__ = ["SEMGREP_SUFFIXES", "run_semgrep", "semgrep_applies", "semgrep_available"]

SEMGREP_SUFFIXES = (
    ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts",
    ".py", ".pyw",
    ".html", ".htm", ".jinja", ".jinja2", ".j2", ".njk", ".nunjucks", ".twig", ".tmpl", ".tpl",
    ".djhtml", ".ejs", ".hbs", ".handlebars", ".mustache", ".erb", ".pug", ".jade", ".vue",
)  # fmt: skip
_MINIFIED_LINE = 2000  # a line this long means a bundle: semgrep's time goes there for nothing
_TIMEOUT_PER_RULE_S = 5
_SEVERITY_FROM_SEMGREP = {"ERROR": "high", "WARNING": "medium", "INFO": "low"}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
_INSTALL_HINT = "pip install semgrep (a deeprepo dependency; rerun scripts/setup.sh)"


_PYTHON = (".py", ".pyw")
_SCRIPT = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
# Every Python rule starts from request data, a route or an HTML string; every template rule needs one of these
# tokens. Files without them are left out before paying for a semgrep start.
_PYTHON_HINT = re.compile(
    r"request|\.GET\b|\.POST\b|query_params|path_params|match_info|\.route\(|autoescape|[\"']\s*<[a-zA-Z]"
)
_TEMPLATE_HINT = re.compile(
    r"\|\s*(?:safe|raw)\b|\{\{\{|<%-|<%==|raw[\s(]|html_safe|autoescape|v-html|innerHTML|!\{|!=|<script"
)


def semgrep_applies(path: str, text: str) -> bool:
    """Whether deeprepo's semgrep rules could match this file.

    By suffix; minified files and bundles are left out, and so are Python files
    that never mention a request and templates with no unescaped-output token.
    """
    lower = path.lower()
    if not lower.endswith(SEMGREP_SUFFIXES) or lower.endswith(".min.js"):
        return False
    if any(len(line) > _MINIFIED_LINE for line in text.split("\n", 200)[:200]):
        return False
    if lower.endswith(_PYTHON):
        return bool(_PYTHON_HINT.search(text))
    if lower.endswith(_SCRIPT):
        return True
    return bool(_TEMPLATE_HINT.search(text))


@cache
def _semgrep_command() -> str | None:
    """The ``semgrep`` beside this interpreter (a venv not on PATH), else the one on PATH."""
    here = Path(sys.executable).parent / ("semgrep.exe" if os.name == "nt" else "semgrep")
    if here.is_file():
        return str(here)
    return shutil.which("semgrep")


def semgrep_available() -> bool:
    return _semgrep_command() is not None


_CONFIG_LOCK = threading.Lock()
_config_path: str | None = None


def _rules() -> list[dict[str, Any]]:
    import yaml  # PyYAML: a bandit dependency

    folder = resources.files("deeprepo.data").joinpath("semgrep")
    rules: list[dict[str, Any]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yml", ".yaml")):
            rules.extend(yaml.safe_load(entry.read_text(encoding="utf-8"))["rules"])
    return rules


def _config() -> str:
    """The rules as one JSON file (anchors expanded), written once per process."""
    global _config_path
    with _CONFIG_LOCK:
        if _config_path is None or not os.path.exists(_config_path):
            fd, path = tempfile.mkstemp(prefix="deeprepo-semgrep-rules-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"rules": _rules()}, fh)
            _config_path = path
            atexit.register(_remove, path)
        return _config_path


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _env(home: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SEMGREP_ENABLE_VERSION_CHECK="0",
        SEMGREP_SEND_METRICS="off",
        SEMGREP_SETTINGS_FILE=os.path.join(home, "settings.yml"),
        SEMGREP_LOG_FILE=os.path.join(home, "semgrep.log"),
        SEMGREP_VERSION_CACHE_PATH=os.path.join(home, "version"),
        XDG_CONFIG_HOME=home,
    )
    env.pop("SEMGREP_APP_TOKEN", None)
    return env


def _scan(command: str, config: str, targets: list[str], cwd: str, experimental: bool) -> Any:
    argv = [command, "scan"]
    if experimental:
        argv.append("--experimental")
    argv += [
        "--config", config, "--json", "--quiet", "--metrics=off", "--disable-version-check",
        "--no-git-ignore", "--disable-nosem", "--timeout", str(_TIMEOUT_PER_RULE_S), "--max-target-bytes", "3000000",
        "--jobs", "1", *targets,
    ]  # fmt: skip
    # --disable-nosem: a planted ``# nosemgrep`` must not hide a finding from the audit; the
    # run honours it, counted as suppressed, only when asked (findings/suppress.py).
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=_env(cwd),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60 + 2 * len(targets),
        check=False,
    )
    try:
        return json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:]
        raise RuntimeError(f"semgrep exited {proc.returncode}: {' '.join(tail)[:300]}") from None


# Whether the fast OCaml front end (``--experimental``, ~0.2 s a start instead of
# ~1.5 s) works with this semgrep; learnt on the first scan.
_experimental_ok: bool | None = None


class _Batcher:
    """Joins the files that concurrent callers want scanned into one semgrep process.

    The first caller with nothing running becomes the leader: it scans what is
    queued, then what was queued meanwhile, until the queue is empty; the others
    wait for their results. With one caller this is a plain call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[tuple[tuple[str, str], Future[FileResult]]] = []
        self._running = False

    def scan(self, files: Sequence[tuple[str, str]]) -> list[FileResult]:
        futures: list[Future[FileResult]] = [Future() for _ in files]
        with self._lock:
            self._queue.extend(zip(files, futures, strict=True))
            lead = not self._running
            self._running = True
        while lead:
            with self._lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._running = False
                    break
            try:
                results = _scan_files([f for f, _ in batch])
            except BaseException as exc:  # every waiter must wake up
                for _, fut in batch:
                    fut.set_exception(exc)
                continue
            for (_, fut), result in zip(batch, results, strict=True):
                fut.set_result(result)
        return [f.result() for f in futures]


_BATCHER = _Batcher()


def run_semgrep(files: Sequence[tuple[str, str]]) -> list[FileResult]:
    """Scan ``(path, text)`` pairs with deeprepo's rules; one result per pair, lines relative to text.

    Concurrent calls share semgrep processes (see :class:`_Batcher`).
    """
    return _BATCHER.scan(files) if files else []


def _scan_files(files: Sequence[tuple[str, str]]) -> list[FileResult]:
    global _experimental_ok
    if not files:
        return []
    command = _semgrep_command()
    if command is None:
        warning = AnalyzerWarning(
            "semgrep", f"not analysed by semgrep: semgrep is not installed ({_INSTALL_HINT})"
        )
        return [FileResult((), (warning,)) for _ in files]
    with tempfile.TemporaryDirectory(prefix="deeprepo-semgrep-") as tmp:
        targets = []
        for i, (path, text) in enumerate(files):
            folder = os.path.join(tmp, f"f{i}")
            os.mkdir(folder)
            name = _SAFE_NAME.sub("_", path.rsplit("/", 1)[-1])[-120:] or "file"
            target = os.path.join(folder, name)
            with open(target, "w", encoding="utf-8", errors="replace") as fh:
                fh.write(text)
            targets.append(os.path.relpath(target, tmp))
        try:
            data = None
            if _experimental_ok is not False:
                try:
                    data = _scan(command, _config(), targets, tmp, experimental=True)
                    _experimental_ok = True
                except (RuntimeError, subprocess.TimeoutExpired):
                    if _experimental_ok:
                        raise
                    _experimental_ok = False
            if data is None:
                data = _scan(command, _config(), targets, tmp, experimental=False)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            warning = AnalyzerWarning("semgrep", f"not analysed by semgrep: {exc}")
            return [FileResult((), (warning,)) for _ in files]
    index = {t: i for i, t in enumerate(targets)}
    found: list[list[WorkerFinding]] = [[] for _ in files]
    warned: list[list[AnalyzerWarning]] = [[] for _ in files]
    for result in data.get("results", []):
        hit = index.get(_relative(str(result.get("path", "")), tmp))
        if hit is None:
            continue
        finding = _finding(result, files[hit][1])
        if finding is not None:
            found[hit].append(finding)
    for error in data.get("errors", []):
        at = index.get(_relative(str(error.get("path", "")), tmp))
        if at is None:
            continue  # rule or engine messages with no file: nothing the user can act on
        kind = str(error.get("type", "error"))
        if isinstance(error.get("type"), list):
            kind = str(error["type"][0])
        warned[at].append(
            AnalyzerWarning(
                "semgrep",
                f"semgrep could not fully analyse this file ({kind}); findings may be missing",
            )
        )
    return [FileResult(tuple(f), tuple(w[:1])) for f, w in zip(found, warned, strict=True)]


def _relative(path: str, tmp: str) -> str:
    return os.path.relpath(path, tmp) if os.path.isabs(path) else path.removeprefix("./")


def _finding(result: dict[str, Any], text: str) -> WorkerFinding | None:
    extra = result.get("extra", {})
    meta = extra.get("metadata", {}) or {}
    rule = str(result.get("check_id", "")).rsplit(".", 1)[-1]
    start = int(result.get("start", {}).get("line", 1))
    end = max(start, int(result.get("end", {}).get("line", start)))
    if meta.get("kind") == "hardcoded-secret" and not _secret_in(text, start, end):
        return None
    severity = str(
        meta.get("severity") or _SEVERITY_FROM_SEMGREP.get(extra.get("severity"), "medium")
    )
    return WorkerFinding(
        line=start,
        end_line=end,
        kind=str(meta.get("kind") or rule),
        cwe=meta.get("cwe"),
        severity=severity if severity in SEVERITY_RANK else "medium",
        title=str(meta.get("title") or rule),
        detail=f"{' '.join(str(extra.get('message', '')).split())} [semgrep {rule}]",
        fix=str(meta.get("fix") or ""),
        tool=f"semgrep:{rule}",
    )


_LITERAL = re.compile(r"""(["'`])((?:\\.|(?!\1).)*)\1""")


def _secret_in(text: str, start: int, end: int) -> bool:
    """Whether a string literal on the matched lines looks like a real secret."""
    lines = "\n".join(text.split("\n")[start - 1 : end])
    return any(looks_like_secret(m.group(2)) for m in _LITERAL.finditer(lines))
