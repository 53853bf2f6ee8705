"""``deeprepo analyze`` as a library call: load, wire the models, run one Episode,
write the outputs. The CLI only parses options into :class:`AnalyzeOptions` and
renders progress. ``orchestrator.resume`` continues a run through the same path."""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeprepo.base.version import VERSION
from deeprepo.base.errors import CodebaseError, ConfigError, UsageError
from deeprepo.base.prompts import FILE_HEADER_RE, ROOT_SYSTEM_PROMPTS
from deeprepo.base.records import RunResult, Turn
from deeprepo.base.textsafe import escape_name
from deeprepo.builtin.static import StaticWorker
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.orchestrator.audit import audit_set, parse_scopes
from deeprepo.orchestrator.episode import Episode, EpisodeConfig, EventSink
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import ModelSpec, parse_model_spec
from deeprepo.report.calls import CallLog
from deeprepo.report.outputs import write_outputs
from deeprepo.report.rundir import check_out_dir, make_out_dir, new_run_dir
from deeprepo.report.trajectory import TrajectoryWriter, set_aside
from deeprepo.report.viewer import viewer_on_failure
from deeprepo.run.models import build_model, default_models
from deeprepo.runlog.recorder import RunRecorder
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import mode_for_root

if TYPE_CHECKING:
    from deeprepo.run.resume import SavedRun

# Hidden knobs, read from ``AnalyzeOptions.env`` when a run is wired (never at import):
# tests and benchmarks shorten retries and per-call timeouts with them.
RETRY_BASE_ENV = "DEEPREPO_RETRY_BASE_S"
CALL_TIMEOUT_ENV = "DEEPREPO_CALL_TIMEOUT_S"


@dataclass(frozen=True)
class AnalyzeOptions:
    """Every knob of one analysis run (CLI flags map one to one)."""

    path: str
    rev: str | None = None
    root: str | None = None
    sub: str | None = None
    root_base_url: str | None = None
    sub_base_url: str | None = None
    sub_concurrency: int = 16
    max_cost: float | None = None
    max_turns: int = 20
    max_sub_calls: int | None = 2000
    timeout_s: float | None = None
    cache: bool = True
    cache_dir: Path | None = None
    prompt: str = "default"
    out_dir: Path | None = None
    max_file_bytes: int = 1_000_000
    sandbox: str = "auto"
    cell_timeout_s: float = 120.0
    output_limit: int = 8192
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


def at_least(flag: str, value: float | None, minimum: float, *, strict: bool = False) -> None:
    """Refuse a number below ``minimum`` (or equal to it with ``strict``), NaN or infinity."""
    if value is None:
        return
    bad = not math.isfinite(value) or value < minimum or (strict and value == minimum)
    if bad:
        bound = f"greater than {minimum:g}" if strict else f"at least {minimum:g}"
        raise UsageError(f"{flag} must be a number {bound}, not {value:g}")


def check_file(flag: str, path: Path | None) -> None:
    if path is not None and not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"{flag} {path} {what}; give a file")


def check_dir(flag: str, path: Path | None) -> None:
    if path is not None and path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a directory")


def validate(options: AnalyzeOptions) -> None:
    """Check every option before any work: a bad one is one line and exit code 2."""
    target = Path(options.path)
    if not target.exists():
        raise CodebaseError(
            f"{options.path} does not exist; check the path (relative paths start at {os.getcwd()})"
        )
    if not target.is_dir():
        raise CodebaseError(f"{options.path} is a file; pass the directory that contains it")
    at_least("--max-turns", options.max_turns, 1)
    at_least("--sub-concurrency", options.sub_concurrency, 1)
    at_least("--max-cost", options.max_cost, 0, strict=True)
    at_least("--max-sub-calls", options.max_sub_calls, 1)
    at_least("--timeout", options.timeout_s, 0, strict=True)
    at_least("--cell-timeout", options.cell_timeout_s, 0, strict=True)
    at_least("--output-limit", options.output_limit, 256)
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
    if options.sandbox not in ("auto", "bwrap", "process"):
        raise UsageError("--sandbox must be auto, bwrap or process")


def resolve_specs(options: AnalyzeOptions) -> tuple[ModelSpec, ModelSpec]:
    default_root, default_sub = default_models(options.env)
    root = parse_model_spec(options.root or default_root, options.root_base_url)
    sub = parse_model_spec(options.sub or default_sub, options.sub_base_url)
    return root, sub


def _env_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0 or value != value:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds; unset it or give e.g. 0.5")
    return value


