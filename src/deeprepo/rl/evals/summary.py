"""The evaluation summary researchers already read (DESIGN §8), computed from rollouts.

The printout follows the seed's ``prime eval`` output line for line::

    Rewards:
    reward: avg - 0.785, std - 0.100
    r1: [0.636, 0.9, 0.85]
    r2: [0.887, 0.7, 0.738]
    delegation_reward: avg - 0.785, std - 0.100      (one block per reward part)
    ...
    num_turns: avg - 8.667, std - 4.422
    r1: [18.0, 5.0, 5.0]
    ...
    Info:
    is_truncated: avg - 0.000, std - 0.000
    stop_conditions: episode_done: 1.000
    Timing:
    generation: min - 20s, mean - 34s, max - 1m
    Usage:
    input_tokens (avg): 14598.500
    output_tokens (avg): 2200.333

``rN`` lists rollout N's value for each example, in example order, rounded to three
decimals with Python's float formatting (``0.9``, ``1.0``). Standard deviations are
population standard deviations, as in the seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deeprepo.rl.env.rollout import STOP_CONDITIONS
from deeprepo.rl.evals.results import RolloutResult
from deeprepo.rl.evals.stats import mean, std

__all__ = [
    "EvalSummary",
    "MetricBlock",
    "format_duration",
    "format_summary",
    "summarize",
]

_CONDITION_ORDER = [c for c, _ in STOP_CONDITIONS.values()]


@dataclass(frozen=True)
class MetricBlock:
    """One metric over all rollouts: average, standard deviation and the ``rN`` rows
    (``rows[n][i]`` is rollout n of example i; NaN where that rollout is missing)."""

    name: str
    avg: float
    std: float
    rows: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class EvalSummary:
    """The figures of one evaluation run."""

    examples: tuple[str, ...]
    rollouts_per_example: int
    reward: MetricBlock
    parts: tuple[MetricBlock, ...]
    num_turns: MetricBlock
    is_truncated: tuple[float, float]  # avg, std
    stop_conditions: dict[str, float]  # condition → share of rollouts
    generation: tuple[float, float, float]  # min, mean, max seconds
    input_tokens: float  # average per rollout
    output_tokens: float


def _block(
    name: str,
    results: Sequence[RolloutResult],
    get: Callable[[RolloutResult], float],
    examples: Sequence[str],
    n_rollouts: int,
) -> MetricBlock:
    values = [get(r) for r in results]
    grid: dict[tuple[str, int], float] = {}
    for r, v in zip(results, values, strict=True):
        grid.setdefault((r.example_id, r.rollout), v)
    rows = tuple(tuple(grid.get((ex, k), math.nan) for ex in examples) for k in range(n_rollouts))
    return MetricBlock(name, mean(values), std(values), rows)


def _part(name: str) -> Callable[[RolloutResult], float]:
    return lambda r: r.parts.get(name, math.nan)


def summarize(
    results: Sequence[RolloutResult], examples: Sequence[str] | None = None
) -> EvalSummary:
    """Summary of ``results``. ``examples`` fixes the example order of the ``rN`` rows
    (default: order of first appearance). Rollout indices are 0-based; row ``r1`` is 0."""
    if not results:
        raise ValueError("no rollouts to summarise")
    order = list(examples) if examples is not None else []
    for r in results:
        if r.example_id not in order:
            order.append(r.example_id)
    n_rollouts = max(r.rollout for r in results) + 1
    part_names: list[str] = []
    for r in results:
        part_names.extend(p for p in r.parts if p not in part_names)

    def block(name: str, get: Callable[[RolloutResult], float]) -> MetricBlock:
        return _block(name, results, get, order, n_rollouts)

    conditions: dict[str, int] = {}
    for r in results:
        conditions[r.stop_condition] = conditions.get(r.stop_condition, 0) + 1
    ranked = sorted(
        conditions,
        key=lambda c: (_CONDITION_ORDER.index(c) if c in _CONDITION_ORDER else 99, c),
    )
    truncated = [1.0 if r.is_truncated else 0.0 for r in results]
    seconds = [r.generation_seconds for r in results]
    return EvalSummary(
        examples=tuple(order),
        rollouts_per_example=n_rollouts,
        reward=block("reward", lambda r: r.reward),
        parts=tuple(block(p, _part(p)) for p in part_names),
        num_turns=block("num_turns", lambda r: float(r.num_turns)),
        is_truncated=(mean(truncated), std(truncated)),
        stop_conditions={c: conditions[c] / len(results) for c in ranked},
        generation=(min(seconds), mean(seconds), max(seconds)),
        input_tokens=mean([float(r.input_tokens) for r in results]),
        output_tokens=mean([float(r.output_tokens) for r in results]),
    )


def format_duration(seconds: float) -> str:
    """``0.12`` → ``120ms``, ``3.25`` → ``3.2s``, ``34.2`` → ``34s``, ``60.4`` → ``1m``,
    ``65`` → ``1m 5s``, ``3720`` → ``1h 2m``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 10 and round(seconds, 1) != round(seconds):
        return f"{round(seconds, 1)}s"
    total = round(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        m, s = divmod(total, 60)
        return f"{m}m" if s == 0 else f"{m}m {s}s"
    h, m = divmod(round(seconds / 60), 60)
    return f"{h}h" if m == 0 else f"{h}h {m}m"


def _value(x: float) -> str:
    return "nan" if math.isnan(x) else str(round(float(x), 3))


def _block_lines(b: MetricBlock) -> list[str]:
    lines = [f"{b.name}: avg - {b.avg:.3f}, std - {b.std:.3f}"]
    for k, row in enumerate(b.rows, 1):
        lines.append(f"r{k}: [" + ", ".join(_value(x) for x in row) + "]")
    return lines


def format_summary(
    summary: EvalSummary, header: Sequence[tuple[str, str]] = (), *, sections: bool = True
) -> str:
    """The printout (module docstring). ``header`` lines (``Model: ...``) come first,
    then a blank line; ``sections=False`` leaves out the ``Rewards:``/``Info:``/… titles."""
    out = [f"{k}: {v}" for k, v in header]
    if out:
        out.append("")

    def title(name: str) -> None:
        if sections:
            out.append(f"{name}:")

    title("Rewards")
    for b in (summary.reward, *summary.parts, summary.num_turns):
        out.extend(_block_lines(b))
    title("Info")
    out.append(
        f"is_truncated: avg - {summary.is_truncated[0]:.3f}, std - {summary.is_truncated[1]:.3f}"
    )
    out.append(
        "stop_conditions: "
        + ", ".join(f"{c}: {share:.3f}" for c, share in summary.stop_conditions.items())
    )
    title("Timing")
    lo, avg, hi = summary.generation
    out.append(
        f"generation: min - {format_duration(lo)}, mean - {format_duration(avg)}, "
        f"max - {format_duration(hi)}"
    )
    title("Usage")
    out.append(f"input_tokens (avg): {summary.input_tokens:.3f}")
    out.append(f"output_tokens (avg): {summary.output_tokens:.3f}")
    return "\n".join(out) + "\n"
