"""``deeprepo eval`` as a library call: N examples x R rollouts, concurrently, to disk.

Every rollout is one Episode scored by the reward (``env.rollout.run_rollout``). Each is
appended to ``results.jsonl`` the moment it finishes, so a crash loses nothing; at the
end the file is rewritten in example/rollout order and ``summary.txt`` holds the
printout of ``evals.summary``. A rollout that fails outright (the sandbox would not
start, a bug) is recorded with reward 0 and stop condition ``error``, never dropped.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from deeprepo.base.chat import ChatModel
from deeprepo.base.errors import BudgetExceeded, UsageError
from deeprepo.base.safefile import open_append, write_atomic
from deeprepo.findings.coverage import CoverageIndex
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec
from deeprepo.report.rundir import check_out_dir, make_out_dir, new_run_dir
from deeprepo.rl.env.reward import RewardWeights
from deeprepo.rl.env.rollout import build_sub_model, run_rollout
from deeprepo.rl.env.tasks import Task, generate_tasks_in_memory, load_tasks, parse_task_spec
from deeprepo.rl.evals.results import RESULTS_FILENAME, RolloutResult, write_results
from deeprepo.rl.evals.summary import EvalSummary, format_summary, summarize
from deeprepo.run.models import build_model
from deeprepo.run.options import check_dir
from deeprepo.run.wiring import CallSettings, RunLimits, cache_for
from deeprepo.runlog.recorder import RunRecorder
from deeprepo.sandbox.isolation import mode_for_root, resolve_mode
from deeprepo.sandbox.pool import KernelPool

__all__ = ["ENVIRONMENT_NAME", "EvalOptions", "EvalRun", "default_eval_dir", "run_eval"]

ENVIRONMENT_NAME = "deeprepo-orchestration"
DEFAULT_EXAMPLES = 5


@dataclass(frozen=True)
class EvalOptions:
    """Every knob of one evaluation run (CLI flags map one to one)."""

    model: str
    base_url: str | None = None
    sub: str = "oracle"
    sub_base_url: str | None = None
    n: int | None = None  # examples; default: all tasks of --tasks, n= of the SPEC, else 5
    rollouts: int = 2
    tasks_dir: Path | None = None
    generate: str | None = None
    out_dir: Path | None = None
    # max_cost caps the whole evaluation; the other limits hold per rollout
    limits: RunLimits = field(default_factory=RunLimits)
    concurrency: int = 4
    seed: int = 0
    cache: bool = True  # answer repeated sub-calls of a model worker from the response cache
    cache_dir: Path | None = None
    sandbox: str = "auto"
    kernel_pool: int = 0  # warm kernels kept ready (0: each rollout starts its own)
    weights: RewardWeights | None = None
    prices_file: Path | None = None
    run_log: bool = True  # record the evaluation in the run log (``deeprepo runs``); --no-log
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class EvalRun:
    """The outcome: every rollout that ran (example order, then rollout order) and the
    summary; ``not_run`` rollouts were never started because ``budget_note`` says the
    evaluation's cost cap was spent."""

    results: list[RolloutResult]
    summary: EvalSummary
    text: str  # the printout, also in summary.txt
    out_dir: Path
    planned: int = 0  # examples x rollouts
    not_run: int = 0
    budget_note: str = ""  # why the evaluation stopped short (its --max-cost was spent)

    @property
    def complete(self) -> bool:
        """Every planned rollout ran and none was cut by the evaluation's budget."""
        return not self.budget_note

    @property
    def failed(self) -> list[RolloutResult]:
        """Rollouts that stopped on an error (the model or the sandbox failed)."""
        return [r for r in self.results if rollout_failed(r)]

    @property
    def first_error(self) -> str | None:
        """The stop detail of the first rollout that failed, if any did."""
        for r in self.failed:
            return str(r.extra.get("stop_detail") or "no detail recorded")
        return None


def rollout_failed(r: RolloutResult) -> bool:
    return r.stop_condition == "error" or r.extra.get("stop_reason") == "error"


