"""What one analysis run is asked to do: :class:`AnalyzeOptions`, their checks, and the
record of them a run folder keeps (what ``--resume`` reads back)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from deeprepo.base.errors import CodebaseError, UsageError
from deeprepo.base.prompts import ROOT_SYSTEM_PROMPTS
from deeprepo.base.records import RunResult
from deeprepo.codebase.model import Codebase
from deeprepo.codebase.pathfilter import PathFilter
from deeprepo.findings.baseline import load_baseline
from deeprepo.orchestrator.audit import parse_scopes
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.registry import OFFLINE_MODELS
from deeprepo.providers.spec import REMOTE_PROVIDERS, ModelSpec, parse_model_spec
from deeprepo.report.rundir import RUNS_DIR, check_out_dir, new_run_dir
from deeprepo.run.models import default_models
from deeprepo.run.wiring import RunLimits, at_least

__all__ = [
    "DEFAULT_MAX_COST",
    "AnalyzeOptions",
    "RunHandle",
    "check_dir",
    "check_file",
    "default_out_dir",
    "effective_limits",
    "options_record",
    "own_outputs",
    "plan_line",
    "resolve_specs",
    "validate",
]

#: The spend cap (USD) of a model-driven run given no ``--max-cost``: a run that calls paid
#: models always has a cap, and the first console line names it.
DEFAULT_MAX_COST = 2.0

SANDBOX_MODES = ("auto", "bwrap", "process")


@dataclass(frozen=True)
class AnalyzeOptions:
    """Every knob of one analysis run (CLI flags map one to one; the limits to
    :class:`RunLimits`)."""

    path: str
    rev: str | None = None
    root: str | None = None
    sub: str | None = None
    root_base_url: str | None = None
    sub_base_url: str | None = None
    limits: RunLimits = field(default_factory=RunLimits)
    cache: bool = True
    cache_dir: Path | None = None
    prompt: str = "default"
    out_dir: Path | None = None
    max_file_bytes: int = 1_000_000
    sandbox: str = "auto"
    prices_file: Path | None = None
    include_scopes: tuple[str, ...] = ()  # audit only these scopes (default: all but docs)
    exclude_scopes: tuple[str, ...] = ()  # and not these
    run_log: bool = True  # record the run in the run log (``deeprepo runs``); --no-log
    gitignore: bool = True  # apply the target's own .gitignore files; --no-gitignore
    include: tuple[str, ...] = ()  # gitignore-style globs: audit only these paths (config)
    exclude: tuple[str, ...] = ()  # and never these (config)
    inline_suppressions: bool = True  # `# deeprepo: ignore[...]` comments suppress findings
    honour_nosec: bool = False  # so do bandit's `# nosec` and semgrep's `# nosemgrep`
    baseline: Path | None = None  # report only findings not in this findings.sarif/json
    since: str | None = None  # report only findings not found at this git revision
    config_notes: tuple[str, ...] = ()  # what the configuration files refused, for the report
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class RunHandle:
    result: RunResult
    codebase: Codebase
    out_dir: Path
    offline: bool
    run_id: str | None = None  # the run's id in the run log, when it was logged


def check_file(flag: str, path: Path | None) -> None:
    if path is not None and not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"{flag} {path} {what}; give a file")


def check_dir(flag: str, path: Path | None) -> None:
    if path is not None and path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a directory")


def check_repository(path: str) -> None:
    target = Path(path)
    if not target.exists():
        raise CodebaseError(
            f"{path} does not exist; check the path (relative paths start at {os.getcwd()})"
        )
    if not target.is_dir():
        raise CodebaseError(f"{path} is a file; pass the directory that contains it")


def validate(options: AnalyzeOptions) -> None:
    """Check every option before any work: a bad one is one line and exit code 2."""
    check_repository(options.path)
    options.limits.check()
    at_least("--max-file-size", options.max_file_bytes, 1)
    check_file("--prices", options.prices_file)
    PriceTable.load(options.prices_file)  # a file that is not a price table fails here
    check_dir("--cache-dir", options.cache_dir)
    if options.out_dir is not None:
        check_out_dir(options.out_dir)
    parse_scopes(options.include_scopes, options.exclude_scopes)
    resolve_specs(options)  # a bad --root/--sub/base URL fails here, before the repository loads
    if options.prompt not in ROOT_SYSTEM_PROMPTS:
        raise UsageError(
            f"unknown --prompt {options.prompt!r}; choose one of: {', '.join(ROOT_SYSTEM_PROMPTS)}"
        )
    if options.sandbox not in SANDBOX_MODES:
        raise UsageError("--sandbox must be auto, bwrap or process")
    PathFilter(tuple(options.include), tuple(options.exclude)).check()
    if options.baseline is not None and options.since is not None:
        raise UsageError("--baseline and --since both name a baseline; give one")
    if options.baseline is not None:
        load_baseline(Path(options.baseline))  # a file that is no baseline fails here


def _calls_out(spec: ModelSpec) -> bool:
    """True for a model behind a provider's API: paid, and needing a key."""
    return spec.provider in REMOTE_PROVIDERS


