"""The before/after table of ``deeprepo compare`` (DESIGN §8).

Per run: average reward (σ, population), range, average turns (min–max), the
zero-delegation rate (share of rollouts with no sub-LLM call) and average tokens. For
each chosen pair ``(a, b)``: ``b - a`` absolute and relative to ``a``, with a bootstrap
CI, a permutation p-value (``evals.stats``) and a warning when the sample is too small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeprepo.errors import UsageError
from deeprepo.evals.results import RESULTS_FILENAME, RolloutResult
from deeprepo.evals.stats import (
    DEFAULT_PERMUTATIONS,
    DEFAULT_RESAMPLES,
    MIN_ROLLOUTS,
    diff_test,
    mean,
    separation_warning,
    std,
)

if TYPE_CHECKING:
    from rich.console import RenderableType


@dataclass(frozen=True)
class RunSummary:
    label: str
    rollouts: int
    examples: int
    reward_mean: float
    reward_std: float
    reward_min: float
    reward_max: float
    turns_mean: float
    turns_min: int
    turns_max: int
    zero_delegation_rate: float
    input_tokens_mean: float
    output_tokens_mean: float


@dataclass(frozen=True)
class PairDelta:
    """``b - a`` for one pair of runs."""

    a: str
    b: str
    delta: float
    relative: float | None  # delta / |mean(a)|; None when mean(a) is 0
    ci_low: float
    ci_high: float
    p_value: float
    paired: bool
    level: float
    warning: str | None


@dataclass(frozen=True)
class ComparisonTable:
    runs: tuple[RunSummary, ...]
    pairs: tuple[PairDelta, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [asdict(r) for r in self.runs], "pairs": [asdict(p) for p in self.pairs]}


def summarize_run(label: str, results: Sequence[RolloutResult]) -> RunSummary:
    """Per-run figures of the table."""
    if not results:
        raise UsageError(f"Run '{label}' has no rollouts; check its results file.")
    rewards = [r.reward for r in results]
    turns = [r.num_turns for r in results]
    return RunSummary(
        label=label,
        rollouts=len(results),
        examples=len({r.example_id for r in results}),
        reward_mean=mean(rewards),
        reward_std=std(rewards),
        reward_min=min(rewards),
        reward_max=max(rewards),
        turns_mean=mean(turns),
        turns_min=min(turns),
        turns_max=max(turns),
        zero_delegation_rate=sum(r.sub_calls == 0 for r in results) / len(results),
        input_tokens_mean=mean([r.input_tokens for r in results]),
        output_tokens_mean=mean([r.output_tokens for r in results]),
    )


def default_pairs(n: int) -> list[tuple[int, int]]:
    """Consecutive pairs, then first → last when that is not one of them."""
    pairs = [(i, i + 1) for i in range(n - 1)]
    if n > 2:
        pairs.append((0, n - 1))
    return pairs


def compare_runs(
    runs: Sequence[tuple[str, Sequence[RolloutResult]]],
    pairs: Sequence[tuple[int, int]] | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    level: float = 0.95,
    min_rollouts: int = MIN_ROLLOUTS,
) -> ComparisonTable:
    """Summaries of each ``(label, rollouts)`` run and deltas for ``pairs`` of run indices."""
    summaries = tuple(summarize_run(label, results) for label, results in runs)
    chosen = default_pairs(len(runs)) if pairs is None else list(pairs)
    deltas = []
    for ia, ib in chosen:
        if not (0 <= ia < len(runs) and 0 <= ib < len(runs)) or ia == ib:
            raise UsageError(f"Pair ({ia}, {ib}) does not name two different runs of {len(runs)}.")
        (la, ra), (lb, rb) = runs[ia], runs[ib]
        test = diff_test(
            [r.reward for r in ra],
            [r.reward for r in rb],
            a_ids=[r.example_id for r in ra],
            b_ids=[r.example_id for r in rb],
            resamples=resamples,
            permutations=permutations,
            seed=seed,
            level=level,
        )
        base = summaries[ia].reward_mean
        deltas.append(
            PairDelta(
                a=la,
                b=lb,
                delta=test.delta,
                relative=test.delta / abs(base) if base else None,
                ci_low=test.ci_low,
                ci_high=test.ci_high,
                p_value=test.p_value,
                paired=test.paired,
                level=level,
                warning=separation_warning(test, min_rollouts=min_rollouts),
            )
        )
    return ComparisonTable(summaries, tuple(deltas))


# ---------------------------------------------------------------------------- CLI helpers


def default_labels(paths: Sequence[Path], labels: str | None = None) -> list[str]:
    """Labels from ``--labels a,b,c``, else from file names (the folder for ``results.jsonl``)."""
    if labels:
        out = [s.strip() for s in labels.split(",")]
        if len(out) != len(paths) or not all(out):
            raise UsageError(
                f"--labels has {len(out)} names for {len(paths)} files; give one non-empty label per file."
            )
    else:
        out = []
        for p in paths:
            p = Path(p)
            is_default = p.is_dir() or p.name == RESULTS_FILENAME
            out.append((p if p.is_dir() else p.parent).name if is_default else p.stem or str(p))
    if len(set(out)) != len(out):
        out = [f"{label} ({i + 1})" for i, label in enumerate(out)]
    return out


def parse_pairs(spec: str | None, labels: Sequence[str]) -> list[tuple[int, int]] | None:
    """``"base:trained,1:3"`` → index pairs; names are labels or 1-based positions."""
    if not spec:
        return None

    def index(name: str) -> int:
        name = name.strip()
        if name in labels:
            return labels.index(name)
        if name.isdigit() and 1 <= int(name) <= len(labels):
            return int(name) - 1
        raise UsageError(
            f"--pairs: '{name}' is neither a label ({', '.join(labels)}) nor 1..{len(labels)}."
        )

    out = []
    for item in spec.split(","):
        if item.count(":") != 1:
            raise UsageError(f"--pairs: '{item}' should look like A:B (e.g. base:trained).")
        a, b = item.split(":")
        out.append((index(a), index(b)))
    return out


# ---------------------------------------------------------------------------- rendering


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def _run_row(r: RunSummary) -> list[str]:
    return [
        r.label,
        f"{r.rollouts} ({r.examples} ex.)",
        f"{r.reward_mean:.3f} (σ {r.reward_std:.3f})",
        f"{r.reward_min:.3f}–{r.reward_max:.3f}",
        f"{r.turns_mean:.1f} ({r.turns_min}–{r.turns_max})",
        f"{r.zero_delegation_rate:.0%}",
        f"{r.input_tokens_mean:,.0f}",
    ]


_RUN_HEADERS = [
    "run",
    "rollouts",
    "avg reward (σ)",
    "range",
    "avg turns (min–max)",
    "zero-deleg.",
    "avg input tok.",
]
_PAIR_HEADERS = ["pair", "Δ reward", "Δ %", "95% CI", "p", "test"]


def _pair_row(p: PairDelta) -> list[str]:
    return [
        f"{p.a} → {p.b}",
        f"{p.delta:+.3f}",
        _pct(p.relative),
        f"[{p.ci_low:+.3f}, {p.ci_high:+.3f}]",
        f"{p.p_value:.3g}",
        "paired" if p.paired else "unpaired",
    ]


def render_markdown(table: ComparisonTable) -> str:
    """The table as GitHub markdown, warnings as a list below."""

    def md(headers: list[str], rows: list[list[str]]) -> list[str]:
        return [
            "| " + " | ".join(headers) + " |",
            "|" + "|".join("---" for _ in headers) + "|",
            *("| " + " | ".join(r) + " |" for r in rows),
        ]

    lines = md(_RUN_HEADERS, [_run_row(r) for r in table.runs])
    if table.pairs:
        headers = [h.replace("95%", f"{table.pairs[0].level:.0%}") for h in _PAIR_HEADERS]
        lines += ["", *md(headers, [_pair_row(p) for p in table.pairs])]
    warnings = [f"- {p.a} → {p.b}: {p.warning}" for p in table.pairs if p.warning]
    if warnings:
        lines += ["", *warnings]
    return "\n".join(lines) + "\n"


def render_rich(table: ComparisonTable) -> list[RenderableType]:
    """Rich renderables: the runs table, the deltas table, one warning line per weak pair."""
    from rich.table import Table
    from rich.text import Text

    runs = Table(title="Runs")
    for h in _RUN_HEADERS:
        runs.add_column(h, justify="left" if h == "run" else "right")
    for r in table.runs:
        runs.add_row(*_run_row(r))
    out: list[RenderableType] = [runs]
    if table.pairs:
        deltas = Table(title="Differences (b − a)")
        for h in _PAIR_HEADERS:
            deltas.add_column(h.replace("95%", f"{table.pairs[0].level:.0%}"), justify="right")
        for p in table.pairs:
            deltas.add_row(*_pair_row(p), style="yellow" if p.warning else None)
        out.append(deltas)
    out += [
        Text(f"warning: {p.a} → {p.b}: {p.warning}", style="yellow")
        for p in table.pairs
        if p.warning
    ]
    return out
