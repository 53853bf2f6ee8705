"""Baseline mode: one model call with as much of the codebase as fits its context.

The comparison point for the RLM loop (the seed's "Opus single call"). Files
are prioritised (entry points, then code, then configuration, then the rest;
smaller first within a class so more files fit), what was left out is listed
in the prompt and the report, and the reply's JSON block becomes findings.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from deeprepo.base.chat import ChatRequest, Message, Usage
from deeprepo.base.errors import BudgetExceeded, MissingKeyError, ProviderError, UsageError
from deeprepo.base.finding import Finding, dedupe, finding_from_dict
from deeprepo.base.jsonl import reply_json
from deeprepo.base.prompts import BASELINE_SYSTEM_PROMPT, render_file_block
from deeprepo.base.records import RunResult, StopReason, Turn
from deeprepo.base.version import VERSION
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.orchestrator.behaviour import behaviour_of, turn_calls
from deeprepo.orchestrator.salvage import salvage_report
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.openai_compat import KEY_ENV
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec
from deeprepo.report.calls import CallLog
from deeprepo.report.outputs import write_outputs
from deeprepo.report.rundir import check_out_dir, make_out_dir
from deeprepo.report.trajectory import TrajectoryWriter, set_aside
from deeprepo.report.viewer import write_viewer_quietly
from deeprepo.run.models import build_model
from deeprepo.run.options import RunHandle, check_dir, check_file, default_out_dir, own_outputs
from deeprepo.run.wiring import CallSettings, RunLimits, at_least, cache_for, meter
from deeprepo.runlog.recorder import RunRecorder

DEFAULT_CONTEXT_TOKENS = 128_000
OUTPUT_RESERVE_TOKENS = 8_192
CHARS_PER_TOKEN = 4  # conservative for code; a real tokenizer is not worth a dependency here

_CODE_EXTS = frozenset(
    [
        ".py",
        ".js",
        ".jsx",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".java",
        ".kt",
        ".go",
        ".rs",
        ".rb",
        ".php",
        ".cs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".swift",
        ".scala",
        ".sh",
        ".sql",
        ".html",
        ".htm",
        ".jinja",
        ".j2",
        ".ejs",
        ".vue",
        ".svelte",
    ]
)
_CONFIG_EXTS = frozenset(
    [
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".env",
        ".json",
        ".xml",
        ".properties",
        ".tf",
    ]
)


@dataclass(frozen=True)
class BaselineOptions:
    path: str
    model: str
    base_url: str | None = None
    rev: str | None = None
    out_dir: Path | None = None
    context_tokens: int | None = None
    max_file_bytes: int = 1_000_000
    cache: bool = True
    cache_dir: Path | None = None
    prices_file: Path | None = None
    run_log: bool = True  # record the run in the run log (``deeprepo runs``); --no-log
    limits: RunLimits = field(default_factory=RunLimits)  # the one call's cost and wall clock
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def validate(options: BaselineOptions) -> None:
    """Check every option before any work: a bad one is one line and exit code 2."""
    if not Path(options.path).is_dir():
        what = "does not exist" if not Path(options.path).exists() else "is a file"
        raise UsageError(f"{options.path} {what}; pass the repository's directory")
    parse_model_spec(options.model, options.base_url)
    check_file("--prices", options.prices_file)
    PriceTable.load(options.prices_file)
    check_dir("--cache-dir", options.cache_dir)
    if options.out_dir is not None:
        check_out_dir(options.out_dir)
    at_least("--max-file-size", options.max_file_bytes, 1)
    if options.context_tokens is not None and options.context_tokens < 1000:
        raise UsageError("--context-tokens must be at least 1000")
    options.limits.check()


def _priority(path: str, entry_points: set[str]) -> int:
    if path in entry_points:
        return 0
    ext = os.path.splitext(path)[1].lower()
    name = os.path.basename(path)
    if ext in _CODE_EXTS:
        return 1
    if ext in _CONFIG_EXTS or name in {"Dockerfile", ".env", "Makefile"}:
        return 2
    return 3


def pack_codebase(codebase: Codebase, budget_chars: int) -> tuple[list[str], list[str], str]:
    """Choose files by priority until the budget is spent: (included, left_out, text)."""
    entry = set(codebase.metadata.entry_points)
    order = sorted(codebase.files, key=lambda p: (_priority(p, entry), len(codebase.files[p]), p))
    included: list[str] = []
    left_out: list[str] = []
    blocks: list[str] = []
    used = 0
    for path in order:
        block = render_file_block(path, codebase.files[path])
        if used + len(block) + 1 <= budget_chars:
            blocks.append(block)
            included.append(path)
            used += len(block) + 1
        else:
            left_out.append(path)
    return included, left_out, "\n".join(blocks)


def parse_baseline_findings(reply: str, known_files: set[str]) -> list[Finding]:
    """Findings from the reply's JSON block (``{"findings": [...]}`` or a bare list)."""
    for data in reply_json(reply):
        if isinstance(data, dict):
            data = data.get("findings", [])
        if not isinstance(data, list):
            continue
        out: list[Finding] = []
        for item in data:
            if not isinstance(item, dict):
                continue
            try:
                finding = finding_from_dict(item)
            except ValueError:
                continue
            if finding.file in known_files:
                out.append(finding)
        return dedupe(out)
    return []


