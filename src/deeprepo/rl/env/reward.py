"""The RL reward: quality gates the process parts, minus penalties, clamped to [0, 1]
(DESIGN §7; weights and calibration in ``docs/reward.md``).

Every part is a number in [0, 1] and is reported as its own metric::

    quality          F-beta (beta 0.5: precision-aware) of the findings against ground truth
    grounding        share of the true positives a worker reported as submitted (same file,
                     line within tolerance, same class) in a reply to a prompt that carried
                     that code (``grounding.py``; 1.0 when no replies were recorded)
    coverage         mean credit of the coverable source files: how much of each file's content
                     reached a sub-LLM *in order* (``findings.coverage``), credited on a ramp
                     from ``min_fraction`` (0) to the whole file (1), weighed by how closely
                     the worker could read the prompts that carried it (past
                     ``context_lines``, ``dispatch.attention``)
    delegation       share of sub-calls sent in parallel batches (size > 1), times the share
                     of sent prompts that carried file content
    efficiency       turns and root tokens against a budget scaled by the task's size, times
                     coverage (doing nothing quickly is not efficient)

    zero_delegation  1 when no file content reached any sub-LLM
    early_finalize   the run ended (submitted or not) with coverage below the threshold: the
                     shortfall, as a share of the threshold
    redundancy       share of the file content of *blind* re-sends (whole files or large
                     slices sent again, or a prompt repeated word for word); short targeted
                     re-queries, which verification needs, are free
    ghost_findings   share of findings on files that do not exist
    empty_report     1 when nothing was reported although the task has bugs (a metric only:
                     the gate already gives such a run 0)

::

    gate  = quality * (grounding + grounding_floor * read)
    total = clamp(gate * (w.quality + w.coverage * coverage + w.delegation * delegation
                          + w.efficiency * efficiency)
                  - sum(w[q] * penalty[q] for the penalties))

where ``grounding`` is the share of true positives a worker reported and ``read`` the share
no worker reported but the root's own outputs showed it (``grounding.root_read``); a true
positive on code nobody was shown counts 0.

Quality gates everything: a run whose findings are wrong (or absent) scores 0 however
well it delegated, so ignoring the workers cannot pay, and a junk finding is never better
than an honest empty report (both have quality 0). Content, never paths, is what counts:
coverage and the redundancy and delegation shares are computed from
``RunResult.sent_prompts`` line by line (``findings.coverage``), so a prompt that only names
a file earns nothing. Everything here is a pure function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import TypeVar

from deeprepo.base.errors import ConfigError
from deeprepo.base.records import RunResult
from deeprepo.findings.coverage import (
    CREDIT_FLOOR,
    CoverageIndex,
    coverage_credit,
)
from deeprepo.findings.grading import (
    DEFAULT_TOLERANCE,
    GroundTruthEntry,
    grade,
    parse_ground_truth,
)
from deeprepo.rl.env.dispatch import DEFAULT_CONTEXT_LINES, dispatch_stats, source_files
from deeprepo.rl.env.grounding import grounded, root_read, root_views, worker_reports

__all__ = [
    "PARTS",
    "PENALTIES",
    "Reward",
    "RewardWeights",
    "compute_reward",
    "part_metric",
    "zero_delegation",
]

PARTS: tuple[str, ...] = ("quality", "grounding", "coverage", "delegation", "efficiency")
# The parts weighted inside the gate (``grounding`` shapes the gate instead).
_WEIGHTED: tuple[str, ...] = ("quality", "coverage", "delegation", "efficiency")
PENALTIES: tuple[str, ...] = (
    "zero_delegation",
    "early_finalize",
    "redundancy",
    "ghost_findings",
    "empty_report",
)


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the parts and penalties, and the knobs that define them.

    ``quality`` is the share of the total that good findings earn on their own; the
    process weights (coverage, delegation, efficiency) earn the rest, multiplied by the
    quality gate. The four sum to 1 by default, so a perfect run scores 1.0. Load from a
    config mapping with :meth:`from_dict` (unknown keys are an error).
    """

    quality: float = 0.30
    coverage: float = 0.35
    delegation: float = 0.175
    efficiency: float = 0.175
    zero_delegation: float = 0.50
    early_finalize: float = 0.50
    redundancy: float = 0.40
    ghost_findings: float = 0.30
    empty_report: float = 0.0  # a metric only: quality 0 already gates such a run to 0
    grounding_floor: float = 0.5  # what a true positive the root read itself counts, not a worker
    beta: float = 0.5  # F-beta of the quality part; < 1 weighs precision more
    tolerance: int = DEFAULT_TOLERANCE  # grading line tolerance
    # Ending below this coverage is "finalising before coverage". At 1.0 every unread file
    # costs: F-beta's lean to precision pays a run that audits half the files 0.75-0.85 of
    # its quality, so the shortfall must be charged outright (decision 97).
    coverage_threshold: float = 1.0
    # In-order share of a file at or below which it earns no coverage (credit rises linearly
    # to 1 for the whole file): a file cut short by a twentieth earns nothing.
    min_fraction: float = CREDIT_FLOOR
    # Non-empty prompt lines a worker reads in full; past them a file's coverage is weighed by
    # (context_lines / lines) ** 2, the oracle's own attention (decision 102).
    context_lines: float = DEFAULT_CONTEXT_LINES
    base_turns: float = 6.0  # turn budget = base_turns + source files / files_per_turn
    files_per_turn: float = 50.0
    base_root_tokens: float = 30_000.0  # root token budget = base + share * codebase tokens
    root_token_share: float = 0.5

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"reward weight {f.name!r} must be a number >= 0, got {value!r}")
        if self.beta <= 0 or self.files_per_turn <= 0 or self.context_lines <= 0:
            raise ConfigError("reward 'beta', 'files_per_turn' and 'context_lines' must be > 0")
        if not 0 < self.coverage_threshold <= 1 or not 0 < self.min_fraction <= 1:
            raise ConfigError("reward 'coverage_threshold' and 'min_fraction' must be in (0, 1]")
        if self.grounding_floor > 1:
            raise ConfigError("reward 'grounding_floor' must be in [0, 1]")

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RewardWeights:
        """Weights from a mapping (e.g. a parsed JSON or TOML table); missing keys keep defaults."""
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown reward weight(s): {', '.join(unknown)}; valid keys: {', '.join(known)}"
            )
        values = {
            key: _number(key, value, float) for key, value in data.items() if key != "tolerance"
        }
        tolerance = _number("tolerance", data.get("tolerance", DEFAULT_TOLERANCE), int)
        return cls(tolerance=tolerance, **values)

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_N = TypeVar("_N", int, float)


