"""The RL reward: a weighted sum of parts, minus penalties, clamped to [0, 1] (DESIGN §7).

Every part is a number in [0, 1] and is reported as its own metric::

    quality          F-beta (beta 0.5: precision-aware) of the findings against ground truth
    coverage         share of coverable source files whose *content* reached a sub-LLM
    delegation       share of sub-calls sent in parallel batches (size > 1), times the share
                     of sent prompts that carried file content
    efficiency       turns and root tokens against a budget scaled by the task's size, times
                     coverage (doing nothing quickly is not efficient)

    zero_delegation  1 when no file content reached any sub-LLM
    early_finalize   answer submitted while coverage was below the threshold: the shortfall,
                     as a share of the threshold
    redundancy       share of the file content dispatched that had been dispatched before
                     (or of prompts that repeat an earlier prompt word for word)
    ghost_findings   share of findings on files that do not exist

``total = clamp(sum(w[p] * part[p] for the four parts) - sum(w[q] * pen[q] for the penalties))``.

Content, never paths, is what counts: coverage and the redundancy and delegation shares
are computed from ``RunResult.sent_prompts`` line by line (``findings.coverage``), so a
prompt that only names a file earns nothing. Everything here is a pure function.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from deeprepo.codebase.languages import language_of
from deeprepo.errors import ConfigError
from deeprepo.findings.coverage import (
    DEFAULT_MIN_FRACTION,
    CoverageIndex,
    coverable_files,
    nontrivial_lines,
    prompt_lines,
)
from deeprepo.findings.grading import (
    DEFAULT_TOLERANCE,
    GroundTruthEntry,
    grade,
    parse_ground_truth,
)
from deeprepo.orchestrator.records import RunResult

__all__ = [
    "PARTS",
    "PENALTIES",
    "DispatchStats",
    "Reward",
    "RewardWeights",
    "compute_reward",
    "dispatch_stats",
    "part_metric",
    "source_files",
]

PARTS: tuple[str, ...] = ("quality", "coverage", "delegation", "efficiency")
PENALTIES: tuple[str, ...] = (
    "zero_delegation",
    "early_finalize",
    "redundancy",
    "ghost_findings",
    "empty_report",
)

# Prose and lock files are not what a code audit must read; they stay out of the denominator.
_NON_SOURCE_LANGUAGES = frozenset({"Markdown", "reStructuredText", "Text"})
_LOCK_FILES = frozenset(
    {
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "Cargo.lock",
        "composer.lock",
    }
)
# A prompt holding this many distinct non-trivial codebase lines carries content even when it
# covers no whole file (a slice of a big file).
_CONTENT_LINES = 30


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the parts and penalties, and the knobs that define them.

    The four part weights sum to 1 by default, so a perfect run scores 1.0. Load from a
    config mapping with :meth:`from_dict` (unknown keys are an error).
    """

    quality: float = 0.25
    coverage: float = 0.35
    delegation: float = 0.20
    efficiency: float = 0.20
    zero_delegation: float = 0.50
    early_finalize: float = 0.30
    redundancy: float = 0.40
    ghost_findings: float = 0.30
    empty_report: float = 0.40  # nothing recorded although the task has bugs to find
    beta: float = 0.5  # F-beta of the quality part; < 1 weighs precision more
    tolerance: int = DEFAULT_TOLERANCE  # grading line tolerance
    coverage_threshold: float = 0.8  # below this, submitting is "finalising before coverage"
    min_fraction: float = DEFAULT_MIN_FRACTION  # share of a file's lines that makes it covered
    base_turns: float = 6.0  # turn budget = base_turns + source files / files_per_turn
    files_per_turn: float = 50.0
    base_root_tokens: float = 30_000.0  # root token budget = base + share * codebase tokens
    root_token_share: float = 0.5

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"reward weight {f.name!r} must be a number >= 0, got {value!r}")
        if self.beta <= 0 or self.files_per_turn <= 0:
            raise ConfigError("reward 'beta' and 'files_per_turn' must be > 0")
        if not 0 < self.coverage_threshold <= 1 or not 0 < self.min_fraction <= 1:
            raise ConfigError("reward 'coverage_threshold' and 'min_fraction' must be in (0, 1]")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewardWeights:
        """Weights from a mapping (e.g. a parsed JSON or TOML table); missing keys keep defaults."""
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown reward weight(s): {', '.join(unknown)}; valid keys: {', '.join(known)}"
            )
        values: dict[str, Any] = {}
        for key, value in data.items():
            try:
                values[key] = int(value) if key == "tolerance" else float(value)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"reward weight {key!r} must be a number, got {value!r}"
                ) from None
        return cls(**values)

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


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