async def run_baseline(options: BaselineOptions) -> RunHandle:
    """One call with as much of the codebase as fits; the run is recorded in the run log
    unless ``options.run_log`` is off (a failure to write it is only a warning)."""
    recorder = RunRecorder(options.env, enabled=options.run_log)
    handle = await recorder.watch(_run_baseline(options, recorder))
    run_id = recorder.finish(handle.out_dir)
    write_viewer_quietly(handle.out_dir)  # last, as in analyze: a view of what is on disk
    return replace(handle, run_id=run_id)


async def _run_baseline(options: BaselineOptions, recorder: RunRecorder) -> RunHandle:
    validate(options)
    spec = parse_model_spec(options.model, options.base_url)
    codebase = load_codebase(
        options.path,
        rev=options.rev,
        max_file_bytes=options.max_file_bytes,
        exclude=own_outputs(options.out_dir),
    )
    prices = PriceTable.load(options.prices_file)
    window = options.context_tokens or prices.context_window(spec.name) or DEFAULT_CONTEXT_TOKENS
    budget_chars = max(
        0, (window - OUTPUT_RESERVE_TOKENS) * CHARS_PER_TOKEN - len(BASELINE_SYSTEM_PROMPT) - 2000
    )
    included, left_out, packed = pack_codebase(codebase, budget_chars)
    note = ""
    if left_out:
        shown = ", ".join(left_out[:50]) + (
            f" and {len(left_out) - 50} more" if len(left_out) > 50 else ""
        )
        note = f"\n\n{len(left_out)} file(s) did not fit and are not shown: {shown}"
    user = (
        f"Repository {codebase.metadata.root}: {len(included)} of {codebase.metadata.files} files shown."
        f"{note}\n\n{packed}\n"
    )
    ledger = Ledger()
    calls = CallSettings.from_env(options.env)
    try:
        built = build_model(
            spec,
            role="root",
            env=options.env,
            timeout_s=calls.sdk_timeout_s,
            http_client=calls.http_client,
        )
    except MissingKeyError:
        # the registry's hint names analyze's --root; this command takes --model
        key_env = KEY_ENV.get(spec.provider, "the provider's API key")
        raise MissingKeyError(
            f"No key found - set {key_env}, or point --base-url at a local server; "
            "`deeprepo analyze PATH` runs offline"
        ) from None
    model = meter(
        built,
        "root",
        ledger=ledger,
        prices=prices,
        budget=options.limits.budget(ledger),
        calls=calls,
        cache=cache_for(
            spec, ResponseCache(options.cache_dir) if options.cache else None, options.env
        ),
    )
    out_dir = options.out_dir or default_out_dir(codebase.metadata.root)
    make_out_dir(out_dir)
    set_aside(out_dir)  # a rerun into the same --out keeps the earlier run's files apart
    call_log = CallLog(out_dir / "calls.jsonl")
    model.on_call = call_log
    recorder.start(
        mode="baseline",
        out_dir=out_dir,
        repo=os.path.abspath(options.path),
        rev=options.rev,
        root_model=spec.name,
        sub_model="none",
        offline=spec.is_builtin,
    )
    started = time.monotonic()
    reply, stop_detail = "", ""
    stop_reason: StopReason = "answer_ready"
    completed = False  # the model answered the call (its reply may still be empty)
    try:
        completion = await model.complete(
            ChatRequest(
                (Message("user", user),),
                system=BASELINE_SYSTEM_PROMPT,
                max_tokens=OUTPUT_RESERVE_TOKENS,
            )
        )
        reply = completion.text
        completed = True
    except (ProviderError, BudgetExceeded) as exc:
        stop_reason, stop_detail = "error", str(exc)
    finally:
        await model.aclose()
        call_log.close()
    findings = [
        replace(f, scope=codebase.scope_of(f.file))
        for f in parse_baseline_findings(reply, set(included))
    ]
    rows = ledger.rows()
    root = next((r for r in rows if r.role == "root"), None)
    used = root.usage if root else Usage()
    turn = Turn(
        index=1,
        reply=reply,
        code_blocks=[],
        output="",
        error=None if stop_reason == "answer_ready" else "provider",
        sub_calls=0,
        findings_added=len(findings),
        answer_ready=bool(reply.strip()),
        input_tokens=used.input_tokens,
        output_tokens=used.output_tokens,
        cache_read_tokens=used.cache_read_tokens,
        cache_write_tokens=used.cache_write_tokens,
        cost_usd=root.cost_usd if root else 0.0,
        seconds=time.monotonic() - started,
    )
    incomplete = not reply.strip()
    audited = [] if incomplete else sorted(included)  # no reply: nothing was audited
    answer = reply if reply.strip() else salvage_report(findings, stop_reason, stop_detail)
    result = RunResult(
        answer=answer,
        incomplete=incomplete,
        stop_reason=stop_reason,
        stop_detail=stop_detail
        or (f"{len(left_out)} file(s) left out for context" if left_out else ""),
        findings=findings,
        turns=[turn],
        sub_calls=0,
        files_covered=audited,
        coverable_files=len(codebase.files),
        usage=[row.to_dict() for row in rows],
        total_cost_usd=ledger.total_cost(),
        wall_seconds=time.monotonic() - started,
        root_model=spec.name,
        sub_model="none",
        sandbox_mode="none",
        notes=[
            f"{len(left_out)} file(s) did not fit the model's context and were left out: {', '.join(left_out)}"
        ]
        if left_out
        else [],
        unaudited=sorted(set(codebase.files) - set(audited)),
        audit_scopes=sorted({codebase.scope_of(p) for p in codebase.files}),
        incomplete_reason=(
            f"{len(left_out)} files did not fit the model's context (raise --context-tokens)"
            if left_out
            else ("the model gave no answer: " + stop_detail if incomplete else "")
        ),
        # One model reads every file its prompt carried itself (if the call went through):
        # no worker, no REPL.
        behaviour=behaviour_of(
            [turn_calls(turn)],
            files=codebase.files,
            sent_prompts=[],
            root_read=set(included) if completed else set(),
        ),
    )
    if call_log.failed:
        result.notes.append(f"calls.jsonl is incomplete: {call_log.failed}")
    with TrajectoryWriter(out_dir / "trajectory.jsonl") as log:
        log.start(
            deeprepo_version=VERSION,
            mode="baseline",
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            model=spec.name,
            included=included,
            left_out=left_out,
        )
        log.turn(turn)
        log.end(
            stop_reason=stop_reason, incomplete=incomplete, total_cost_usd=result.total_cost_usd
        )
    write_outputs(out_dir, result, codebase, offline=spec.is_builtin, mode="baseline", viewer=False)
    return RunHandle(result=result, codebase=codebase, out_dir=out_dir, offline=spec.is_builtin)
