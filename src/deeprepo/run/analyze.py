"""``deeprepo analyze`` as a library call: load, wire the models, run one Episode, write
the outputs. The CLI only parses options into :class:`AnalyzeOptions` and renders
progress; :func:`resume` continues a run through the same path."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deeprepo.architecture import architecture_of
from deeprepo.base.chat import ChatModel, UsageRowDict
from deeprepo.base.finding import Baseline
from deeprepo.base.prompts import file_block_paths
from deeprepo.base.records import Turn
from deeprepo.base.textsafe import escape_name
from deeprepo.base.version import VERSION
from deeprepo.builtin.static import StaticWorker
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.codebase.pathfilter import PathFilter, narrow
from deeprepo.findings.baseline import load_baseline, run_fingerprints
from deeprepo.findings.suppress import SuppressionPolicy
from deeprepo.orchestrator.audit import audit_set, parse_scopes, with_not_analysed
from deeprepo.orchestrator.episode import Episode, EpisodeConfig, EventSink
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import ModelSpec
from deeprepo.report.calls import CallLog
from deeprepo.report.outputs import write_outputs
from deeprepo.report.rundir import make_out_dir
from deeprepo.report.trajectory import TrajectoryWriter, set_aside
from deeprepo.report.viewer import viewer_on_failure, write_viewer_quietly
from deeprepo.run.loading import run_load
from deeprepo.run.models import build_model
from deeprepo.run.options import (
    AnalyzeOptions,
    RunHandle,
    default_out_dir,
    effective_limits,
    options_record,
    own_outputs,
    resolve_specs,
    validate,
)
from deeprepo.run.resume import SavedRun, load_run, options_from_record
from deeprepo.run.setaside import set_aside_findings
from deeprepo.run.trust import SEAL_FIELD, seal
from deeprepo.run.wiring import CallSettings, Wiring, cache_for, wire
from deeprepo.runlog.recorder import RunRecorder
from deeprepo.sandbox.isolation import mode_for_root, resolve_mode

__all__ = [
    "AnalyzeOptions",
    "RunHandle",
    "analyze",
    "codebase_fingerprint",
    "resume",
    "unread_notes",
    "validate",
]


def codebase_fingerprint(codebase: Codebase) -> str:
    """SHA-256 of every path and text: a resumed run must see the very same code."""
    digest = hashlib.sha256()
    for path in sorted(codebase.files):
        digest.update(path.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(codebase.files[path].encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


async def analyze(
    options: AnalyzeOptions,
    on_event: EventSink | None = None,
    *,
    saved: SavedRun | None = None,
) -> RunHandle:
    """Run one analysis end to end and write its outputs; see docs/outputs.md.

    Outputs of an earlier run in ``options.out_dir`` are moved aside (``*.prev.*``).
    With ``saved`` (see :func:`resume`) the run in ``options.out_dir`` is continued
    instead: its turns are replayed, its spend carried over, and the trajectory appended to.

    The run is recorded in the run log (``deeprepo.runlog``) unless ``options.run_log``
    is off; a failure to write the log is a warning, never the run's failure.
    """
    recorder = RunRecorder(options.env, enabled=options.run_log)
    handle = await recorder.watch(_analyze(options, on_event, saved, recorder))
    run_id = recorder.finish(handle.out_dir)
    # The page last, after the run log's copy: it is only a view of the files already on
    # disk (``deeprepo view`` writes it again), so a crash while writing it loses nothing.
    write_viewer_quietly(handle.out_dir)
    return replace(handle, run_id=run_id)


async def resume(
    run_dir: Path,
    *,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    on_event: EventSink | None = None,
) -> RunHandle:
    """Continue the run in ``run_dir`` to its end and write its outputs there."""
    saved = load_run(run_dir)
    options = options_from_record(saved, os.environ if env is None else env, overrides)
    return await analyze(options, on_event, saved=saved)


@dataclass(frozen=True)
class _Plan:
    """What the run is, once every option is checked and the repository is loaded."""

    options: AnalyzeOptions
    root_spec: ModelSpec
    sub_spec: ModelSpec
    codebase: Codebase
    fingerprint: str
    out_dir: Path
    audit_scopes: frozenset[str]
    baseline: Baseline | None

    @property
    def offline(self) -> bool:
        return self.root_spec.is_builtin and self.sub_spec.is_builtin


def _plan(options: AnalyzeOptions, saved: SavedRun | None) -> _Plan:
    validate(options)
    root_spec, sub_spec = resolve_specs(options)
    options = replace(options, limits=effective_limits(options.limits, root_spec, sub_spec))
    codebase = load_codebase(
        options.path,
        rev=options.rev,
        max_file_bytes=options.max_file_bytes,
        respect_gitignore=options.gitignore,
        exclude=own_outputs(options.out_dir),
    )
    codebase = narrow(codebase, PathFilter(tuple(options.include), tuple(options.exclude)))
    fingerprint = codebase_fingerprint(codebase)
    if saved is not None:
        saved.check_codebase(fingerprint)
    out_dir = options.out_dir or default_out_dir(codebase.metadata.root)
    make_out_dir(out_dir)
    scopes = parse_scopes(options.include_scopes, options.exclude_scopes)
    architecture_of(codebase)  # computed once, here, where the load's bounds apply
    baseline = load_baseline(Path(options.baseline)) if options.baseline is not None else None
    return _Plan(options, root_spec, sub_spec, codebase, fingerprint, out_dir, scopes, baseline)


async def _since(options: AnalyzeOptions, on_event: EventSink | None) -> Baseline | None:
    """``--since REV``: REV analysed with the same options (into a folder that is then
    removed, not logged), its findings as the baseline."""
    if options.since is None:
        return None
    with tempfile.TemporaryDirectory(prefix="deeprepo-since-") as tmp:
        earlier = replace(
            options, rev=options.since, since=None, baseline=None, out_dir=Path(tmp) / "run",
            run_log=False,
        )  # fmt: skip
        handle = await analyze(earlier)
    prints = run_fingerprints(handle.result, handle.codebase.files)
    if on_event is not None:
        on_event("since", {"rev": options.since, "findings": len(prints)})
    return Baseline(f"git revision {options.since}", prints)


def _wire(plan: _Plan, saved: SavedRun | None) -> tuple[Wiring, ChatModel, ResponseCache | None]:
    """The run's metered models: the built sub-model is returned too (its notes are read
    at the end), and the cache as used."""
    options = plan.options
    calls = CallSettings.from_env(options.env)
    ledger = Ledger()
    if saved is not None:
        saved.carry_over(ledger)
    cache = ResponseCache(options.cache_dir) if options.cache else None
    root_model = build_model(
        plan.root_spec,
        role="root",
        env=options.env,
        timeout_s=calls.sdk_timeout_s,
        http_client=calls.http_client,
    )
    # The static worker analyses whole files behind the slices it is shown.
    sub_model = build_model(
        plan.sub_spec,
        role="sub",
        env=options.env,
        timeout_s=calls.sdk_timeout_s,
        http_client=calls.http_client,
        builtin_kwargs={"codebase": plan.codebase} if plan.sub_spec.provider == "static" else None,
    )
    wiring = wire(
        root_model,
        sub_model,
        limits=options.limits,
        prices=PriceTable.load(options.prices_file),
        calls=calls,
        ledger=ledger,
        root_cache=cache_for(plan.root_spec, cache, options.env),
        sub_cache=cache_for(plan.sub_spec, cache, options.env),
    )
    return wiring, sub_model, cache


async def _analyze(
    options: AnalyzeOptions,
    on_event: EventSink | None,
    saved: SavedRun | None,
    recorder: RunRecorder,
) -> RunHandle:
    timeout = options.limits.timeout_s
    plan, load_s = await run_load(lambda: _plan(options, saved), timeout)
    options = plan.options  # with the limits the run goes by (a paid run's default cap)
    # The isolation is settled first: a refusal is the run's one line, before any other work.
    sandbox_mode, sandbox_note = mode_for_root(
        options.sandbox, builtin_root=plan.root_spec.is_builtin
    )
    resolve_mode(sandbox_mode)  # raises the refusal now; the kernel resolves it again (cached)
    baseline = plan.baseline or await _since(options, on_event)
    wiring, sub_model, cache = _wire(plan, saved)
    audit_paths = audit_set(plan.codebase.files, plan.codebase.scopes, plan.audit_scopes)
    if on_event is not None:
        on_event("loaded", _load_summary(plan.codebase))
        on_event("audit_start", {"files": len(audit_paths)})
        wiring.dispatcher.on_answer = _audit_progress(set(audit_paths), on_event)
    sandbox = options.limits.sandbox_config(sandbox_mode)  # type: ignore[arg-type]
    config = options.limits.episode_config(
        EpisodeConfig(prompt=options.prompt, audit_scopes=plan.audit_scopes, catch_interrupt=True)
    )
    if timeout is not None:  # --timeout is the whole run's: the load spent part of it
        config = replace(config, timeout_s=max(0.1, round(timeout - load_s, 1)))
    record = options_record(options, plan.root_spec, plan.sub_spec, cache)
    # Only now, with every setting checked and the models built, touch the directory.
    if saved is None:
        set_aside(plan.out_dir)
    else:
        saved.prepare_trajectory()
    started = time.time()
    with _run_files(plan.out_dir, wiring) as (log, call_log):

        def on_turn(turn: Turn) -> None:
            log.turn(turn, ledger=_ledger_rows(wiring.ledger))
            call_log.sync()

        def events(kind: str, data: dict[str, Any]) -> None:
            if kind == "turn_start":  # replayed turns too: their sub-calls are made again
                call_log.turn = int(data["turn"])
            if on_event is not None:
                on_event(kind, data)

        episode = Episode(
            plan.codebase,
            root=wiring.root,
            dispatcher=wiring.dispatcher,
            ledger=wiring.ledger,
            config=config,
            sandbox=sandbox,
            on_turn=on_turn,
            on_event=events,
            replay=saved.turns if saved is not None else (),
        )
        _log_start(log, plan, episode, saved, record)
        recorder.start(
            mode="rlm",
            out_dir=plan.out_dir,
            repo=os.path.abspath(options.path),
            rev=options.rev,
            root_model=plan.root_spec.name,
            sub_model=plan.sub_spec.name,
            offline=plan.offline,
            resumed=saved is not None,
        )
        try:
            result = await episode.run()
        finally:
            await wiring.aclose()
        result.notes.extend(plan.codebase.metadata.not_analysed)
        if isinstance(sub_model, StaticWorker):
            # Files an analyzer could not read, a time bound's cuts included.
            result = with_not_analysed(result, sub_model.unread_files(), sub_model.python_parser)
        result.notes.extend(_run_notes(sandbox_note, call_log, sub_model, set(audit_paths)))
        result.notes.extend(options.config_notes)
        policy = SuppressionPolicy(options.inline_suppressions, options.honour_nosec)
        result = set_aside_findings(result, plan.codebase.files, policy, baseline)
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
            ledger=_ledger_rows(wiring.ledger),
            **({"replay_mismatches": episode.replay_mismatches} if saved is not None else {}),
        )
    write_outputs(plan.out_dir, result, plan.codebase, offline=plan.offline, viewer=False)
    return RunHandle(
        result=result, codebase=plan.codebase, out_dir=plan.out_dir, offline=plan.offline
    )


@contextmanager
def _run_files(out_dir: Path, wiring: Wiring) -> Iterator[tuple[TrajectoryWriter, CallLog]]:
    """The run folder's logs, open for the episode; every call is logged as it ends."""
    with (
        viewer_on_failure(out_dir),
        TrajectoryWriter(out_dir / "trajectory.jsonl") as log,
        CallLog(out_dir / "calls.jsonl") as call_log,
    ):
        wiring.root.on_call = wiring.sub.on_call = call_log
        yield log, call_log


