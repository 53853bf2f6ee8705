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
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from deeprepo.base.chat import ChatModel
from deeprepo.base.errors import BudgetExceeded
from deeprepo.base.safefile import open_append, write_atomic
from deeprepo.findings.coverage import CoverageIndex
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec
from deeprepo.report.rundir import make_out_dir, new_run_dir
from deeprepo.rl.env.reward import RewardWeights
from deeprepo.rl.env.rollout import build_sub_model, run_rollout
from deeprepo.rl.env.tasks import Task
from deeprepo.rl.evals.allowance import CostGate
from deeprepo.rl.evals.executor import make_executor
from deeprepo.rl.evals.options import (
    ENVIRONMENT_NAME,
    EvalOptions,
    describe,
    header_lines,
    select_tasks,
    validate,
)
from deeprepo.rl.evals.remote import rollout_elsewhere
from deeprepo.rl.evals.results import RESULTS_FILENAME, RolloutResult, write_results
from deeprepo.rl.evals.summary import EvalSummary, format_summary, summarize
from deeprepo.run.models import build_model
from deeprepo.run.wiring import CallSettings, cache_for
from deeprepo.runlog.recorder import RunRecorder
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import mode_for_root, resolve_mode
from deeprepo.sandbox.pool import KernelPool

__all__ = [
    "ENVIRONMENT_NAME",
    "EvalOptions",
    "EvalRun",
    "default_eval_dir",
    "run_eval",
    "validate",
]


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


def default_eval_dir(model: str, now: datetime | None = None) -> Path:
    """A new folder ``deeprepo-runs/<stamp>-eval-<model>``."""
    return new_run_dir(f"eval-{model}", now)


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
    executor = make_executor(options.executor, options.address, options.concurrency)
    executor.start()  # a Ray start takes seconds: before the first rollout, not inside it
    here = None if executor.remote else _LocalRollouts(options, tasks, sandbox, budget)
    gate = asyncio.Semaphore(options.concurrency)
    finished: dict[tuple[str, int], RolloutResult] = {}
    # A remote rollout cannot see the others' spending live, so the cap left is shared out
    # as allowances, as a bench shares its max_cost among its cells (docs/decisions.md).
    allowances = CostGate(options.limits.max_cost, options.concurrency)
    waiting = len(tasks) * options.rollouts

    async def elsewhere(token: int, task: Task, k: int) -> RolloutResult | None:
        allowance = allowances.reserve(token, waiting + 1, None)
        if allowance == 0.0:
            return None  # never started: what is left of the cap is spent or reserved
        try:
            shipped = await executor.run(rollout_elsewhere, options, task, k, sandbox, allowance)
        except BaseException:
            allowances.settle(token, 0.0)  # a failed task's calls are lost with its worker
            raise
        allowances.settle(token, sum(c.cost_usd or 0.0 for c in shipped.calls))
        if budget is not None and budget.ledger is not None:
            for call in shipped.calls:
                budget.ledger.record(call)
        return shipped.record

    async def one(token: int, task: Task, k: int) -> None:
        nonlocal waiting
        async with gate:
            waiting -= 1
            if budget is not None and _spent(budget):
                return  # never started: the evaluation's cost cap is spent
            t0 = time.perf_counter()
            try:
                ran = await (here.run(task, k) if here is not None else elsewhere(token, task, k))
                if ran is None:
                    return
                record = ran
            except Exception as exc:  # one broken rollout must not sink the evaluation
                record = error_result(task, k, root_spec.name, exc, time.perf_counter() - t0)
        finished[(task.id, k)] = record
        with open_append(results_path) as fh:
            fh.write(record.to_json() + "\n")
        if on_result is not None:
            on_result(record)

    planned = [(t, k) for t in tasks for k in range(options.rollouts)]
    try:
        await asyncio.gather(*(one(i, t, k) for i, (t, k) in enumerate(planned)))
    finally:
        try:
            if here is not None:
                await here.aclose()
        finally:
            executor.close()

    ordered = [finished[(t.id, k)] for t, k in planned if (t.id, k) in finished]
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


class _LocalRollouts:
    """Rollouts in this process: one root client, one sub-model client (unless the oracle,
    built per rollout) and an optional warm kernel pool, shared by every rollout."""

    def __init__(
        self, options: EvalOptions, tasks: list[Task], sandbox: SandboxConfig, budget: Budget | None
    ) -> None:
        self.options, self.sandbox, self.budget = options, sandbox, budget
        self.root_spec = parse_model_spec(options.model, options.base_url)
        self.prices = PriceTable.load(options.prices_file)
        self.weights = options.weights or RewardWeights()
        calls = CallSettings.from_env(options.env)
        self.root: ChatModel = build_model(
            self.root_spec,
            role="root",
            env=options.env,
            timeout_s=calls.sdk_timeout_s,
            http_client=calls.http_client,
        )
        sub_spec = parse_model_spec(options.sub, options.sub_base_url)
        # The oracle is built per rollout (its ground truth and seed); any other sub-model
        # is stateless between calls and shared, so its client and connections are reused.
        self.shared_sub: ChatModel | None = None
        if sub_spec.provider != "oracle":
            self.shared_sub = build_sub_model(
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
        self.sub_cache = cache_for(
            sub_spec, ResponseCache(options.cache_dir) if options.cache else None, options.env
        )
        self.indexes = {t.id: CoverageIndex(t.files) for t in tasks}
        # A warm pool cuts a kernel's start latency, not its CPU: on a busy 2-core machine
        # bench_rollouts measured no throughput gain (docs/decisions.md), so it is opt-in.
        self.pool = KernelPool(sandbox, size=options.kernel_pool) if options.kernel_pool else None

    async def run(self, task: Task, k: int) -> RolloutResult:
        outcome = await run_rollout(
            task,
            root=self.root,
            sub_spec=self.options.sub,
            sub=self.shared_sub,
            rollout_index=k,
            seed=self.options.seed,
            limits=self.options.limits,
            sandbox_config=self.sandbox,
            prices=self.prices,
            weights=self.weights,
            sub_base_url=self.options.sub_base_url,
            env=self.options.env,
            coverage_index=self.indexes[task.id],
            pool=self.pool,
            parent=self.budget,
            sub_cache=self.sub_cache,
        )
        return RolloutResult.from_outcome(outcome, model=self.root_spec.name)

    async def aclose(self) -> None:
        try:
            if self.pool is not None:
                await self.pool.aclose()
            await self.root.aclose()
        finally:
            if self.shared_sub is not None:
                await self.shared_sub.aclose()


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
    # Ray rollouts left unstarted because the rest of the cap was reserved in flight count
    # as cut too, though the spend may end just short of the cap.
    if budget is None or max_cost is None or (not _spent(budget) and len(ran) == planned):
        return ""
    cut = sum(1 for r in ran if r.extra.get("stop_reason") == "budget")
    return (
        f"the evaluation's --max-cost (${max_cost:.4f}) was spent (${budget.spent_usd():.4f}): "
        f"{len(ran)} of {planned} rollouts ran, {cut} of them stopped on the budget; "
        "raise --max-cost to evaluate the rest"
    )
