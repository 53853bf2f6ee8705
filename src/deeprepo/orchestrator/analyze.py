"""``deeprepo analyze`` as a library call: load, wire the models, run one Episode,
write the outputs. The CLI only parses options into :class:`AnalyzeOptions` and
renders progress."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from deeprepo import __version__
from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.errors import UsageError
from deeprepo.orchestrator.episode import Episode, EpisodeConfig, EventSink
from deeprepo.orchestrator.prompts import ROOT_SYSTEM_PROMPTS
from deeprepo.orchestrator.records import RunResult
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.registry import build_model, default_models
from deeprepo.providers.spec import ModelSpec, parse_model_spec
from deeprepo.report.outputs import write_outputs
from deeprepo.report.trajectory import TrajectoryWriter
from deeprepo.sandbox.config import SandboxConfig


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
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class RunHandle:
    result: RunResult
    codebase: Codebase
    out_dir: Path
    offline: bool


def validate(options: AnalyzeOptions) -> None:
    if options.prompt not in ROOT_SYSTEM_PROMPTS:
        raise UsageError(
            f"unknown --prompt {options.prompt!r}; choose one of: {', '.join(ROOT_SYSTEM_PROMPTS)}"
        )
    if options.max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if options.sub_concurrency < 1:
        raise UsageError("--sub-concurrency must be at least 1")
    if options.max_cost is not None and options.max_cost <= 0:
        raise UsageError("--max-cost must be a positive number of dollars")
    if options.max_sub_calls is not None and options.max_sub_calls < 0:
        raise UsageError("--max-sub-calls cannot be negative")
    if options.sandbox not in ("auto", "bwrap", "process"):
        raise UsageError("--sandbox must be auto, bwrap or process")


def resolve_specs(options: AnalyzeOptions) -> tuple[ModelSpec, ModelSpec]:
    default_root, default_sub = default_models(options.env)
    root = parse_model_spec(options.root or default_root, options.root_base_url)
    sub = parse_model_spec(options.sub or default_sub, options.sub_base_url)
    return root, sub


def default_out_dir(codebase_root: str, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(codebase_root).name or "repo").strip("-") or "repo"
    base = Path("deeprepo-runs") / f"{stamp}-{name}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


async def analyze(options: AnalyzeOptions, on_event: EventSink | None = None) -> RunHandle:
    """Run one analysis end to end and write its outputs; see docs/outputs.md."""
    validate(options)
    root_spec, sub_spec = resolve_specs(options)
    codebase = load_codebase(options.path, rev=options.rev, max_file_bytes=options.max_file_bytes)
    offline = root_spec.is_builtin and sub_spec.is_builtin
    out_dir = options.out_dir or default_out_dir(codebase.metadata.root)
    out_dir.mkdir(parents=True, exist_ok=True)

    prices = PriceTable.load(options.prices_file)
    ledger = Ledger()
    budget = Budget(
        max_cost_usd=options.max_cost,
        max_sub_calls=options.max_sub_calls,
        deadline_s=options.timeout_s,
        ledger=ledger,
    )
    cache = ResponseCache(options.cache_dir) if options.cache else None
    root_model = build_model(root_spec, role="root", env=options.env)
    sub_model = build_model(sub_spec, role="sub", env=options.env)
    root = MeteredModel(
        root_model,
        role="root",
        ledger=ledger,
        prices=prices,
        budget=budget,
        concurrency=1,
        cache=cache,
    )
    sub = MeteredModel(
        sub_model,
        role="sub",
        ledger=ledger,
        prices=prices,
        budget=budget,
        concurrency=options.sub_concurrency,
        cache=cache,
    )
    dispatcher = SubDispatcher(sub)
    sandbox = SandboxConfig(
        mode=options.sandbox,  # type: ignore[arg-type]
        cell_timeout_s=options.cell_timeout_s,
        output_limit=options.output_limit,
    )
    config = EpisodeConfig(
        max_turns=options.max_turns, prompt=options.prompt, timeout_s=options.timeout_s
    )
    started = time.time()
    with TrajectoryWriter(out_dir / "trajectory.jsonl") as log:
        log.start(
            deeprepo_version=__version__,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            path=str(options.path),
            rev=options.rev,
            root_model=root_spec.name,
            sub_model=sub_spec.name,
            offline=offline,
            prompt=options.prompt,
            max_turns=options.max_turns,
            max_cost=options.max_cost,
            max_sub_calls=options.max_sub_calls,
        )
        episode = Episode(
            codebase,
            root=root,
            dispatcher=dispatcher,
            ledger=ledger,
            config=config,
            sandbox=sandbox,
            on_turn=log.turn,
            on_event=on_event,
        )
        try:
            result = await episode.run()
        finally:
            await root.aclose()
            await sub.aclose()
        log.end(
            stop_reason=result.stop_reason,
            stop_detail=result.stop_detail,
            incomplete=result.incomplete,
            turns=result.num_turns,
            sub_calls=result.sub_calls,
            total_cost_usd=result.total_cost_usd,
            wall_seconds=round(time.time() - started, 3),
        )
    write_outputs(out_dir, result, codebase, offline=offline)
    return RunHandle(result=result, codebase=codebase, out_dir=out_dir, offline=offline)