def _log_start(
    log: TrajectoryWriter,
    plan: _Plan,
    episode: Episode,
    saved: SavedRun | None,
    record: dict[str, Any],
) -> None:
    options = plan.options
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if saved is not None:
        log.record(
            "resume",
            deeprepo_version=VERSION,
            resumed_at=now,
            replayed_turns=len(saved.turns),
            options=record,
        )
        return
    system_prompt, first_message = episode.opening()
    log.start(
        deeprepo_version=VERSION,
        started_at=now,
        path=str(options.path),
        rev=options.rev,
        root_model=plan.root_spec.name,
        sub_model=plan.sub_spec.name,
        offline=plan.offline,
        # which HTTP client the hosted models used (--http-client): a figure's provenance
        http_client=CallSettings.from_env(options.env).http_client,
        prompt=options.prompt,
        max_turns=options.limits.max_turns,
        max_cost=options.limits.max_cost,
        max_sub_calls=options.limits.max_sub_calls,
        codebase_sha256=plan.fingerprint,
        options=record,
        # this user's mark that the options are theirs: --resume trusts only sealed ones
        **{SEAL_FIELD: seal(record, options.env)},
        # what the root is sent first: `deeprepo export sft` rebuilds the exact
        # conversation from these and the turns
        system_prompt=system_prompt,
        first_user_message=first_message,
    )


