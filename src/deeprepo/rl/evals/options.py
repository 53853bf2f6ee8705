"""The options of ``deeprepo eval`` (one record, checked before any work) and what they
select: the tasks, the printout's header, ``eval.json``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deeprepo.base.errors import UsageError
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec
from deeprepo.report.rundir import check_out_dir
from deeprepo.rl.env.reward import RewardWeights
from deeprepo.rl.env.tasks import Task, generate_tasks_in_memory, load_tasks, parse_task_spec
from deeprepo.rl.evals.executor import make_executor
from deeprepo.run.options import check_dir
from deeprepo.run.wiring import CallSettings, RunLimits

__all__ = [
    "ENVIRONMENT_NAME",
    "EvalOptions",
    "describe",
    "header_lines",
    "select_tasks",
    "validate",
]

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
    # where the rollouts run: "local" (this process) or "ray" (Ray tasks; address: a
    # cluster to join, else a local Ray with `concurrency` CPUs is started)
    executor: str = "local"
    address: str | None = None


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
    make_executor(options.executor, options.address)
    if options.executor != "local" and options.kernel_pool:
        raise UsageError("a warm kernel pool lives in this process: use it with --executor local")


def select_tasks(options: EvalOptions) -> list[Task]:
    """The tasks of ``--tasks`` or ``--generate``, at most ``n`` of them."""
    if options.tasks_dir is not None:
        return load_tasks(options.tasks_dir, options.n)
    assert options.generate is not None
    spec = parse_task_spec(options.generate)
    return generate_tasks_in_memory(spec, options.n or spec.n or DEFAULT_EXAMPLES)


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
        "executor": options.executor,
    }
