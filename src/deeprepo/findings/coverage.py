"""How much of each file's *content* reached a sub-LLM, in order (DESIGN §7, decision 78).

A file's **share** is the part of its non-trivial lines (keys of at least
:data:`MIN_LINE_LENGTH` characters, :mod:`deeprepo.findings.line_keys`) that some prompt
showed *in order*: a line counts when the prompt shows it directly after the file's
previous non-trivial line or directly before its next one (short lines and blank lines
between them are skipped on both sides). Every format normalises to the same keys: line
numbers on the left or the right, diff markers, fences, block quotes, wrapper tags, XML and
JSON escaping, CRLF, tabs. Shuffled, sorted, reversed, sampled, every-other-line or
interleaved lines show few pairs and score near 0; a window shows its share of the file; a
file split across prompts loses nothing (a line at a cut still has its other neighbour). A
file with one non-trivial line counts it when shown; a file whose lines are all short
counts when every one of them is shown. Naming a path is not coverage. Empty files are never
coverable and stay out of the denominator (:func:`coverable_files`).

The share is continuous. Its users turn it into what they need: the Episode's audit figure
calls a file audited at :data:`DEFAULT_MIN_FRACTION`; the reward credits a file on a ramp
(:func:`coverage_credit`). Everything is set arithmetic on the keys and key pairs of the
prompts, so 300 files against 300 prompts of 10 KB takes a few tens of milliseconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from deeprepo.findings.line_keys import MIN_LINE_LENGTH, line_keys, views

__all__ = [
    "DEFAULT_MIN_FRACTION",
    "MIN_LINE_LENGTH",
    "CoverageIndex",
    "Shown",
    "coverable_files",
    "coverage_credit",
    "covered_files",
    "nontrivial_lines",
    "prompt_lines",
    "shown_in",
    "shown_line_numbers",
]

#: In-order share at which a file counts as audited in the run's "audited N of M" figure,
#: and below which the reward credits it nothing (:func:`coverage_credit`).
DEFAULT_MIN_FRACTION = 0.9
# Joins prompts into one text for the regex passes: a non-trivial key no file has, so no
# pair runs from one prompt into the next.
_BARRIER = "\n\0\0\0\0\0\0\0\0\n"


@dataclass(frozen=True)
class Shown:
    """What prompts showed: the key of every line, and every pair of non-trivial keys that
    sat next to each other (short lines between them skipped) in one prompt."""

    lines: frozenset[str]
    pairs: frozenset[tuple[str, str]]

    def __or__(self, other: Shown) -> Shown:
        return Shown(self.lines | other.lines, self.pairs | other.pairs)


def shown_in(prompts: Iterable[str]) -> Shown:
    """The keys and in-order key pairs of ``prompts`` (every view of each, see
    :func:`deeprepo.findings.line_keys.views`)."""
    texts = [view for prompt in prompts for view in views(prompt)]
    keys = line_keys(_BARRIER.join(texts))
    seq = [k for k in keys if len(k) >= MIN_LINE_LENGTH]
    lines = set(keys)
    lines.discard("")
    return Shown(frozenset(lines), frozenset(pairwise(seq)))


def prompt_lines(prompts: Iterable[str]) -> set[str]:
    """The key of every non-empty line of the prompts, order left aside (which files a
    prompt touches, and what the root was shown)."""
    return set(shown_in(prompts).lines)


def nontrivial_lines(text: str) -> frozenset[str]:
    """Distinct keys of at least :data:`MIN_LINE_LENGTH` characters of ``text``'s lines."""
    return frozenset(k for k in line_keys(text) if len(k) >= MIN_LINE_LENGTH)


def coverable_files(codebase: Mapping[str, str]) -> set[str]:
    """Files that can be covered at all: those with non-whitespace content."""
    return {path for path, text in codebase.items() if text.strip()}


def coverage_credit(share: float, floor: float = DEFAULT_MIN_FRACTION) -> float:
    """The reward's credit for a file shown to ``share``: 0 up to ``floor``, rising linearly
    to 1 for the whole file. Unread code costs more than read code earns: a file cut short
    by a tenth is a tenth of its bugs unseen, and every file cut so is the whole task's."""
    if share >= 1.0:
        return 1.0
    if floor >= 1.0 or share <= floor:
        return 0.0
    return (share - floor) / (1.0 - floor)