@dataclass(frozen=True)
class DispatchStats:
    """What the sub-LLM prompts of one run carried, measured on content."""

    covered: frozenset[str]  # files whose content reached a worker
    prompts: int
    content_prompts: int  # prompts that carried file content
    shown_lines: int  # file-unique lines dispatched, counted once per prompt
    distinct_lines: int  # ... counted once per run
    duplicate_prompts: int  # prompts identical to an earlier one

    @property
    def redundancy(self) -> float:
        """Share of the dispatched content (or prompts) that repeats what was sent before."""
        by_lines = 1.0 - self.distinct_lines / self.shown_lines if self.shown_lines else 0.0
        by_prompts = self.duplicate_prompts / self.prompts if self.prompts else 0.0
        return max(by_lines, by_prompts)


def part_metric(name: str) -> str:
    """The metric name of a part or penalty: ``delegation`` → ``delegation_reward``,
    ``redundancy`` → ``redundancy_penalty``."""
    return f"{name}_penalty" if name in PENALTIES else f"{name}_reward"


def source_files(
    files: Mapping[str, str], ground_truth: Sequence[GroundTruthEntry] = ()
) -> set[str]:
    """Coverable files an audit must read: code and configuration, not prose or lock files.

    Files named by the ground truth always count, whatever their extension (``.env``).
    """
    out = set()
    for path in coverable_files(files):
        name = path.rsplit("/", 1)[-1]
        lang = language_of(path)
        if lang is not None and lang not in _NON_SOURCE_LANGUAGES and name not in _LOCK_FILES:
            out.add(path)
    out.update(e.file for e in ground_truth if e.file in files and files[e.file].strip())
    return out


def dispatch_stats(
    files: Mapping[str, str],
    prompts: Sequence[str],
    *,
    min_fraction: float = DEFAULT_MIN_FRACTION,
    index: CoverageIndex | None = None,
) -> DispatchStats:
    """Coverage, content-carrying prompts and repeated content of ``prompts`` over ``files``.

    Repeats are counted on lines that belong to exactly one file, so boilerplate shared by
    many files (imports, license headers) never looks like a second dispatch.
    """
    index = index or CoverageIndex(files)
    per_file = {path: nontrivial_lines(text) for path, text in files.items()}
    owners = Counter(line for lines in per_file.values() for line in lines)
    unique = {line for line, n in owners.items() if n == 1}
    everything = set(owners)
    seen: set[str] = set()
    shown = content = 0
    all_lines: set[str] = set()
    for prompt in prompts:
        lines = prompt_lines([prompt])
        all_lines |= lines
        mine = lines & unique
        shown += len(mine)
        seen |= mine
        if len(lines & everything) >= _CONTENT_LINES or any(
            frac >= min_fraction for frac in index.fractions(lines).values()
        ):
            content += 1
    covered = index.covered_by_lines(all_lines, min_fraction)
    return DispatchStats(
        covered=frozenset(covered),
        prompts=len(prompts),
        content_prompts=content,
        shown_lines=shown,
        distinct_lines=len(seen),
        duplicate_prompts=len(prompts) - len(set(prompts)),
    )


