"""What a run's worker prompts carried, measured on content (``findings.coverage``):
how much of each source file reached a worker in order, how many prompts carried code, and
how much of it was sent again blindly. The reward's coverage, delegation and redundancy
come from here.

A worker reads a long prompt less closely (:func:`attention`, the curve the ``oracle``
worker answers by): a file's content counts as far as the prompts that carried it could be
read, so a file buried in a prompt twice the worker's context counts a quarter
(``DispatchStats.credit``, decision 102)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from deeprepo.codebase.languages import language_of
from deeprepo.findings.coverage import (
    DEFAULT_MIN_FRACTION,
    CoverageIndex,
    Shown,
    coverable_files,
    shown_in,
)
from deeprepo.findings.grading import GroundTruthEntry
from deeprepo.findings.line_keys import split_lines, views

__all__ = [
    "DEFAULT_CONTEXT_LINES",
    "DispatchStats",
    "attention",
    "dispatch_stats",
    "prompt_attention",
    "prompt_size",
    "source_files",
]

#: Non-empty prompt lines a worker reads in full (``docs/reward.md``, "Long prompts").
DEFAULT_CONTEXT_LINES = 800
# Attention is rounded to the nearest 1 / _ATTENTION_STEPS before shares are layered by it: a
# run's long prompts then cost at most _ATTENTION_STEPS share computations, however many.
_ATTENTION_STEPS = 20

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
# A prompt showing this many non-trivial codebase lines in order carries content even when it
# covers no whole file (a slice of a big file); shuffled or sampled lines carry none.
_CONTENT_LINES = 30
# A re-send of at most this many file-unique lines, showing under half of every file it
# touches, is a targeted re-query (verification), not a blind repeat.
_TARGETED_LINES = 60
_TARGETED_SHARE = 0.5
# ... and one carrying at least this many of them counts as a content prompt (delegation).
_TARGETED_MIN_LINES = 5


@dataclass(frozen=True)
class DispatchStats:
    """What the sub-LLM prompts of one run carried, measured on content."""

    covered: frozenset[str]  # files shown in order to at least ``min_fraction``
    prompts: int
    content_prompts: int  # prompts that carried file content
    shown_lines: int  # file-unique lines dispatched, once per prompt (targeted ones left out)
    distinct_lines: int  # ... counted once per run
    duplicate_prompts: int  # prompts identical to an earlier one
    repeated_lines: int = 0  # file-unique lines of blind re-sends that had been sent before
    targeted_prompts: int = 0  # short re-queries of content already sent (verification)
    # file -> in-order share of it the prompts showed (``CoverageIndex.shares``), above 0 only
    shares: Mapping[str, float] = field(default_factory=dict, compare=False)
    # (attention, file -> in-order share shown by the prompts read at least that closely),
    # highest attention first, prompts that cannot be read at all left out; None when every
    # prompt was read in full (``shares`` alone).
    layers: tuple[tuple[float, Mapping[str, float]], ...] | None = field(
        default=None, compare=False
    )

    def credit(self, path: str, ramp: Callable[[float], float]) -> float:
        """``path``'s credit: ``ramp`` of its in-order share, each share weighed by the
        attention of the prompts that showed it. With layers a1 > a2 > ... (shares s1 <= s2
        <= ...) it is the sum of (a_k - a_k+1) * ramp(s_k): a file shown whole in one prompt
        read at attention a earns a, one shown whole in a prompt read in full earns 1."""
        if self.layers is None:
            return ramp(self.shares.get(path, 0.0))
        total = 0.0
        for k, (level, shares) in enumerate(self.layers):
            below = self.layers[k + 1][0] if k + 1 < len(self.layers) else 0.0
            total += (level - below) * ramp(shares.get(path, 0.0))
        return total

    @property
    def redundancy(self) -> float:
        """Share of the dispatched content (or prompts) that blindly repeats what was sent."""
        by_lines = self.repeated_lines / self.shown_lines if self.shown_lines else 0.0
        by_prompts = self.duplicate_prompts / self.prompts if self.prompts else 0.0
        return max(by_lines, by_prompts)


def prompt_size(prompt: str) -> int:
    """The prompt's size in non-empty lines, as the worker reads it: of its view with the
    most lines (a file wrapped in a JSON string is its lines, not one line)."""
    return max(sum(map(bool, map(str.strip, split_lines(v)))) for v in views(prompt))


def attention(size: int, context_lines: float = DEFAULT_CONTEXT_LINES) -> float:
    """How closely a worker reads a prompt of ``size`` non-empty lines: 1 within
    ``context_lines``, then ``(context_lines / size) ** 2`` (``docs/reward.md``, "Long
    prompts"). The ``oracle`` worker reports a located bug with this chance."""
    return min(1.0, context_lines / max(size, 1)) ** 2


def prompt_attention(prompt: str, context_lines: float = DEFAULT_CONTEXT_LINES) -> float:
    """:func:`attention` at :func:`prompt_size`: how closely a worker reads ``prompt``. One
    whose every view has fewer line ends than ``context_lines`` is read in full without its
    lines being counted (most prompts: the oracle and the reward ask for every one)."""
    if all(v.count("\n") + v.count("\r") < context_lines for v in views(prompt)):
        return 1.0
    return attention(prompt_size(prompt), context_lines)


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
    context_lines: float | None = None,
) -> DispatchStats:
    """Coverage, content-carrying prompts and repeated content of ``prompts`` over ``files``.

    Coverage and content are measured in order (``CoverageIndex.shares``): a prompt carries
    content when it shows a file to ``min_fraction`` or 30 of its lines in order.

    Repeats are counted on lines that belong to exactly one file, so boilerplate shared by
    many files (imports, license headers) never looks like a second dispatch. Only *blind*
    re-sends count: a file's lines shown again in a prompt whose files were all shown
    together before (the same content, however the instruction is worded). A file shown
    again beside files it was not shown with (a caller with its callee, to follow data
    across files) is new context, and a prompt that re-sends at most 60 such lines and
    under half of every file it touches is a targeted re-query (checking a finding).

    With ``context_lines`` each prompt is also weighed by :func:`attention` (rounded to a
    twentieth) and ``layers`` holds the shares shown by the prompts read at least that
    closely, for :meth:`DispatchStats.credit`.
    """
    index = index or CoverageIndex(files)
    per_file = {path: index.distinct_lines(path) for path in files}
    owners = Counter(line for lines in per_file.values() for line in lines)
    owner = {line: path for path, lines in per_file.items() for line in lines if owners[line] == 1}
    unique = set(owner)
    groups: dict[str, list[frozenset[str]]] = {}  # file -> the file sets it was shown in
    seen: set[str] = set()
    shown = content = repeated = targeted = 0
    all_lines: set[str] = set()
    all_pairs: Counter[tuple[str, str]] = Counter()
    by_attention: dict[float, list[Shown]] = {}
    for prompt in prompts:
        shown_here = shown_in([prompt])
        if context_lines is not None:
            steps = round(prompt_attention(prompt, context_lines) * _ATTENTION_STEPS)
            level = steps / _ATTENTION_STEPS
            by_attention.setdefault(level, []).append(shown_here)
        all_lines |= shown_here.lines
        all_pairs.update(shown_here.pairs.elements())  # counted in C, not item by item
        lines = shown_here.lines
        mine = lines & unique
        # Lines shown in order, at least (a run of n pairs is n + 1 lines): one set
        # intersection, where each file's share would cost a walk of the prompt's pairs.
        pairs = index.pairs_in_order(shown_here)
        in_order = pairs + 1 if pairs else 0
        again = mine & seen
        group = frozenset(owner[ln] for ln in mine)
        is_targeted = bool(
            again
            and len(mine) <= _TARGETED_LINES
            and all(f < _TARGETED_SHARE for f in index.fractions(lines).values())
        )
        if is_targeted:
            targeted += 1
        else:
            shown += len(mine)
            blind = {f for f in group if any(group <= g for g in groups.get(f, ()))}
            repeated += sum(1 for ln in again if owner[ln] in blind)
        for f in group:
            groups.setdefault(f, []).append(group)
        seen |= mine
        if (
            in_order >= _CONTENT_LINES
            or (is_targeted and in_order >= _TARGETED_MIN_LINES)
            or any(share >= min_fraction for share in index.shares(shown_here).values())
        ):
            content += 1  # a check of a finding carries the code it checks
    shares = index.shares(Shown(frozenset(all_lines), all_pairs))
    return DispatchStats(
        layers=_layers(index, by_attention) if set(by_attention) - {1.0} else None,
        covered=frozenset(f for f, share in shares.items() if share >= min_fraction),
        shares=shares,
        prompts=len(prompts),
        content_prompts=content,
        shown_lines=shown,
        distinct_lines=len(seen),
        duplicate_prompts=len(prompts) - len(set(prompts)),
        repeated_lines=repeated,
        targeted_prompts=targeted,
    )


def _layers(
    index: CoverageIndex, by_attention: Mapping[float, Sequence[Shown]]
) -> tuple[tuple[float, Mapping[str, float]], ...]:
    """For each attention level, highest first, the shares shown by every prompt read at
    least that closely (a level of 0 is a prompt that could not be read: it earns nothing)."""
    out: list[tuple[float, Mapping[str, float]]] = []
    lines: frozenset[str] = frozenset()
    pairs: Counter[tuple[str, str]] = Counter()
    for level in sorted(by_attention, reverse=True):
        for shown in by_attention[level]:
            lines |= shown.lines
            pairs.update(shown.pairs.elements())
        if level > 0:
            out.append((level, index.shares(Shown(lines, pairs))))
    return tuple(out)
