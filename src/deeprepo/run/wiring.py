"""One place builds a run: its limits, models, metering, retries, budget, cache, ledger
and dispatcher.

``deeprepo analyze``, ``baseline``, every evaluation rollout, every bench cell and the
bench judge ask this module for their parts, so a limit or a call setting added here
reaches all of them. :class:`RunLimits` is what the user sets (CLI flags map to its
fields); :class:`CallSettings` are the per-call timeout and retry backoff, read from the
environment (tests and benchmarks shorten them); :func:`meter` wraps one model,
:func:`wire` a root and a sub-model with their dispatcher.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from deeprepo.base.chat import ChatModel, Role
from deeprepo.base.errors import ConfigError, UsageError
from deeprepo.orchestrator.episode import EpisodeConfig
from deeprepo.providers.budget import Budget
from deeprepo.providers.cache import ResponseCache
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.providers.metered import MeteredModel
from deeprepo.providers.prices import PriceTable
from deeprepo.providers.registry import HTTP_CLIENTS, HttpClient
from deeprepo.providers.spec import ModelSpec
from deeprepo.sandbox.config import SandboxConfig, SandboxMode

__all__ = [
    "CALL_TIMEOUT_ENV",
    "HTTP_CLIENT_ENV",
    "RETRY_BASE_ENV",
    "CallSettings",
    "RunLimits",
    "Wiring",
    "at_least",
    "cache_for",
    "meter",
    "wire",
]

# Hidden knobs, read from a run's environment when it is wired (never at import): tests and
# benchmarks shorten retries and per-call timeouts with them.
RETRY_BASE_ENV = "DEEPREPO_RETRY_BASE_S"
CALL_TIMEOUT_ENV = "DEEPREPO_CALL_TIMEOUT_S"
#: ``fast`` or ``sdk``: how hosted models talk HTTP. ``--http-client`` on analyze, eval and
#: bench sets it in the run's environment, so every model built for the run (rollouts and
#: bench cells included) takes the same path.
HTTP_CLIENT_ENV = "DEEPREPO_HTTP_CLIENT"


def at_least(flag: str, value: float | None, minimum: float, *, strict: bool = False) -> None:
    """Refuse a number below ``minimum`` (or equal to it with ``strict``), NaN or infinity."""
    if value is None:
        return
    bad = not math.isfinite(value) or value < minimum or (strict and value == minimum)
    if bad:
        bound = f"greater than {minimum:g}" if strict else f"at least {minimum:g}"
        raise UsageError(f"{flag} must be a number {bound}, not {value:g}")


@dataclass(frozen=True)
class RunLimits:
    """The limits of one run; ``None`` means no limit. For an evaluation, ``max_cost`` caps
    the spend of all its rollouts together and the others hold per rollout."""

    max_cost: float | None = None  # USD
    max_turns: int = 20  # root turns
    max_sub_calls: int | None = 2000  # sub-LLM calls
    timeout_s: float | None = None  # wall clock
    sub_concurrency: int = 16  # sub-LLM calls in flight at once
    cell_timeout_s: float = 120.0  # one REPL cell's run time
    output_limit: int = 8192  # characters of a cell's output the root is shown

    def check(self) -> None:
        """Refuse a bad limit before any work: one line naming the flag (exit code 2)."""
        at_least("--max-turns", self.max_turns, 1)
        at_least("--sub-concurrency", self.sub_concurrency, 1)
        at_least("--max-cost", self.max_cost, 0, strict=True)
        at_least("--max-sub-calls", self.max_sub_calls, 1)
        at_least("--timeout", self.timeout_s, 0, strict=True)
        at_least("--cell-timeout", self.cell_timeout_s, 0, strict=True)
        at_least("--output-limit", self.output_limit, 256)

    def episode_config(self, base: EpisodeConfig | None = None) -> EpisodeConfig:
        """``base`` (prompt, audit scopes, ...) with these limits' turns and wall clock."""
        return replace(base or EpisodeConfig(), max_turns=self.max_turns, timeout_s=self.timeout_s)

    def sandbox_config(self, mode: SandboxMode = "auto") -> SandboxConfig:
        return SandboxConfig(
            mode=mode, cell_timeout_s=self.cell_timeout_s, output_limit=self.output_limit
        )

    def budget(self, ledger: Ledger, *, parent: Budget | None = None) -> Budget:
        """The run's budget over ``ledger``; with ``parent``, that budget holds too (an
        evaluation's cost cap over all its rollouts)."""
        return Budget(
            max_cost_usd=None if parent is not None else self.max_cost,
            max_sub_calls=self.max_sub_calls,
            deadline_s=self.timeout_s,
            ledger=ledger,
            parent=parent,
        )


