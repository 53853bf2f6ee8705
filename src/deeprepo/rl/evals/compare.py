"""The before/after table of ``deeprepo compare`` (DESIGN §8).

Per run: average reward (σ, population), range, average turns (min–max), the
zero-delegation rate (share of rollouts where no file content reached a worker, the
reward's rule ``reward.zero_delegation``) and average tokens, then the
behaviour labels and mean behaviour counts of the rollouts that carry them. For
each chosen pair ``(a, b)``: ``b - a`` absolute and relative to ``a``, with a bootstrap
CI, a permutation p-value (``evals.stats``) and a warning when the sample is too small.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeprepo.base.errors import UsageError
from deeprepo.base.records import Behaviour
from deeprepo.report.text import md_text, visible
from deeprepo.rl.env.reward import zero_delegation
from deeprepo.rl.evals.results import RESULTS_FILENAME, RolloutResult
from deeprepo.rl.evals.stats import (
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
    behaviour: BehaviourSummary | None = None  # None: no rollout carries behaviour metrics


@dataclass(frozen=True)
class BehaviourSummary:
    """How a run's roots worked (``orchestrator.behaviour``), over the rollouts that say."""

    rollouts: int  # rollouts with behaviour metrics (older results.jsonl files have none)
    labels: dict[str, int]  # label -> rollouts, most frequent first
    llm_query_calls_mean: float
    llm_batch_calls_mean: float
    batch_size_mean: float | None  # prompts per llm_batch call, over every batch of the run
    files_read_by_root_mean: float
    files_sent_to_workers_mean: float
    turns_with_sub_calls_mean: float
    answer_turn_mean: float | None  # over the rollouts whose root set an answer
    answered: int  # those rollouts


def summarize_behaviour(results: Sequence[RolloutResult]) -> BehaviourSummary | None:
    """Label distribution and mean counts; rollouts without a ``behaviour`` are left out."""
    rows = []
    for r in results:
        if not r.behaviour:
            continue
        try:
            rows.append(Behaviour.from_dict(r.behaviour))
        except ValueError:
            continue
    if not rows:
        return None
    counts = Counter(b.label for b in rows)
    sizes = [n for b in rows for n in b.batch_sizes]
    answers = [b.answer_turn for b in rows if b.answer_turn is not None]
    return BehaviourSummary(
        rollouts=len(rows),
        labels=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        llm_query_calls_mean=mean([b.llm_query_calls for b in rows]),
        llm_batch_calls_mean=mean([b.llm_batch_calls for b in rows]),
        batch_size_mean=mean(sizes) if sizes else None,
        files_read_by_root_mean=mean([b.files_read_by_root for b in rows]),
        files_sent_to_workers_mean=mean([b.files_sent_to_workers for b in rows]),
        turns_with_sub_calls_mean=mean([b.turns_with_sub_calls for b in rows]),
        answer_turn_mean=mean(answers) if answers else None,
        answered=len(answers),
    )


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


def _content_prompts(r: RolloutResult) -> float:
    """The worker prompts that carried file content, as the reward counted them."""
    details = r.extra.get("reward_details")
    counted = details.get("content_prompts") if isinstance(details, dict) else None
    if isinstance(counted, int | float) and not isinstance(counted, bool):
        return counted
    # A results file without the reward's counts: no sub-call surely carried no content.
    return r.sub_calls


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
        zero_delegation_rate=sum(zero_delegation(_content_prompts(r)) for r in results)
        / len(results),
        input_tokens_mean=mean([r.input_tokens for r in results]),
        output_tokens_mean=mean([r.output_tokens for r in results]),
        behaviour=summarize_behaviour(results),
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
_BEHAVIOUR_HEADERS = [
    "run",
    "behaviour (rollouts)",
    "llm_query",
    "llm_batch",
    "avg batch",
    "files read by root",
    "files to workers",
    "turns w/ sub-calls",
    "answer turn",
]


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _behaviour_row(r: RunSummary, text: Callable[[object], str]) -> list[str] | None:
    b = r.behaviour
    if b is None:
        return None
    labels = ", ".join(f"{text(k)} {n}" for k, n in b.labels.items())
    if b.rollouts < r.rollouts:
        labels += f" ({r.rollouts - b.rollouts} without metrics)"
    return [
        text(r.label),
        labels,
        _num(b.llm_query_calls_mean),
        _num(b.llm_batch_calls_mean),
        _num(b.batch_size_mean),
        _num(b.files_read_by_root_mean),
        _num(b.files_sent_to_workers_mean),
        _num(b.turns_with_sub_calls_mean),
        _num(b.answer_turn_mean),
    ]


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
    behaviour = [row for r in table.runs if (row := _behaviour_row(r, md_text)) is not None]
    if behaviour:
        lines += ["", *md(_BEHAVIOUR_HEADERS, behaviour)]
    if table.pairs:
        headers = [h.replace("95%", f"{table.pairs[0].level:.0%}") for h in _PAIR_HEADERS]
        lines += ["", *md(headers, [_pair_row(p) for p in table.pairs])]
    warnings = [f"- {p.a} → {p.b}: {p.warning}" for p in table.pairs if p.warning]
    if warnings:
        lines += ["", *warnings]
    return "\n".join(lines) + "\n"


def render_rich(table: ComparisonTable, width: int = 80) -> list[RenderableType]:
    """Rich renderables for a console ``width`` wide: the runs table, the behaviour and
    deltas tables, one warning line per weak pair. Labels are never cut (see
    :func:`deeprepo.report.tables.fit_table`)."""
    from rich.text import Text

    from deeprepo.report.tables import Column, fit_table

    def figures(headers: list[str], first: str = "name") -> list[Column]:
        return [Column(headers[0], first), *(Column(h) for h in headers[1:])]

    out: list[RenderableType] = fit_table(
        figures(_RUN_HEADERS),
        [[visible(c) for c in _run_row(r)] for r in table.runs],
        width,
        title="Runs",
    )
    rows = [row for r in table.runs if (row := _behaviour_row(r, visible)) is not None]
    if rows:
        columns = figures(_BEHAVIOUR_HEADERS)
        columns[1] = Column(_BEHAVIOUR_HEADERS[1], "text")
        out += fit_table(columns, rows, width, title="Behaviour (means per rollout)")
    if table.pairs:
        headers = [h.replace("95%", f"{table.pairs[0].level:.0%}") for h in _PAIR_HEADERS]
        out += fit_table(
            figures(headers),
            [[visible(c) for c in _pair_row(p)] for p in table.pairs],
            width,
            title="Differences (b − a)",
        )
    out += [
        Text(f"warning: {p.a} → {p.b}: {p.warning}", style="yellow")
        for p in table.pairs
        if p.warning
    ]
    return out
