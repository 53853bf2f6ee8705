"""How much of each file's *content* reached a sub-LLM, in order (DESIGN §7, decision 80).

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
prompts, in C-level maps: 300 files against 300 prompts of 10 KB, every line new, takes about
twice what the old set-of-lines figure took; a text read again (every rollout of a task) is
remembered whole by :mod:`deeprepo.findings.line_keys` (``docs/performance.md``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import compress, count, pairwise, repeat
from operator import ge

from deeprepo.findings.line_keys import MIN_LINE_LENGTH, line_keys, views

__all__ = [
    "CREDIT_FLOOR",
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

#: In-order share at which a file counts as audited in the run's "audited N of M" figure
#: (and a prompt carries a file's content, for the reward's delegation part).
DEFAULT_MIN_FRACTION = 0.9
#: In-order share at or below which the reward credits a file nothing (:func:`coverage_credit`):
#: steeper than the audit figure, since a root that cuts each file's tail by 5-15% (the
#: "prefix-90" route of issue 19) keeps most bugs, and a ramp from 0.9 still paid it.
CREDIT_FLOOR = 0.95
# Set between the keys of two prompts (or two views of one): a non-trivial key no file has,
# so no pair runs from one prompt into the next.
_BARRIER = "\0" * MIN_LINE_LENGTH


@dataclass(frozen=True)
class Shown:
    """What prompts showed: the key of every line, and how many times each pair of
    non-trivial keys sat next to each other (short lines between them skipped) in a prompt.
    A pair shown once credits one place in a file that has it twice: a shuffle that happens to
    set two common lines side by side does not read every copy of them."""

    lines: frozenset[str]
    pairs: Counter[tuple[str, str]]

    def __or__(self, other: Shown) -> Shown:
        return Shown(self.lines | other.lines, Counter(self.pairs) + Counter(other.pairs))


def shown_in(prompts: Iterable[str]) -> Shown:
    """The keys and in-order key pairs of ``prompts`` (every view of each, see
    :func:`deeprepo.findings.line_keys.views`)."""
    # Keys text by text, not of the texts joined: line_keys remembers each text whole, and
    # the same prompt is read again (per prompt by the reward, by the oracle).
    keys: list[str] = []
    for prompt in prompts:
        for view in views(prompt):
            if keys:
                keys.append(_BARRIER)
            keys += line_keys(view)
    seq = _nontrivial(keys)
    lines = set(keys)
    lines.discard("")
    return Shown(frozenset(lines), Counter(pairwise(seq)))


def _nontrivial(keys: list[str]) -> list[str]:
    """The keys of at least :data:`MIN_LINE_LENGTH` characters, in order (C-level maps)."""
    return list(compress(keys, map(ge, map(len, keys), repeat(MIN_LINE_LENGTH))))


def prompt_lines(prompts: Iterable[str]) -> set[str]:
    """The key of every non-empty line of the prompts, order left aside (which files a
    prompt touches, and what the root was shown)."""
    return set(shown_in(prompts).lines)


def nontrivial_lines(text: str) -> frozenset[str]:
    """Distinct keys of at least :data:`MIN_LINE_LENGTH` characters of ``text``'s lines."""
    return frozenset(_nontrivial(line_keys(text)))


def coverable_files(codebase: Mapping[str, str]) -> set[str]:
    """Files that can be covered at all: those with non-whitespace content."""
    return {path for path, text in codebase.items() if text.strip()}


def coverage_credit(share: float, floor: float = CREDIT_FLOOR) -> float:
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
        self._pairs: dict[str, list[tuple[str, str]]] = {}  # path -> its key pairs, in order
        # path -> indexes of the pairs the file has more than once (credited once per showing)
        self._repeats: dict[str, set[int]] = {}
        self._files: dict[str, frozenset[str]] = {}  # path -> distinct non-trivial keys
        self._short: dict[str, frozenset[str]] = {}  # path -> all keys, files without long ones
        self._by_line_cache: dict[str, list[str]] | None = None
        self._by_pair_cache: dict[tuple[str, str], dict[str, list[int]]] | None = None
        self._pair_set_cache: frozenset[tuple[str, str]] | None = None
        for path, text in codebase.items():
            keys = line_keys(text)
            seq = _nontrivial(keys)
            if seq:
                self._seq[path] = seq
                self._files[path] = frozenset(seq)
                pairs = self._pairs[path] = list(pairwise(seq))
                if len(set(pairs)) < len(pairs):
                    twice = {p for p, n in Counter(pairs).items() if n > 1}
                    self._repeats[path] = {j for j, p in enumerate(pairs) if p in twice}
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
    def _by_pair(self) -> dict[tuple[str, str], dict[str, list[int]]]:
        """key pair -> file -> indexes of the pair's first line; built on first use."""
        if self._by_pair_cache is None:
            index: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(dict)
            for path, pairs in self._pairs.items():
                for j, pair in enumerate(pairs):
                    index[pair].setdefault(path, []).append(j)
            self._by_pair_cache = dict(index)
        return self._by_pair_cache

    def pairs_in_order(self, shown: Shown) -> int:
        """How many distinct pairs ``shown`` has that some file has too."""
        if self._pair_set_cache is None:
            self._pair_set_cache = frozenset(p for pairs in self._pairs.values() for p in pairs)
        return len(self._pair_set_cache.intersection(shown.pairs))

    @property
    def coverable(self) -> set[str]:
        return set(self._files) | set(self._short)

    def distinct_lines(self, path: str) -> frozenset[str]:
        """``path``'s distinct non-trivial keys (:func:`nontrivial_lines` of its text)."""
        return self._files.get(path, frozenset())

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
        # Each shown pair credits as many places of a file as it was shown (the first ones).
        if len(pairs) * 4 < self._total_lines:
            for pair, times in pairs.items():
                for path, firsts in self._by_pair.get(pair, {}).items():
                    hits[path].update(firsts[:times])
        else:
            for path, file_pairs in self._pairs.items():
                found = set(compress(count(), map(pairs.__contains__, file_pairs)))
                repeated = found & self._repeats.get(path, set())
                if repeated:
                    used: dict[tuple[str, str], int] = defaultdict(int)
                    for j in sorted(repeated):
                        pair = file_pairs[j]
                        if used[pair] >= pairs[pair]:
                            found.discard(j)
                        used[pair] += 1
                if found:
                    hits[path] = found
        out: dict[str, float] = {}
        for path, js in hits.items():
            # Pair j shows lines j and j + 1.
            shown_lines = js | set(map((1).__add__, js))
            out[path] = len(shown_lines) / len(self._seq[path])
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
