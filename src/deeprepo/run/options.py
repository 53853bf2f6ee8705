"""What one analysis run is asked to do: :class:`AnalyzeOptions`, their checks, and the
record of them a run folder keeps (what ``--resume`` reads back)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from deeprepo.base.errors import CodebaseError, UsageError
from deeprepo.base.prompts import ROOT_SYSTEM_PROMPTS
from deeprepo.base.records import RunResult
from deeprepo.codebase.model import Codebase
from deeprepo.orchestrator.audit import parse_scopes
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import ModelSpec, parse_model_spec
from deeprepo.report.rundir import check_out_dir, new_run_dir
from deeprepo.run.models import default_models
from deeprepo.run.wiring import RunLimits, at_least

__all__ = [
    "AnalyzeOptions",
    "RunHandle",
    "check_dir",
    "check_file",
    "default_out_dir",
    "options_record",
    "resolve_specs",
    "validate",
]

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


def resolve_specs(options: AnalyzeOptions) -> tuple[ModelSpec, ModelSpec]:
    """The root and sub-model specs: as given, else the defaults for the keys present."""
    default_root, default_sub = default_models(options.env)
    root = parse_model_spec(options.root or default_root, options.root_base_url)
    sub = parse_model_spec(options.sub or default_sub, options.sub_base_url)
    return root, sub


def default_out_dir(codebase_root: str, now: datetime | None = None) -> Path:
    return new_run_dir(Path(codebase_root).name or "repo", now)


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