class CoverageIndex:
    """Per-file keys and key pairs of a codebase, built once and queried with :class:`Shown`."""

    def __init__(self, codebase: Mapping[str, str]) -> None:
        self._seq: dict[str, list[str]] = {}  # path -> its non-trivial keys, in order
        self._files: dict[str, frozenset[str]] = {}  # path -> distinct non-trivial keys
        self._short: dict[str, frozenset[str]] = {}  # path -> all keys, files without long ones
        self._by_line_cache: dict[str, list[str]] | None = None
        self._by_pair_cache: dict[tuple[str, str], list[tuple[str, int]]] | None = None
        for path, text in codebase.items():
            keys = line_keys(text)
            seq = [k for k in keys if len(k) >= MIN_LINE_LENGTH]
            if seq:
                self._seq[path] = seq
                self._files[path] = frozenset(seq)
            elif text.strip():
                short = {k for k in keys if k} or {s for s in map(str.strip, keys) if s}
                self._short[path] = frozenset(short or {text.strip()})
        self._total_lines = sum(map(len, self._files.values()))

    @property
    def _by_line(self) -> dict[str, list[str]]:
        """key -> files holding it; built on first use (only small queries need it)."""
        if self._by_line_cache is None:
            index: dict[str, list[str]] = defaultdict(list)
            for path, lines in self._files.items():
                for ln in lines:
                    index[ln].append(path)
            self._by_line_cache = dict(index)
        return self._by_line_cache

    @property
    def _by_pair(self) -> dict[tuple[str, str], list[tuple[str, int]]]:
        """key pair -> (file, index of the pair's first line); built on first use."""
        if self._by_pair_cache is None:
            index: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
            for path, seq in self._seq.items():
                for j, pair in enumerate(pairwise(seq)):
                    index[pair].append((path, j))
            self._by_pair_cache = dict(index)
        return self._by_pair_cache

    @property
    def coverable(self) -> set[str]:
        return set(self._files) | set(self._short)

    def lines_of(self, path: str) -> int:
        """How many non-trivial lines ``path`` has (0 for a file of short lines only)."""
        return len(self._seq.get(path, ()))

    def fractions(self, lines: Iterable[str]) -> dict[str, float]:
        """Share of each file's distinct non-trivial keys among ``lines``, order left aside:
        which files a prompt *touches* (files above 0 only). Coverage is :meth:`shares`."""
        lines = lines if isinstance(lines, set | frozenset) else set(lines)
        counts: dict[str, int] = defaultdict(int)
        # A prompt or two: walk its lines through the inverted index; many: intersect per file.
        if len(lines) * 4 < self._total_lines:
            for ln in lines:
                for path in self._by_line.get(ln, ()):
                    counts[path] += 1
        else:
            for path, flines in self._files.items():
                n = len(flines & lines)
                if n:
                    counts[path] = n
        out = {path: n / len(self._files[path]) for path, n in counts.items()}
        for path, short in self._short.items():
            if short <= lines:
                out[path] = 1.0
        return out

    def shares(self, shown: Shown) -> dict[str, float]:
        """Each file's in-order share (see the module docstring), files above 0 only."""
        hits: dict[str, set[int]] = defaultdict(set)
        pairs = shown.pairs
        if len(pairs) * 4 < self._total_lines:
            for pair in pairs:
                for path, j in self._by_pair.get(pair, ()):
                    hits[path].add(j)
        else:
            for path, seq in self._seq.items():
                found = {j for j, p in enumerate(pairwise(seq)) if p in pairs}
                if found:
                    hits[path] = found
        out: dict[str, float] = {}
        for path, js in hits.items():
            # Pair j shows lines j and j + 1.
            out[path] = len(js | {j + 1 for j in js}) / len(self._seq[path])
        for path, seq in self._seq.items():
            if len(seq) == 1 and seq[0] in shown.lines:
                out[path] = 1.0
        for path, short in self._short.items():
            if short <= shown.lines:
                out[path] = 1.0
        return out

    def covered(
        self, prompts: Iterable[str], min_fraction: float = DEFAULT_MIN_FRACTION
    ) -> set[str]:
        """Files shown in order to at least ``min_fraction`` by these prompts."""
        return self.covered_by(shown_in(prompts), min_fraction)

    def covered_by(self, shown: Shown, min_fraction: float = DEFAULT_MIN_FRACTION) -> set[str]:
        """:meth:`covered` for what the prompts showed (:func:`shown_in`)."""
        return {path for path, share in self.shares(shown).items() if share >= min_fraction}


def covered_files(
    codebase: Mapping[str, str], prompts: Iterable[str], min_fraction: float = DEFAULT_MIN_FRACTION
) -> set[str]:
    """Files of ``codebase`` whose content reached a worker, in order, through ``prompts``."""
    return CoverageIndex(codebase).covered(prompts, min_fraction)


def shown_line_numbers(text: str, lines: Iterable[str]) -> set[int]:
    """1-based numbers (counted as ``prompts.number_lines`` does) of the lines of ``text``
    whose key is in ``lines``."""
    wanted = lines if isinstance(lines, set | frozenset) else set(lines)
    return {i for i, k in enumerate(line_keys(text), 1) if k and k in wanted}