def resolve_specs(options: AnalyzeOptions) -> tuple[ModelSpec, ModelSpec]:
    """The root and sub-model specs.

    With neither ``--root`` nor ``--sub`` (nor a base URL) the run is the offline engine,
    whatever keys the environment holds: a key never turns the default into a paid run.
    When one side is chosen and calls a provider's API, the other follows the keys present
    (:func:`default_models`); when the chosen side runs on this machine (built in, local), the
    other is the offline engine's.
    """
    offline_root, offline_sub = OFFLINE_MODELS
    keyed_root, keyed_sub = default_models(options.env)
    root_given = options.root is not None or options.root_base_url is not None
    sub_given = options.sub is not None or options.sub_base_url is not None
    root = (
        parse_model_spec(options.root or keyed_root, options.root_base_url) if root_given else None
    )
    sub = parse_model_spec(options.sub or keyed_sub, options.sub_base_url) if sub_given else None
    if root is None:
        root = parse_model_spec(keyed_root if sub is not None and _calls_out(sub) else offline_root)
    if sub is None:
        sub = parse_model_spec(keyed_sub if _calls_out(root) else offline_sub)
    return root, sub


def effective_limits(limits: RunLimits, root: ModelSpec, sub: ModelSpec) -> RunLimits:
    """The limits a run goes by: a run that calls a provider's API gets
    :data:`DEFAULT_MAX_COST` when no ``--max-cost`` was given."""
    if limits.max_cost is not None or not (_calls_out(root) or _calls_out(sub)):
        return limits
    return replace(limits, max_cost=DEFAULT_MAX_COST)


def plan_line(root: ModelSpec, sub: ModelSpec, limits: RunLimits) -> str:
    """The first console line of a run: its models and what it may spend."""
    if root.is_builtin and sub.is_builtin:
        spend = "offline, no API calls, cost $0"
    elif not (_calls_out(root) or _calls_out(sub)):
        spend = "models on this machine, no API calls, cost $0"
    elif limits.max_cost is None:
        spend = "no cost cap"
    else:
        spend = f"cost cap ${limits.max_cost:.2f} (--max-cost)"
    return f"root {root.name} · sub {sub.name} · {spend}"


def default_out_dir(codebase_root: str, now: datetime | None = None) -> Path:
    return new_run_dir(Path(codebase_root).name or "repo", now)


def own_outputs(out_dir: Path | None) -> list[Path]:
    """The folders a run's load must never read: its ``--out`` and the default runs folder
    (both may sit inside the repository; a run folder elsewhere is known by its files)."""
    return [RUNS_DIR.absolute(), *([out_dir.absolute()] if out_dir is not None else [])]


#: The limits' fields as recorded in a run folder (flat, beside the other options; the
#: names run folders have always used).
LIMIT_FIELDS = tuple(f.name for f in fields(RunLimits))


def options_record(
    options: AnalyzeOptions, root: ModelSpec, sub: ModelSpec, cache: ResponseCache | None
) -> dict[str, Any]:
    """Every option of the run as JSON, enough to rebuild it (``--resume``): models as
    resolved, paths absolute, the cache directory as used. Keys are never recorded."""
    record: dict[str, Any] = {}
    for f in fields(AnalyzeOptions):
        if f.name in ("env", "limits"):
            continue
        value = getattr(options, f.name)
        record[f.name] = str(value) if isinstance(value, Path) else value
    for name in LIMIT_FIELDS:
        record[name] = getattr(options.limits, name)
    record.update(
        path=os.path.abspath(options.path),
        root=root.name,
        sub=sub.name,
        root_base_url=root.base_url,
        sub_base_url=sub.base_url,
        cache_dir=str(cache.directory.absolute()) if cache is not None else None,
        out_dir=str(options.out_dir.absolute()) if options.out_dir else None,
        prices_file=str(options.prices_file.absolute()) if options.prices_file else None,
    )
    return record
