"""``deeprepo eval``: N examples x R rollouts of a root model, scored by the reward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from deeprepo.base.errors import UsageError
from deeprepo.cli import exits
from deeprepo.cli.executor_option import AddressOption, ExecutorChoice, ExecutorOption
from deeprepo.cli.http_option import HttpClientOption, run_env
from deeprepo.cli.signals import run_interruptible
from deeprepo.report.text import console
from deeprepo.rl.env.reward import RewardWeights
from deeprepo.rl.evals.results import RolloutResult
from deeprepo.rl.evals.runner import EvalOptions, run_eval, validate
from deeprepo.run.wiring import RunLimits

err = Console(stderr=True)


def _load_weights(path: Path | None) -> RewardWeights | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--weights {path}: cannot read a JSON object ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f'--weights {path}: expected a JSON object like {{"quality": 0.5}}')
    return RewardWeights.from_dict(data)


def eval_command(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="Root model spec: scripted/<policy> (offline), anthropic/<m>, openai/<m>, "
            "openrouter/<org>/<m>.",
        ),
    ] = "scripted/expert",
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="OpenAI-compatible server for --model (vLLM, Ollama, ...)."
        ),
    ] = None,
    sub: Annotated[
        str, typer.Option("--sub", help="Sub-model: oracle (from ground truth), static, or a spec.")
    ] = "oracle",
    sub_base_url: Annotated[
        str | None, typer.Option("--sub-base-url", help="OpenAI-compatible server for --sub.")
    ] = None,
    n: Annotated[
        int | None,
        typer.Option(
            "-n", "--examples", help="Examples to run (default: all tasks, SPEC's n, else 5)."
        ),
    ] = None,
    rollouts: Annotated[int, typer.Option("-r", "--rollouts", help="Rollouts per example.")] = 2,
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="Directory written by `deeprepo tasks generate`."),
    ] = None,
    generate: Annotated[
        str | None,
        typer.Option(
            "--generate",
            help="Generate tasks in memory: SIZE[:seed=S][:lang=L][:n=N], e.g. medium:seed=7.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Output directory (default: a new one under ./deeprepo-runs/)."),
    ] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", help="Root turns per rollout.")] = 20,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            help="Stop the evaluation once this many USD are spent, over all its rollouts.",
        ),
    ] = None,
    max_sub_calls: Annotated[
        int, typer.Option("--max-sub-calls", help="Most sub-LLM calls per rollout.")
    ] = 2000,
    sub_concurrency: Annotated[
        int, typer.Option("--sub-concurrency", help="Sub-LLM calls in flight at once, per rollout.")
    ] = 16,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", help="Rollouts running at once.")
    ] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the oracle workers.")] = 0,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Wall-clock seconds per rollout.")
    ] = None,
    weights: Annotated[
        Path | None,
        typer.Option("--weights", help='JSON file of reward weights, e.g. {"quality": 0.5}.'),
    ] = None,
    sandbox: Annotated[str, typer.Option("--sandbox", help="auto, bwrap or process.")] = "auto",
    cache: Annotated[
        bool,
        typer.Option(
            "--cache/--no-cache",
            help="Answer repeated sub-calls of a model worker from the response cache.",
        ),
    ] = True,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="Response cache directory.")
    ] = None,
    prices: Annotated[
        Path | None, typer.Option("--prices", help="JSON price override file.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No per-rollout progress.")] = False,
    http_client: HttpClientOption = None,
    executor: ExecutorOption = ExecutorChoice.local,
    address: AddressOption = None,
    log: Annotated[
        bool,
        typer.Option(
            "--log/--no-log",
            help="Record the evaluation in the run log (`deeprepo runs`); DEEPREPO_NO_LOG=1 also turns it off.",
        ),
    ] = True,
) -> None:
    """Evaluate a root model: N examples x R rollouts, the reward summary and results.jsonl."""
    if weights is not None and not weights.is_file():
        raise UsageError(f"--weights {weights} is not a file")
    if sandbox not in ("auto", "bwrap", "process"):
        raise UsageError("--sandbox must be auto, bwrap or process")
    options = EvalOptions(
        model=model,
        base_url=base_url,
        sub=sub,
        sub_base_url=sub_base_url,
        n=n,
        rollouts=rollouts,
        tasks_dir=tasks,
        generate=generate,
        out_dir=out,
        limits=RunLimits(
            max_cost=max_cost,
            max_turns=max_turns,
            max_sub_calls=max_sub_calls,
            timeout_s=timeout,
            sub_concurrency=sub_concurrency,
        ),
        concurrency=concurrency,
        seed=seed,
        cache=cache,
        cache_dir=cache_dir,
        prices_file=prices,
        sandbox=sandbox,
        weights=_load_weights(weights),
        run_log=log,
        env=run_env(http_client),
        executor=executor.value,
        address=address,
    )
    done = 0

    def progress(r: RolloutResult) -> None:
        nonlocal done
        done += 1
        if not quiet:
            err.print(
                f"[{done}] {r.example_id} r{r.rollout + 1}: reward {r.reward:.3f} · "
                f"{r.num_turns} turns · {r.stop_condition} · {r.generation_seconds:.1f}s",
                highlight=False,
            )

    validate(options)
    try:
        run = run_interruptible(run_eval(options, on_result=progress))
    except KeyboardInterrupt:
        err.print("interrupted; finished rollouts are in results.jsonl", highlight=False)
        raise typer.Exit(exits.INTERRUPTED) from None
    typer.echo(run.text, nl=False)
    err.print(f"Results: {console(run.out_dir / 'results.jsonl')}", highlight=False)
    if not run.complete:
        err.print(f"[bold yellow]INCOMPLETE[/]: {console(run.budget_note)}", highlight=False)
    failed = run.failed
    if failed:
        first = " ".join(str(run.first_error).split())
        if len(failed) == len(run.results):
            err.print(
                f"[bold red]error:[/] every rollout ({len(failed)}) failed; first: {console(first)}",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(exits.ERROR)
        err.print(
            f"warning: {len(failed)} of {len(run.results)} rollouts failed; first: {console(first)}",
            highlight=False,
            soft_wrap=True,
        )
    if not run.complete:
        raise typer.Exit(exits.INCOMPLETE)
