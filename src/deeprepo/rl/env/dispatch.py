"""What a run's worker prompts carried, measured on content (``findings.coverage``):
how much of each source file reached a worker in order, how many prompts carried code, and
how much of it was sent again blindly. The reward's coverage, delegation and redundancy
come from here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
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

__all__ = ["DispatchStats", "dispatch_stats", "source_files"]

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

    @property
    def redundancy(self) -> float:
        """Share of the dispatched content (or prompts) that blindly repeats what was sent."""
        by_lines = self.repeated_lines / self.shown_lines if self.shown_lines else 0.0
        by_prompts = self.duplicate_prompts / self.prompts if self.prompts else 0.0
        return max(by_lines, by_prompts)


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

    Coverage and content are measured in order (``CoverageIndex.shares``): a prompt carries
    content when it shows a file to ``min_fraction`` or 30 of its lines in order.

    Repeats are counted on lines that belong to exactly one file, so boilerplate shared by
    many files (imports, license headers) never looks like a second dispatch. Only *blind*
    re-sends count: a file's lines shown again in a prompt whose files were all shown
    together before (the same content, however the instruction is worded). A file shown
    again beside files it was not shown with (a caller with its callee, to follow data
    across files) is new context, and a prompt that re-sends at most 60 such lines and
    under half of every file it touches is a targeted re-query (checking a finding).
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
    for prompt in prompts:
        shown_here = shown_in([prompt])
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