def _load_summary(codebase: Codebase) -> dict[str, Any]:
    """What the load read and left out (names already escaped by the loader)."""
    meta = codebase.metadata
    return {
        "files": meta.files,
        "skipped": len(meta.skipped),
        "ignored": meta.ignored,
        "run_folders": list(meta.run_folders),
        "notes": list(meta.notes),
    }


def _ledger_rows(ledger: Ledger) -> list[UsageRowDict]:
    return [row.to_dict() for row in ledger.rows()]


def _run_notes(
    sandbox_note: str | None, call_log: CallLog, sub_model: ChatModel, audit: set[str]
) -> list[str]:
    """What the reader must know about how the run went beyond its result. Files of the
    audit set an analyzer could not read are the result's ``not_analysed``; the others
    (outside the audit set) are notes."""
    notes = [sandbox_note] if sandbox_note else []
    if call_log.failed:
        notes.append(f"calls.jsonl is incomplete: {call_log.failed}")
    if isinstance(sub_model, StaticWorker):
        unread = sub_model.unread_files()
        notes.extend(unread_notes({k: v for k, v in unread.items() if k[0] not in audit}))
    model_notes = getattr(sub_model, "run_notes", None)  # local models: unreadable answers
    if callable(model_notes):
        notes.extend(model_notes())
    return notes


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
    which :mod:`deeprepo.orchestrator.audit` computes from the prompts' content. It counts
    the answers too: the dispatcher's own count moves only when a whole batch is settled,
    so a progress line read "audited 47/113 files · worker calls 0" during the first batch."""
    seen: set[str] = set()
    answered = 0

    def on_answer(prompt: str) -> None:
        nonlocal answered
        answered += 1
        for path in file_block_paths(prompt):
            if path in targets:
                seen.add(path)
        on_event("audited", {"files": len(seen), "total": len(targets), "calls": answered})

    return on_answer