def validate(options: EvalOptions) -> None:
    if (options.tasks_dir is None) == (options.generate is None):
        raise UsageError("pass exactly one of --tasks DIR or --generate SPEC (e.g. medium:seed=7)")
    options.limits.check()
    if options.out_dir is not None:
        check_out_dir(options.out_dir)
    if options.tasks_dir is not None and not options.tasks_dir.is_dir():
        raise UsageError(
            f"--tasks {options.tasks_dir} is not a directory; give one written by "
            "`deeprepo tasks generate`"
        )
    for name, value in (
        ("-n", options.n),
        ("-r", options.rollouts),
        ("--concurrency", options.concurrency),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be at least 1")
    if options.seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {options.seed}")
    parse_model_spec(options.model, options.base_url)  # bad specs and URLs fail before any work
    parse_model_spec(options.sub, options.sub_base_url)
    if options.generate is not None:
        parse_task_spec(options.generate)
    PriceTable.load(options.prices_file)
    check_dir("--cache-dir", options.cache_dir)


def default_eval_dir(model: str, now: datetime | None = None) -> Path:
    """A new folder ``deeprepo-runs/<stamp>-eval-<model>``."""
    return new_run_dir(f"eval-{model}", now)


def select_tasks(options: EvalOptions) -> list[Task]:
    """The tasks of ``--tasks`` or ``--generate``, at most ``n`` of them."""
    if options.tasks_dir is not None:
        return load_tasks(options.tasks_dir, options.n)
    assert options.generate is not None
    spec = parse_task_spec(options.generate)
    return generate_tasks_in_memory(spec, options.n or spec.n or DEFAULT_EXAMPLES)


def error_result(
    task: Task, rollout: int, model: str, exc: BaseException, seconds: float
) -> RolloutResult:
    """The record of a rollout that failed outright: reward 0, stop condition ``error``."""
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return RolloutResult(
        example_id=task.id,
        rollout=rollout,
        reward=0.0,
        stop_condition="error",
        generation_seconds=seconds,
        model=model,
        extra={"stop_reason": "error", "stop_detail": detail},
    )


def header_lines(options: EvalOptions, n_examples: int) -> list[tuple[str, str]]:
    root = parse_model_spec(options.model, options.base_url)
    provider = root.base_url or ("built-in (offline)" if root.is_builtin else root.provider)
    return [
        ("Environment", ENVIRONMENT_NAME),
        ("Model", root.name),
        ("Sub-model", options.sub),
        ("Provider", provider),
        ("Examples", str(n_examples)),
        ("Rollouts per example", str(options.rollouts)),
    ]


async def run_eval(
    options: EvalOptions, on_result: Callable[[RolloutResult], None] | None = None
) -> EvalRun:
    """Run the evaluation, write ``results.jsonl`` and ``summary.txt``, return the figures.

    The evaluation is one run of the run log (mode ``eval``, one row per rollout) unless
    ``options.run_log`` is off; a failure to write the log is only a warning."""
    recorder = RunRecorder(options.env, enabled=options.run_log)
    started = time.monotonic()
    run = await recorder.watch(_run_eval(options, on_result, recorder))
    recorder.finish_eval(
        [r.to_dict() for r in run.results],
        failed=len(run.failed),
        summary=run.text,
        wall_seconds=time.monotonic() - started,
    )
    return run


async def _run_eval(
    options: EvalOptions,
    on_result: Callable[[RolloutResult], None] | None,
    recorder: RunRecorder,
) -> EvalRun:
    validate(options)
    tasks = select_tasks(options)
    root_spec = parse_model_spec(options.model, options.base_url)
    parse_model_spec(options.sub, options.sub_base_url)  # a bad --sub fails before any work
    out_dir = options.out_dir or default_eval_dir(root_spec.name)
    make_out_dir(out_dir)
    results_path = out_dir / RESULTS_FILENAME
    write_atomic(results_path, "")
    recorder.start(
        mode="eval",
        out_dir=out_dir,
        repo=str(options.tasks_dir.absolute())
        if options.tasks_dir
        else f"generate:{options.generate}",
        root_model=root_spec.name,
        sub_model=options.sub,
        offline=root_spec.is_builtin and parse_model_spec(options.sub).is_builtin,
    )
    weights = options.weights or RewardWeights()
    write_atomic(
        out_dir / "eval.json",
        json.dumps({**describe(options), "reward_weights": weights.to_dict()}, indent=2) + "\n",
    )

    prices = PriceTable.load(options.prices_file)
    calls = CallSettings.from_env(options.env)
    root: ChatModel = build_model(
        root_spec,
        role="root",
        env=options.env,
        timeout_s=calls.sdk_timeout_s,
        http_client=calls.http_client,
    )
    sub_spec = parse_model_spec(options.sub, options.sub_base_url)
    # The oracle is built per rollout (its ground truth and seed); any other sub-model is
    # stateless between calls and shared, so its client and connections are reused.
    shared_sub: ChatModel | None = None
    if sub_spec.provider != "oracle":
        shared_sub = build_sub_model(
            options.sub,
            tasks[0],
            worker_seed=0,
            base_url=options.sub_base_url,
            env=options.env,
            timeout_s=calls.sdk_timeout_s,
            http_client=calls.http_client,
        )
    # Only sub-calls are cached: a cached root would replay one conversation for every
    # rollout of an example, which are meant to sample the model.
    sub_cache = cache_for(
        sub_spec, ResponseCache(options.cache_dir) if options.cache else None, options.env
    )
    # One cost cap over every rollout: each rollout's ledger records into this one.
    budget = (
        Budget(max_cost_usd=options.limits.max_cost, ledger=Ledger())
        if options.limits.max_cost is not None
        else None
    )
    mode, note = mode_for_root(options.sandbox, builtin_root=root_spec.is_builtin)
    if note:
        warnings.warn(note, RuntimeWarning, stacklevel=2)
    sandbox = options.limits.sandbox_config(mode)  # type: ignore[arg-type]
    resolve_mode(sandbox.mode)  # no bwrap under auto: one refusal now, not one per rollout
    indexes = {t.id: CoverageIndex(t.files) for t in tasks}
    gate = asyncio.Semaphore(options.concurrency)
    # A warm pool cuts a kernel's start latency, not its CPU: on a busy 2-core machine
    # bench_rollouts measured no throughput gain (docs/decisions.md), so it is opt-in.
    pool = KernelPool(sandbox, size=options.kernel_pool) if options.kernel_pool else None
    finished: dict[tuple[str, int], RolloutResult] = {}

    async def one(task: Task, k: int) -> None:
        async with gate:
            if budget is not None and _spent(budget):
                return  # never started: the evaluation's cost cap is spent
            t0 = time.perf_counter()
            try:
                outcome = await run_rollout(
                    task,
                    root=root,
                    sub_spec=options.sub,
                    sub=shared_sub,
                    rollout_index=k,
                    seed=options.seed,
                    limits=options.limits,
                    sandbox_config=sandbox,
                    prices=prices,
                    weights=weights,
                    sub_base_url=options.sub_base_url,
                    env=options.env,
                    coverage_index=indexes[task.id],
                    pool=pool,
                    parent=budget,
                    sub_cache=sub_cache,
                )
                record = RolloutResult.from_outcome(outcome, model=root_spec.name)
            except Exception as exc:  # one broken rollout must not sink the evaluation
                record = error_result(task, k, root_spec.name, exc, time.perf_counter() - t0)
        finished[(task.id, k)] = record
        with open_append(results_path) as fh:
            fh.write(record.to_json() + "\n")
        if on_result is not None:
            on_result(record)

    try:
        await asyncio.gather(*(one(t, k) for t in tasks for k in range(options.rollouts)))
    finally:
        if pool is not None:
            await pool.aclose()
        await root.aclose()
        if shared_sub is not None:
            await shared_sub.aclose()

    planned = [(t.id, k) for t in tasks for k in range(options.rollouts)]
    ordered = [finished[key] for key in planned if key in finished]
    write_results(results_path, ordered)
    budget_note = _budget_note(budget, options.limits.max_cost, ordered, len(planned))
    summary = summarize(ordered, [t.id for t in tasks])
    text = format_summary(summary, header_lines(options, len(tasks)))
    if budget_note:
        text += f"stopped: {budget_note}\n"
    write_atomic(out_dir / "summary.txt", text)
    return EvalRun(
        results=ordered,
        summary=summary,
        text=text,
        out_dir=out_dir,
        planned=len(planned),
        not_run=len(planned) - len(ordered),
        budget_note=budget_note,
    )


def _spent(budget: Budget) -> bool:
    try:
        budget.check()
    except BudgetExceeded:
        return True
    return False


def _budget_note(
    budget: Budget | None, max_cost: float | None, ran: list[RolloutResult], planned: int
) -> str:
    """What the evaluation's cost cap cut, or "" when it cut nothing."""
    if budget is None or max_cost is None or not _spent(budget):
        return ""
    cut = sum(1 for r in ran if r.extra.get("stop_reason") == "budget")
    return (
        f"the evaluation's --max-cost (${max_cost:.4f}) was spent (${budget.spent_usd():.4f}): "
        f"{len(ran)} of {planned} rollouts ran, {cut} of them stopped on the budget; "
        "raise --max-cost to evaluate the rest"
    )


def describe(options: EvalOptions) -> dict[str, Any]:
    """The options as JSON-able data (written to ``eval.json``)."""
    return {
        "model": options.model,
        "sub": options.sub,
        "n": options.n,
        "rollouts": options.rollouts,
        "tasks": str(options.tasks_dir) if options.tasks_dir else None,
        "generate": options.generate,
        "limits": asdict(options.limits),
        "cache": options.cache,
        "concurrency": options.concurrency,
        "seed": options.seed,
        "base_url": options.base_url,
        "sub_base_url": options.sub_base_url,
        # how hosted models were called (--http-client): a figure's provenance
        "http_client": CallSettings.from_env(options.env).http_client,
    }