def _entries(
    ground_truth: Sequence[Mapping[str, Any] | GroundTruthEntry],
) -> list[GroundTruthEntry]:
    if all(isinstance(e, GroundTruthEntry) for e in ground_truth):
        return [e for e in ground_truth if isinstance(e, GroundTruthEntry)]
    return parse_ground_truth(
        [e.to_dict() if isinstance(e, GroundTruthEntry) else dict(e) for e in ground_truth]
    )


def _budget_score(budget: float, used: float) -> float:
    return 1.0 if used <= budget else budget / used


def compute_reward(
    result: RunResult,
    ground_truth: Sequence[Mapping[str, Any] | GroundTruthEntry],
    codebase_files: Mapping[str, str],
    weights: RewardWeights | None = None,
    *,
    index: CoverageIndex | None = None,
) -> Reward:
    """Score one rollout. ``index`` (a ``CoverageIndex`` of ``codebase_files``) may be passed
    in to reuse it across rollouts of the same task."""
    w = weights or RewardWeights()
    entries = _entries(ground_truth)
    sources = source_files(codebase_files, entries)
    stats = dispatch_stats(
        codebase_files, result.sent_prompts, min_fraction=w.min_fraction, index=index
    )

    score = grade(result.findings, entries, tolerance=w.tolerance)
    quality = score.f_beta(w.beta)
    coverage = len(stats.covered & sources) / len(sources) if sources else 1.0

    requested = sum(result.batch_sizes)
    batched = sum(n for n in result.batch_sizes if n > 1)
    batch_share = batched / requested if requested else 0.0
    content_share = stats.content_prompts / stats.prompts if stats.prompts else 0.0
    delegation = batch_share * content_share

    chars = sum(len(codebase_files[p]) for p in sources)
    turn_budget = w.base_turns + len(sources) / w.files_per_turn
    token_budget = w.base_root_tokens + w.root_token_share * chars / 4
    root_tokens = sum(
        t.input_tokens + t.output_tokens + t.cache_read_tokens + t.cache_write_tokens
        for t in result.turns
    )
    turn_score = _budget_score(turn_budget, result.num_turns) if result.num_turns else 0.0
    token_score = _budget_score(token_budget, root_tokens)
    efficiency = coverage * (turn_score + token_score) / 2

    submitted = result.stop_reason == "answer_ready" and not result.incomplete
    early = max(0.0, w.coverage_threshold - coverage) / w.coverage_threshold if submitted else 0.0
    ghosts = sum(1 for f in result.findings if f.file.removeprefix("./") not in codebase_files)
    values = {
        "quality": quality,
        "coverage": coverage,
        "delegation": delegation,
        "efficiency": efficiency,
        "zero_delegation": 1.0 if stats.content_prompts == 0 else 0.0,
        "early_finalize": early,
        "redundancy": stats.redundancy,
        "ghost_findings": ghosts / len(result.findings) if result.findings else 0.0,
        # Covering every file but reporting nothing is process without product.
        "empty_report": 1.0 if not result.findings and any(e.vulnerable for e in entries) else 0.0,
    }
    raw = sum(getattr(w, p) * values[p] for p in PARTS) - sum(
        getattr(w, p) * values[p] for p in PENALTIES
    )
    parts = {part_metric(name): value for name, value in values.items()}
    details = {
        "precision": score.precision,
        "recall": score.recall,
        "f1": score.f1,
        "tp": float(score.tp),
        "fp": float(score.fp),
        "fn": float(score.fn),
        "decoys_hit": float(score.decoys_hit),
        "source_files": float(len(sources)),
        "files_covered": float(len(stats.covered & sources)),
        "content_prompts": float(stats.content_prompts),
        "batch_share": batch_share,
        "turn_budget": turn_budget,
        "root_tokens": float(root_tokens),
        "root_token_budget": token_budget,
        "ghost_findings": float(ghosts),
    }
    return Reward(total=min(1.0, max(0.0, raw)), parts=parts, details=details)