def _number(key: str, value: object, kind: type[_N]) -> _N:
    try:
        if isinstance(value, int | float | str):
            return kind(value)
    except ValueError:
        pass
    raise ConfigError(f"reward weight {key!r} must be a number, got {value!r}")


@dataclass(frozen=True)
class Reward:
    """A scored rollout: ``total`` in [0, 1], ``parts`` (the four parts and the four
    penalties, each in [0, 1], keyed by :func:`part_metric`: ``quality_reward``, …,
    ``redundancy_penalty``) and ``details`` (the raw counts behind them)."""

    total: float
    parts: dict[str, float]
    details: dict[str, float]

    def metrics(self) -> dict[str, float]:
        """``reward`` and every part, the way evaluation summaries print them."""
        return {"reward": self.total, **self.parts}


def part_metric(name: str) -> str:
    """The metric name of a part or penalty: ``delegation`` → ``delegation_reward``,
    ``redundancy`` → ``redundancy_penalty``."""
    return f"{name}_penalty" if name in PENALTIES else f"{name}_reward"


def zero_delegation(content_prompts: float) -> bool:
    """The zero-delegation rule, for the reward and every rate of it: no worker prompt
    carried file content (no sub-call at all, or only prompts that name paths)."""
    return content_prompts == 0


def _root_outputs(result: RunResult) -> list[str]:
    """What the root was shown of the run: its first message and every turn's output."""
    return [result.first_message, *(t.output for t in result.turns)]


def _budgeted_coverage(
    credits: Mapping[str, float], files: Mapping[str, str], capacity: float
) -> tuple[float, float]:
    """Coverage under a sub-call budget, and the share of the code the budget can reach: the
    lines read (each file's lines times its credit) over the fewer of all lines and
    ``capacity``, the prompt lines the budget's calls can carry read in full. A file's
    blank lines count, since a numbered prompt carries them as lines too (counted in C, not
    split: a hard task holds 100-500 files, scored on every rollout)."""
    lines = {f: (t := files[f]).count("\n") + (not t.endswith("\n")) for f in credits}
    total = sum(lines.values())
    if not total:
        return 1.0, 1.0
    read = sum(credits[f] * n for f, n in lines.items())
    reach = min(float(total), capacity)
    return min(1.0, read / reach), reach / total


def _budget_score(budget: float, used: float) -> float:
    return 1.0 if used <= budget else budget / used


