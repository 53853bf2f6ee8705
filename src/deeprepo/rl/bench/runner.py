"""Run a bench: every cell (configuration × repository × repetition) as a normal run.

Each cell is an ordinary run folder, ``OUT/runs/<config>/<repo>/r<k>/``, made by the same
library calls as ``deeprepo analyze`` and ``deeprepo baseline`` (no subprocess, nothing
copied): its ``metrics.json`` and ledger are the truth of its cost, and the bench's figures
are read back from those files. A cell is *finished* when its folder's ``metrics.json``
records a run that reached its end (answer, max turns, a budget, a timeout) under the same
configuration (``bench-cell.json`` holds its fingerprint); a rerun skips finished cells, so
an interrupted bench resumes where it stopped. A cell that raised, stopped on an error or
was interrupted is *failed* and is run again next time.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deeprepo.base.chat import ChatModel
from deeprepo.base.errors import ConfigError, MissingKeyError, SandboxError, UsageError
from deeprepo.base.finding import Finding
from deeprepo.base.safefile import refuse_link, write_atomic
from deeprepo.findings.grading import GroundTruthEntry, load_findings, load_ground_truth
from deeprepo.providers.openai_compat import KEY_ENV
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import ModelSpec, parse_model_spec
from deeprepo.report.rundir import check_out_dir, make_out_dir
from deeprepo.report.trajectory import set_aside
from deeprepo.rl.bench.config import BenchFile, ConfigSpec, load_bench_file
from deeprepo.rl.bench.judge import JudgeVerdict, judge_report
from deeprepo.rl.bench.repos import BenchRepo, held_sub_calls, resolve_repos
from deeprepo.rl.evals.allowance import CostGate
from deeprepo.rl.evals.executor import Executor, make_executor
from deeprepo.run.models import build_model
from deeprepo.run.wiring import CallSettings, RunLimits

__all__ = [
    "FINISHED_STOPS",
    "BenchPlan",
    "Cell",
    "CellResult",
    "CostGate",
    "prepare",
    "read_cell",
    "run_bench",
]

#: Stop reasons of a run that reached its end; ``error`` and ``interrupted`` runs are redone.
FINISHED_STOPS = frozenset({"answer_ready", "max_turns", "budget", "timeout"})
CELL_FILE = "bench-cell.json"
JUDGE_FILE = "judge.json"

EventSink = Callable[[str, "CellResult", Mapping[str, Any]], None]


@dataclass(frozen=True)
class Cell:
    config: ConfigSpec
    repo: BenchRepo
    rep: int  # 1-based
    dir: Path

    @property
    def label(self) -> str:
        return f"{self.config.name} · {self.repo.id} · r{self.rep}"


@dataclass
class CellResult:
    """What one cell gave. ``status``: ``done`` (a finished run), ``failed`` (an error,
    an interruption, or no outputs), ``skipped`` (the bench's cost budget was spent)."""

    cell: Cell
    status: str = "pending"
    reason: str = ""
    reused: bool = False
    metrics: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    judge: JudgeVerdict | None = None

    @property
    def cost(self) -> float | None:
        return None if self.metrics is None else self.metrics.get("total_cost_usd")


@dataclass(frozen=True)
class BenchPlan:
    """A validated bench, ready to run: settings, repositories, cells."""

    source: Path
    bench: BenchFile
    out_dir: Path
    repos: list[BenchRepo]
    cells: list[Cell]
    ground_truth: dict[str, list[GroundTruthEntry]]
    prices_file: Path | None
    judge: ModelSpec | None
    env: Mapping[str, str]
    executor: str = "local"  # where cells run: this process, or Ray tasks (evals.executor)
    address: str | None = None  # the Ray cluster to join (else a local Ray is started)


def _check_key(spec: ModelSpec, env: Mapping[str, str], where: str) -> None:
    if spec.is_builtin or spec.base_url is not None:
        return
    key_env = KEY_ENV.get(spec.provider)
    if key_env is not None and not env.get(key_env, "").strip():
        raise MissingKeyError(
            f"{where}: {spec.name} needs {key_env}; set it, or remove that configuration "
            "(examples/bench/offline.toml runs with no key)"
        )


def _validate_config(
    c: ConfigSpec, base: Path, prices: Path | None, sandbox: str, env: Mapping[str, str]
) -> None:
    """Check one configuration as ``deeprepo analyze`` / ``baseline`` would, before any run:
    model specs, keys, the prompt, the price file, the sandbox a model root needs."""
    where = f"config {c.name!r}"
    try:
        if c.mode == "baseline":
            assert c.model is not None
            _check_key(parse_model_spec(c.model, c.base_url), env, where)
            return
        from deeprepo.run.analyze import validate
        from deeprepo.sandbox.isolation import mode_for_root, resolve_mode

        # Any existing folder serves for the path check; the repositories are checked apart.
        validate(_analyze_options(c, base, Path("."), None, prices, sandbox, False, env))
        assert c.root is not None and c.sub is not None
        root = parse_model_spec(c.root, c.root_base_url)
        _check_key(root, env, where)
        _check_key(parse_model_spec(c.sub, c.sub_base_url), env, where)
        resolve_mode(mode_for_root(sandbox, builtin_root=root.is_builtin)[0])
    except (UsageError, ConfigError, SandboxError) as exc:
        if str(exc).startswith(where):
            raise
        raise type(exc)(f"{where}: {exc}") from None


def prepare(
    bench_file: Path,
    out_dir: Path | None = None,
    *,
    judge: str | None = None,
    judge_base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    executor: str = "local",
    address: str | None = None,
) -> BenchPlan:
    """Read and check everything before any run: the TOML, the repositories, every
    configuration (model specs, keys, prompts), the judge. Errors are one line."""
    environ = dict(os.environ) if env is None else dict(env)
    make_executor(executor, address)
    bench = load_bench_file(bench_file)
    base = bench_file.resolve().parent
    out = out_dir if out_dir is not None else Path("deeprepo-runs") / f"bench-{bench_file.stem}"
    check_out_dir(out)
    prices_file = (base / bench.bench.prices).resolve() if bench.bench.prices else None
    if prices_file is not None and not prices_file.is_file():
        raise UsageError(f"{bench_file}: bench.prices {bench.bench.prices} is not a file")
    PriceTable.load(prices_file)
    for c in bench.config:
        _validate_config(c, base, prices_file, bench.bench.sandbox, environ)
    judge_spec = None
    if judge_base_url is not None and judge is None:
        raise UsageError("--judge-base-url needs --judge MODEL (the model served there)")
    if judge is not None:
        try:
            judge_spec = parse_model_spec(judge, judge_base_url)
        except UsageError as exc:
            raise UsageError(f"--judge: {exc}") from None
        _check_key(judge_spec, environ, "--judge")
    repos = resolve_repos(bench.repo, base, out / "tasks")  # generating writes tasks/ only
    truths = {r.id: load_ground_truth(r.ground_truth) for r in repos if r.ground_truth}
    make_out_dir(out)
    cells = [
        Cell(c, r, k, out / "runs" / c.name / r.id / f"r{k}")
        for c in bench.config
        for r in repos
        for k in range(1, bench.bench.repetitions + 1)
    ]
    return BenchPlan(
        source=bench_file,
        bench=bench,
        out_dir=out,
        repos=repos,
        cells=cells,
        ground_truth=truths,
        prices_file=prices_file,
        judge=judge_spec,
        env=environ,
        executor=executor,
        address=address,
    )


def _analyze_options(
    c: ConfigSpec,
    path: Path,
    out: Path,
    max_cost: float | None,
    prices: Path | None,
    sandbox: str,
    cache: bool,
    env: Mapping[str, str],
) -> Any:
    from deeprepo.run.analyze import AnalyzeOptions

    return AnalyzeOptions(
        path=str(path),
        root=c.root,
        sub=c.sub,
        root_base_url=c.root_base_url,
        sub_base_url=c.sub_base_url,
        limits=RunLimits(
            max_cost=max_cost,
            max_turns=c.max_turns,
            max_sub_calls=held_sub_calls(c.max_sub_calls, path),
            timeout_s=c.timeout,
            sub_concurrency=c.sub_concurrency,
        ),
        cache=cache,
        prompt=c.prompt,
        out_dir=out,
        sandbox=sandbox,
        prices_file=prices,
        env=env,
    )


def _marker(cell: Cell) -> dict[str, Any]:
    return {
        "config": cell.config.name,
        "fingerprint": cell.config.fingerprint(),
        "repo": cell.repo.id,
        "path": str(cell.repo.path),
        "rep": cell.rep,
    }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def read_cell(cell: Cell) -> CellResult:
    """What the cell's folder holds now: a finished run of this configuration, or not."""
    result = CellResult(cell)
    marker = _read_json(cell.dir / CELL_FILE)
    metrics = _read_json(cell.dir / "metrics.json")
    if marker != _marker(cell) or not isinstance(metrics, dict):
        result.status, result.reason = "failed", "no finished run"
        return result
    result.metrics = metrics
    stop = metrics.get("stop_reason")
    if stop not in FINISHED_STOPS:
        detail = " ".join(str(metrics.get("stop_detail") or "").split())[:200]
        result.status = "failed"
        result.reason = f"stopped: {stop}" + (f" ({detail})" if detail else "")
        return result
    try:
        result.findings = load_findings(cell.dir / "findings.json")
    except UsageError as exc:
        result.status, result.reason = "failed", str(exc)
        return result
    result.status = "done"
    verdict = _read_json(cell.dir / JUDGE_FILE)
    if isinstance(verdict, dict) and not verdict.get("error"):  # a failed verdict is retried
        result.judge = JudgeVerdict.from_dict(verdict)
    return result


async def _run_cell(plan: BenchPlan, cell: Cell, allowance: float | None) -> None:
    s = plan.bench.bench
    refuse_link(cell.dir)  # a bench folder is shared: a planted link must not carry the run away
    make_out_dir(cell.dir)
    # An earlier attempt's files go aside (*.prev.*) now, not only once the run has started,
    # so a run that fails early cannot be read back as that attempt's figures.
    set_aside(cell.dir)
    write_atomic(cell.dir / CELL_FILE, json.dumps(_marker(cell), indent=2) + "\n")
    (cell.dir / JUDGE_FILE).unlink(missing_ok=True)  # a verdict on an earlier run is stale
    c = cell.config
    if c.mode == "baseline":
        from deeprepo.run.baseline import BaselineOptions, run_baseline

        assert c.model is not None
        await run_baseline(
            BaselineOptions(
                path=str(cell.repo.path),
                model=c.model,
                base_url=c.base_url,
                out_dir=cell.dir,
                context_tokens=c.context_tokens,
                cache=s.cache,
                prices_file=plan.prices_file,
                env=plan.env,
            )
        )
        return
    from deeprepo.run.analyze import analyze

    options = _analyze_options(
        c, cell.repo.path, cell.dir, allowance, plan.prices_file, s.sandbox, s.cache, plan.env
    )
    await analyze(options)


SHARED = "a bench on a Ray cluster needs its folder on a filesystem every node shares"


def _shipped(executor: Executor, cell: Cell) -> Cell:
    """The cell as its executor needs it: a Ray worker's working folder is not this
    process's, so its paths go absolute."""
    if not executor.remote:
        return cell
    repo = replace(cell.repo, path=cell.repo.path.absolute())
    return replace(cell, dir=cell.dir.absolute(), repo=repo)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


async def run_bench(
    plan: BenchPlan,
    on_event: EventSink | None = None,
    on_finish: Callable[[list[CellResult], bool], None] | None = None,
) -> list[CellResult]:
    """Run every cell not finished yet (at most ``max_concurrent`` at once, within
    ``max_cost``), judge the reports when asked, and return one result per cell, in plan
    order. ``on_finish(results, interrupted)`` is called in every case, an interruption
    (Ctrl-C, cancellation) included: cells not finished are then ``failed``, and the
    interruption propagates afterwards."""
    s = plan.bench.bench
    gate = CostGate(s.max_cost, s.max_concurrent)
    slots = asyncio.Semaphore(s.max_concurrent)
    results: dict[int, CellResult] = {}
    todo: list[int] = []
    for i, cell in enumerate(plan.cells):
        existing = read_cell(cell)
        if existing.status == "done":
            existing.reused = True
            results[i] = existing
            gate.settle(-1 - i, existing.cost)
        else:
            todo.append(i)
    prices = PriceTable.load(plan.prices_file)
    calls = CallSettings.from_env(plan.env)
    judge_model: ChatModel | None = None
    if plan.judge is not None:
        hc = calls.http_client
        judge_model = build_model(
            plan.judge, role="root", env=plan.env, timeout_s=calls.sdk_timeout_s, http_client=hc
        )

    def emit(event: str, r: CellResult, **data: Any) -> None:
        if on_event is not None:
            on_event(event, r, data)

    async def judge(r: CellResult) -> None:
        if judge_model is None or r.status != "done" or r.judge is not None:
            return
        free = gate.free()
        if free is not None and free <= 0:
            r.judge = JudgeVerdict({}, None, "", 0.0, [], error="not judged: bench max_cost spent")
            return
        report = (r.cell.dir / "report.md").read_text("utf-8", errors="replace")
        r.judge = await judge_report(report, judge_model, prices=prices, calls=calls)
        gate.settle(-(10**9), r.judge.cost_usd)
        write_atomic(r.cell.dir / JUDGE_FILE, json.dumps(r.judge.to_dict(), indent=2) + "\n")

    waiting = len(todo)

    async def one(i: int) -> None:
        nonlocal waiting
        cell = plan.cells[i]
        async with slots:
            waiting -= 1
            allowance = gate.reserve(i, waiting + 1, cell.config.max_cost)
            if allowance == 0.0:
                results[i] = CellResult(cell, "skipped", "the bench's max_cost was spent")
                emit("skipped", results[i])
                return
            emit("start", CellResult(cell, "running"))
            t0 = time.monotonic()
            error = ""
            try:
                await executor.run(_run_cell, plan, _shipped(executor, cell), allowance)
                if executor.remote and not (cell.dir / CELL_FILE).is_file():
                    error = "its Ray node wrote the run where this machine cannot see it: " + SHARED
            except Exception as exc:  # one broken cell must not sink the bench
                error = _one_line(exc)
            finally:
                done = read_cell(cell)
                gate.settle(i, done.cost)
            if error:
                done.status, done.reason = "failed", error
            results[i] = done
            await judge(done)
            emit("end", done, seconds=time.monotonic() - t0)

    for i in sorted(results):
        await judge(results[i])
    executor = make_executor(plan.executor, plan.address, s.max_concurrent)
    tasks: list[asyncio.Future[None]] = []
    interrupted = True
    try:
        if todo:
            executor.start()  # a Ray start takes seconds: not inside the first cell's time
        tasks = [asyncio.ensure_future(one(i)) for i in todo]
        await asyncio.gather(*tasks)
        interrupted = False
    finally:
        for t in tasks:
            t.cancel()
        executor.close()
        if judge_model is not None:
            await judge_model.aclose()
        for i, cell in enumerate(plan.cells):
            if i not in results:
                r = read_cell(cell)
                if r.status != "done":
                    r.status, r.reason = "failed", "interrupted before it finished"
                results[i] = r
        ordered = [results[i] for i in range(len(plan.cells))]
        if on_finish is not None:
            on_finish(ordered, interrupted)
    return ordered