def codebase_fingerprint(codebase: Codebase) -> str:
    """SHA-256 of every path and text: a resumed run must see the very same code."""
    digest = hashlib.sha256()
    for path in sorted(codebase.files):
        digest.update(path.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(codebase.files[path].encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def options_record(
    options: AnalyzeOptions, root: ModelSpec, sub: ModelSpec, cache: ResponseCache | None
) -> dict[str, Any]:
    """Every option of the run as JSON, enough to rebuild it (``--resume``): models as
    resolved, paths absolute, the cache directory as used. Keys are never recorded."""
    record: dict[str, Any] = {}
    for f in fields(AnalyzeOptions):
        if f.name == "env":
            continue
        value = getattr(options, f.name)
        record[f.name] = str(value) if isinstance(value, Path) else value
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


def default_out_dir(codebase_root: str, now: datetime | None = None) -> Path:
    return new_run_dir(Path(codebase_root).name or "repo", now)


async def analyze(
    options: AnalyzeOptions,
    on_event: EventSink | None = None,
    *,
    saved: SavedRun | None = None,
) -> RunHandle:
    """Run one analysis end to end and write its outputs; see docs/outputs.md.

    Outputs of an earlier run in ``options.out_dir`` are moved aside (``*.prev.*``).
    With ``saved`` (see :func:`deeprepo.run.resume.resume`) the run in
    ``options.out_dir`` is continued instead: its turns are replayed, its spend
    carried over, and the trajectory appended to.

    The run is recorded in the run log (``deeprepo.runlog``) unless ``options.run_log``
    is off; a failure to write the log is a warning, never the run's failure.
    """
    recorder = RunRecorder(options.env, enabled=options.run_log)
    try:
        handle = await _analyze(options, on_event, saved, recorder)
    except BaseException as exc:
        recorder.abort(exc)
        raise
    return replace(handle, run_id=recorder.finish(handle.out_dir))


async def _analyze(
    options: AnalyzeOptions,
    on_event: EventSink | None,
    saved: SavedRun | None,
    recorder: RunRecorder,
) -> RunHandle:
    validate(options)
    root_spec, sub_spec = resolve_specs(options)
    codebase = load_codebase(options.path, rev=options.rev, max_file_bytes=options.max_file_bytes)
    fingerprint = codebase_fingerprint(codebase)
    if saved is not None:
        saved.check_codebase(fingerprint)
    offline = root_spec.is_builtin and sub_spec.is_builtin
    out_dir = options.out_dir or default_out_dir(codebase.metadata.root)
    make_out_dir(out_dir)
    retry_base_s = _env_seconds(options.env, RETRY_BASE_ENV, 1.0)
    call_timeout_s = _env_seconds(options.env, CALL_TIMEOUT_ENV, 300.0) or 300.0

    prices = PriceTable.load(options.prices_file)
    ledger = Ledger()
    if saved is not None:
        saved.carry_over(ledger)
    budget = Budget(
        max_cost_usd=options.max_cost,
        max_sub_calls=options.max_sub_calls,
        deadline_s=options.timeout_s,
        ledger=ledger,
    )
    cache = ResponseCache(options.cache_dir) if options.cache else None
    timeout_s = max(call_timeout_s * 2, 600.0)  # the SDK's own limit stays above the wrapper's
    root_model = build_model(root_spec, role="root", env=options.env, timeout_s=timeout_s)
    # The static worker analyses whole files behind the slices it is shown.
    sub_model = build_model(
        sub_spec,
        role="sub",
        env=options.env,
        timeout_s=timeout_s,
        builtin_kwargs={"codebase": codebase} if sub_spec.provider == "static" else None,
    )
    root = MeteredModel(
        root_model,
        role="root",
        ledger=ledger,
        prices=prices,
        budget=budget,
        concurrency=1,
        # A scripted root is deeprepo's own program: free, and a cached reply could be
        # another version's (the same first message replays an old program).
        # A local checkpoint (hf/) is free, and retraining rewrites its folder in place.
        cache=None if root_spec.is_builtin or root_spec.is_local else cache,
        call_timeout_s=call_timeout_s,
        backoff_base_s=retry_base_s,
    )
    sub = MeteredModel(
        sub_model,
        role="sub",
        ledger=ledger,
        prices=prices,
        budget=budget,
        concurrency=options.sub_concurrency,
        # A built-in worker costs nothing and answers from the code of this deeprepo and the
        # whole file behind a slice: a cached answer could be another version's or file's.
        cache=None if sub_spec.is_builtin or sub_spec.is_local else cache,
        call_timeout_s=call_timeout_s,
        backoff_base_s=retry_base_s,
    )
    dispatcher = SubDispatcher(sub)
    audit_scopes = parse_scopes(options.include_scopes, options.exclude_scopes)
    audit_paths = audit_set(codebase.files, codebase.scopes, audit_scopes)
    if on_event is not None:
        on_event("audit_start", {"files": len(audit_paths)})
        dispatcher.on_answer = _audit_progress(set(audit_paths), on_event)
    sandbox_mode, sandbox_note = mode_for_root(options.sandbox, builtin_root=root_spec.is_builtin)
    sandbox = SandboxConfig(
        mode=sandbox_mode,  # type: ignore[arg-type]
        cell_timeout_s=options.cell_timeout_s,
        output_limit=options.output_limit,
    )
    config = EpisodeConfig(
        max_turns=options.max_turns,
        prompt=options.prompt,
        timeout_s=options.timeout_s,
        audit_scopes=audit_scopes,
        catch_interrupt=True,
    )
    started = time.time()
    now = datetime.now(UTC).isoformat(timespec="seconds")

    def ledger_rows() -> list[dict[str, Any]]:
        return [row.to_dict() for row in ledger.rows()]

    # Only now, with every setting checked and the models built, touch the directory.
    if saved is None:
        set_aside(out_dir)
    else:
        saved.prepare_trajectory()
    with (
        viewer_on_failure(out_dir),
        TrajectoryWriter(out_dir / "trajectory.jsonl") as log,
        CallLog(out_dir / "calls.jsonl") as call_log,
    ):
        root.on_call = sub.on_call = call_log

        def on_turn(turn: Turn) -> None:
            log.turn(turn, ledger=ledger_rows())
            call_log.sync()

        def events(kind: str, data: dict[str, Any]) -> None:
            if kind == "turn_start":  # replayed turns too: their sub-calls are made again
                call_log.turn = int(data["turn"])
            if on_event is not None:
                on_event(kind, data)

        episode = Episode(
            codebase,
            root=root,
            dispatcher=dispatcher,
            ledger=ledger,
            config=config,
            sandbox=sandbox,
            on_turn=on_turn,
            on_event=events,
            replay=saved.turns if saved is not None else (),
        )
        system_prompt, first_message = episode.opening()
        if saved is None:
            log.start(
                deeprepo_version=VERSION,
                started_at=now,
                path=str(options.path),
                rev=options.rev,
                root_model=root_spec.name,
                sub_model=sub_spec.name,
                offline=offline,
                prompt=options.prompt,
                max_turns=options.max_turns,
                max_cost=options.max_cost,
                max_sub_calls=options.max_sub_calls,
                codebase_sha256=fingerprint,
                options=options_record(options, root_spec, sub_spec, cache),
                # what the root is sent first: `deeprepo export sft` rebuilds the exact
                # conversation from these and the turns
                system_prompt=system_prompt,
                first_user_message=first_message,
            )
        else:
            log.record(
                "resume",
                deeprepo_version=VERSION,
                resumed_at=now,
                replayed_turns=len(saved.turns),
                options=options_record(options, root_spec, sub_spec, cache),
            )
        recorder.start(
            mode="rlm",
            out_dir=out_dir,
            repo=os.path.abspath(options.path),
            rev=options.rev,
            root_model=root_spec.name,
            sub_model=sub_spec.name,
            offline=offline,
            resumed=saved is not None,
        )
        try:
            result = await episode.run()
        finally:
            await root.aclose()
            await sub.aclose()
        if sandbox_note:
            result.notes.append(sandbox_note)
        if call_log.failed:
            result.notes.append(f"calls.jsonl is incomplete: {call_log.failed}")
        if isinstance(sub_model, StaticWorker):
            result.notes.extend(unread_notes(sub_model.unread_files()))
        model_notes = getattr(sub_model, "run_notes", None)  # local models: unreadable answers
        if callable(model_notes):
            result.notes.extend(model_notes())
        log.end(
            stop_reason=result.stop_reason,
            stop_detail=result.stop_detail,
            incomplete=not result.complete,
            incomplete_reason=result.incomplete_reason,
            files_audited=len(result.files_covered),
            files_to_audit=result.coverable_files,
            findings=len(result.findings),
            turns=result.num_turns,
            sub_calls=result.sub_calls,
            total_cost_usd=result.total_cost_usd,
            wall_seconds=round(time.time() - started, 3),
            ledger=ledger_rows(),
            **({"replay_mismatches": episode.replay_mismatches} if saved is not None else {}),
        )
    write_outputs(out_dir, result, codebase, offline=offline)
    return RunHandle(result=result, codebase=codebase, out_dir=out_dir, offline=offline)


def unread_notes(unread: Mapping[tuple[str, str], str], limit: int = 10) -> list[str]:
    """One note per analyzer that could not read some files: how many, and which."""
    by_tool: dict[str, list[str]] = {}
    for (path, tool), _message in sorted(unread.items()):
        by_tool.setdefault(tool, []).append(path)
    notes = []
    for tool, paths in by_tool.items():
        shown = ", ".join(escape_name(p) for p in paths[:limit])
        more = f" and {len(paths) - limit:,} more" if len(paths) > limit else ""
        example = unread[(paths[0], tool)].removeprefix(f"not analysed by {tool}: ")
        notes.append(
            f"{len(paths):,} file(s) not analysed by {tool} (their findings from it are missing; "
            f"e.g. {escape_name(example)[:200]}): {shown}{more}"
        )
    return notes


def _audit_progress(targets: set[str], on_event: EventSink) -> Callable[[str], None]:
    """A dispatcher hook counting the files of the audit set named in answered prompts
    (file blocks of the audit format): cheap, live, and a lower bound of the final figure,
    which :mod:`deeprepo.orchestrator.audit` computes from the prompts' content."""
    seen: set[str] = set()

    def on_answer(prompt: str) -> None:
        before = len(seen)
        for path in FILE_HEADER_RE.findall(prompt):
            if path in targets:
                seen.add(path)
        if len(seen) != before:
            on_event("audited", {"files": len(seen), "total": len(targets)})

    return on_answer