def compute_reward(
    result: RunResult,
    ground_truth: Sequence[Mapping[str, object] | GroundTruthEntry],
    codebase_files: Mapping[str, str],
    weights: RewardWeights | None = None,
    *,
    index: CoverageIndex | None = None,
    replies: Sequence[tuple[str, str]] | None = None,
    sub_call_budget: int | None = None,
) -> Reward:
    """Score one rollout. ``index`` (a ``CoverageIndex`` of ``codebase_files``) may be passed
    in to reuse it across rollouts of the same task. ``replies`` are the rollout's
    ``(prompt, worker reply)`` pairs; without them grounding is not measured (1.0).

    ``sub_call_budget`` is the task's (the hard tier): too few calls to read every line
    closely, so coverage is the share of the lines the budget *could* have read closely
    (``sub_call_budget * context_lines``) that the run did read, weighed by attention."""
    w = weights or RewardWeights()
    index = index or CoverageIndex(codebase_files)
    entries = parse_ground_truth(list(ground_truth))
    sources = source_files(codebase_files, entries)
    stats = dispatch_stats(
        codebase_files,
        result.sent_prompts,
        min_fraction=w.min_fraction,
        index=index,
        context_lines=w.context_lines,
    )

    score = grade(result.findings, entries, tolerance=w.tolerance)
    quality = score.f_beta(w.beta)
    root_read_tp = 0.0
    if replies is None or not score.matches:
        grounding = 1.0
        grounded_tp = float(score.tp)
        read_share = 0.0
    else:
        reports = worker_reports(replies, codebase_files, w.tolerance)
        rest = [m.finding for m in score.matches if not grounded(m.finding, reports, w.tolerance)]
        grounded_tp = float(len(score.matches) - len(rest))
        if rest:
            # A true positive no worker reported counts at the floor when the root's own
            # outputs showed it the code, and not at all when it was a blind guess.
            seen = root_views(_root_outputs(result), codebase_files)
            root_read_tp = float(sum(1 for f in rest if root_read(f, seen, w.tolerance)))
        grounding = grounded_tp / len(score.matches)
        read_share = root_read_tp / len(score.matches)
    gate = quality * (grounding + w.grounding_floor * read_share)
    ramp = partial(coverage_credit, floor=w.min_fraction)
    credits = {f: stats.credit(f, ramp) for f in sources}
    coverage = sum(credits.values()) / len(sources) if sources else 1.0
    reachable = 1.0
    if sub_call_budget is not None and sources:
        coverage, reachable = _budgeted_coverage(
            credits, codebase_files, sub_call_budget * w.context_lines
        )
    share = sum(stats.shares.get(f, 0.0) for f in sources) / len(sources) if sources else 1.0

    requested = sum(result.batch_sizes)
    batched = sum(n for n in result.batch_sizes if n > 1)
    batch_share = batched / requested if requested else 0.0
    content_share = stats.content_prompts / stats.prompts if stats.prompts else 0.0
    delegation = batch_share * content_share

    chars = sum(len(codebase_files[p]) for p in sources)
    turn_budget = w.base_turns + len(sources) / w.files_per_turn
    token_budget = w.base_root_tokens + w.root_token_share * chars / 4
    root_tokens = result.root_tokens.total
    turn_score = _budget_score(turn_budget, result.num_turns) if result.num_turns else 0.0
    token_score = _budget_score(token_budget, root_tokens)
    efficiency = coverage * (turn_score + token_score) / 2

    # Ending short of coverage costs the same whether the run submitted or ran out of turns.
    early = max(0.0, w.coverage_threshold - coverage) / w.coverage_threshold
    ghosts = sum(1 for f in result.findings if f.file.removeprefix("./") not in codebase_files)
    values = {
        "quality": quality,
        "grounding": grounding,
        "coverage": coverage,
        "delegation": delegation,
        "efficiency": efficiency,
        "zero_delegation": 1.0 if zero_delegation(stats.content_prompts) else 0.0,
        "early_finalize": early,
        "redundancy": stats.redundancy,
        "ghost_findings": ghosts / len(result.findings) if result.findings else 0.0,
        "empty_report": 1.0 if not result.findings and any(e.vulnerable for e in entries) else 0.0,
    }
    process = sum(getattr(w, p) * values[p] for p in _WEIGHTED if p != "quality")
    raw = gate * (w.quality + process) - sum(getattr(w, p) * values[p] for p in PENALTIES)
    parts = {part_metric(name): value for name, value in values.items()}
    details = {
        "precision": score.precision,
        "recall": score.recall,
        "f1": score.f1,
        "tp": float(score.tp),
        "fp": float(score.fp),
        "fn": float(score.fn),
        "decoys_hit": float(score.decoys_hit),
        "gate": gate,
        "grounded_tp": grounded_tp,
        "root_read_tp": root_read_tp,  # not reported by a worker, but shown to the root
        "replies_recorded": float(len(replies) if replies is not None else 0),
        "targeted_prompts": float(stats.targeted_prompts),
        "source_files": float(len(sources)),
        "files_covered": sum(credits.values()),  # in whole-file equivalents
        "coverage_share": share,  # mean in-order share, before the ramp
        "coverage_reachable": reachable,  # share of the lines a sub-call budget can read
        "content_prompts": float(stats.content_prompts),
        "batch_share": batch_share,
        "turn_budget": turn_budget,
        "root_tokens": float(root_tokens),
        "root_token_budget": token_budget,
        "ghost_findings": float(ghosts),
    }
    return Reward(total=min(1.0, max(0.0, raw)), parts=parts, details=details)
