"""One rollout of an evaluation, run in another process (``--executor ray``).

The local pool shares one root client, one sub-model client and the evaluation's budget
object among its rollouts; a rollout in a Ray worker has none of them, so it builds its own
from the options, runs under an ``allowance`` (its share of the evaluation's cost cap) and
sends back its record and its billed calls, which the evaluation records into its own
ledger as a local rollout's ledger would have. The same task, rollout index and seed give
the same Episode and reward wherever it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from deeprepo.base.chat import ChatModel
from deeprepo.findings.coverage import CoverageIndex
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.ledger import Ledger, LLMCall
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.spec import parse_model_spec
from deeprepo.rl.env.reward import RewardWeights
from deeprepo.rl.env.rollout import build_sub_model, run_rollout
from deeprepo.rl.env.tasks import Task
from deeprepo.rl.evals.options import EvalOptions
from deeprepo.rl.evals.results import RolloutResult
from deeprepo.run.models import build_model
from deeprepo.run.wiring import CallSettings, cache_for
from deeprepo.sandbox.config import SandboxConfig

__all__ = ["ShippedRollout", "rollout_elsewhere"]


@dataclass(frozen=True)
class ShippedRollout:
    """What a rollout run elsewhere sends back: its record and every call it was billed."""

    record: RolloutResult
    calls: tuple[LLMCall, ...]


async def rollout_elsewhere(
    options: EvalOptions,
    task: Task,
    rollout: int,
    sandbox: SandboxConfig,
    allowance: float | None,
) -> ShippedRollout:
    """Run rollout ``rollout`` of ``task`` with models built here from ``options``; with an
    ``allowance`` (USD) it stops as a local rollout stops when the evaluation's cap is spent."""
    root_spec = parse_model_spec(options.model, options.base_url)
    sub_spec = parse_model_spec(options.sub, options.sub_base_url)
    calls = CallSettings.from_env(options.env)
    root: ChatModel = build_model(
        root_spec,
        role="root",
        env=options.env,
        timeout_s=calls.sdk_timeout_s,
        http_client=calls.http_client,
    )
    sub: ChatModel | None = None
    try:
        if sub_spec.provider != "oracle":  # the oracle is built per rollout by run_rollout
            sub = build_sub_model(
                options.sub,
                task,
                worker_seed=0,
                base_url=options.sub_base_url,
                env=options.env,
                timeout_s=calls.sdk_timeout_s,
                http_client=calls.http_client,
            )
        parent = Budget(max_cost_usd=allowance, ledger=Ledger())
        outcome = await run_rollout(
            task,
            root=root,
            sub_spec=options.sub,
            sub=sub,
            rollout_index=rollout,
            seed=options.seed,
            limits=options.limits,
            sandbox_config=sandbox,
            prices=PriceTable.load(options.prices_file),
            weights=options.weights or RewardWeights(),
            sub_base_url=options.sub_base_url,
            env=options.env,
            coverage_index=CoverageIndex(task.files),
            parent=parent,
            sub_cache=cache_for(
                sub_spec, ResponseCache(options.cache_dir) if options.cache else None, options.env
            ),
        )
    finally:
        await root.aclose()
        if sub is not None:
            await sub.aclose()
    assert parent.ledger is not None
    record = RolloutResult.from_outcome(outcome, model=root_spec.name)
    return ShippedRollout(record, tuple(parent.ledger.calls()))