@dataclass(frozen=True)
class CallSettings:
    """How each model call is bounded and retried."""

    call_timeout_s: float = 300.0  # one attempt; an SDK's own limit stays above it
    retry_base_s: float = 1.0  # the first retry's backoff (doubling, with jitter)
    http_client: HttpClient = "fast"  # hosted models: deeprepo's aiohttp client or the SDK

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CallSettings:
        """The settings, with :data:`CALL_TIMEOUT_ENV`, :data:`RETRY_BASE_ENV` and
        :data:`HTTP_CLIENT_ENV` applied."""
        timeout = _env_seconds(env, CALL_TIMEOUT_ENV, 300.0)
        return cls(
            call_timeout_s=timeout or 300.0,
            retry_base_s=_env_seconds(env, RETRY_BASE_ENV, 1.0),
            http_client=_env_http_client(env),
        )

    @property
    def sdk_timeout_s(self) -> float:
        """What an SDK client is told: above the wrapper's own per-call limit."""
        return max(self.call_timeout_s * 2, 600.0)


def _env_http_client(env: Mapping[str, str]) -> HttpClient:
    raw = env.get(HTTP_CLIENT_ENV, "").strip().lower() or "fast"
    for known in HTTP_CLIENTS:
        if raw == known:
            return known
    raise ConfigError(f"{HTTP_CLIENT_ENV}={raw!r} is not an HTTP client; use fast or sdk")


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


def cache_for(
    spec: ModelSpec, cache: ResponseCache | None, env: Mapping[str, str] | None = None
) -> ResponseCache | None:
    """``cache`` bound to the model's provider and endpoint (a reply from one server never
    answers another), for a model whose replies may be replayed; None for a built-in model
    (its answers come from this deeprepo's own code, a cached one could be another
    version's) and for a local checkpoint (retraining rewrites its folder in place)."""
    if cache is None or spec.is_builtin or spec.is_local:
        return None
    return cache.bound(spec.provider, spec.base_url, env)


def meter(
    model: ChatModel,
    role: Role,
    *,
    ledger: Ledger,
    prices: PriceTable,
    budget: Budget,
    calls: CallSettings,
    concurrency: int = 1,
    cache: ResponseCache | None = None,
) -> MeteredModel:
    """``model`` behind the metered wrapper: retries, timeout, budget, cache, ledger."""
    return MeteredModel(
        model,
        role=role,
        ledger=ledger,
        prices=prices,
        budget=budget,
        concurrency=concurrency,
        cache=cache,
        call_timeout_s=calls.call_timeout_s,
        backoff_base_s=calls.retry_base_s,
    )


@dataclass(frozen=True)
class Wiring:
    """The metered parts of one run: what an Episode is given."""

    ledger: Ledger
    budget: Budget
    root: MeteredModel
    sub: MeteredModel
    dispatcher: SubDispatcher

    async def aclose(self) -> None:
        """Close both models (and the clients they hold)."""
        try:
            await self.root.aclose()
        finally:
            await self.sub.aclose()


def wire(
    root: ChatModel,
    sub: ChatModel,
    *,
    limits: RunLimits,
    prices: PriceTable,
    calls: CallSettings,
    ledger: Ledger | None = None,
    parent: Budget | None = None,
    root_cache: ResponseCache | None = None,
    sub_cache: ResponseCache | None = None,
) -> Wiring:
    """Meter ``root`` (one call at a time) and ``sub`` (``limits.sub_concurrency`` at once)
    on one ledger and one budget, and give the sub-model its dispatcher."""
    ledger = ledger if ledger is not None else Ledger()
    budget = limits.budget(ledger, parent=parent)
    metered_root = meter(
        root, "root", ledger=ledger, prices=prices, budget=budget, calls=calls, cache=root_cache
    )
    metered_sub = meter(
        sub,
        "sub",
        ledger=ledger,
        prices=prices,
        budget=budget,
        calls=calls,
        concurrency=limits.sub_concurrency,
        cache=sub_cache,
    )
    return Wiring(ledger, budget, metered_root, metered_sub, SubDispatcher(metered_sub))
