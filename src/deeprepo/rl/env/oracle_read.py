"""What a prompt shows the oracle: which files' lines it holds, where, and the instruction
around them. Files are found by content, through the keys coverage compares
(``findings.line_keys``): bare, fenced, quoted, numbered on the left or the right, diff
markers, wrapper tags, XML or JSON escaping, with or without a path header, so every format
that counts as coverage is read. Without a codebase only ``<file path="...">`` blocks are
read, and trusted."""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from deeprepo.base.prompts import extract_file_blocks
from deeprepo.findings.line_keys import (
    MIN_LINE_LENGTH,
    line_keys,
    outside_literals,
    shown_number,
    split_lines,
    views,
)

__all__ = ["PromptReader", "ShownFile"]

_AMBIGUOUS = 8  # a line found at more places than this is boilerplate: no anchor
_NEIGHBOUR_SPAN = 6  # how far (in file lines) a bug's neighbour may be
_SLACK = 3  # extra prompt lines allowed between a line and its neighbour


@dataclass
class ShownFile:
    """One file as a prompt shows it: where each of its lines sits in the prompt."""

    path: str
    at: dict[int, list[int]] = field(default_factory=dict)  # line number -> prompt positions
    number: dict[int, int] = field(default_factory=dict)  # line number -> number shown
    text: dict[int, str] = field(default_factory=dict)  # line number -> stripped text
    nontrivial: list[int] = field(default_factory=list)  # the file's non-trivial line numbers
    # Kept up to date by add(): the oracle asks for it on every answer, and counting over
    # ``text`` each time was a tenth of a reading.
    _shown_nontrivial: int = field(default=0, repr=False, compare=False)

    def add(self, line: int, pos: int, text: str, number: int | None) -> None:
        self.at.setdefault(line, []).append(pos)
        old = self.text.get(line)
        if old is not None and len(old) >= MIN_LINE_LENGTH:
            self._shown_nontrivial -= 1
        if len(text) >= MIN_LINE_LENGTH:
            self._shown_nontrivial += 1
        self.text[line] = text
        if number is not None:
            self.number[line] = number

    @property
    def shown_nontrivial(self) -> int:
        """How many of the shown lines are non-trivial (long enough to locate a bug)."""
        return self._shown_nontrivial

    def located(self, lo: int, hi: int) -> int | None:
        """A non-trivial line in ``[lo, hi]`` shown in order with its neighbours: of the
        (up to two) non-trivial file lines on each side of it, at least one is shown, and
        every one shown sits on its side of it in the prompt, close by. Shuffled lines fail
        this; a slice that cuts next to the line passes on the side it keeps."""
        nt = self.nontrivial
        for n in range(lo, hi + 1):
            if n not in self.at or len(self.text[n]) < MIN_LINE_LENGTH:
                continue
            i = bisect.bisect_left(nt, n)
            near = [
                m for m in nt[max(0, i - 2) : i + 3] if m != n and abs(m - n) <= _NEIGHBOUR_SPAN
            ]
            if not near:
                return n  # nothing near it in the file: the line stands alone
            shown = [m for m in near if m in self.at]
            # Every neighbour the prompt shows must sit in order, close by; none shown is
            # a line without context.
            if shown and any(
                all(
                    any(
                        0 < (p - pos) * (1 if m > n else -1) <= abs(m - n) + _SLACK
                        for p in self.at[m]
                    )
                    for m in shown
                )
                for pos in self.at[n]
            ):
                return n
        return None

    def cited(self, line: int) -> int:
        """The number a worker would cite for file line ``line``: the prompt's own, if any."""
        return self.number.get(line, line)


# One line's reading: ``None`` (a short line of the repository: neither code shown nor
# instruction), ``()`` (instruction text), or ``(number, places)``: the number the prompt
# gives the line and where in the repository it is (empty when ambiguous).
_Resolved = tuple[int | None, tuple[tuple[str, int], ...]] | tuple[()] | None
_MEMO_LINES = 20_000  # distinct prompt lines remembered per codebase before starting over
_READ_LINES = 20_000  # prompt lines whose reading is remembered per codebase, then over
_Reading = tuple[dict[str, ShownFile], str, int]
_SHARED = 16  # codebases whose index is kept for the next reader (rollouts of one task)


class _Index:
    """Where each non-trivial line of a codebase is, and what each prompt line read so far
    resolved to: prompts repeat lines (a file in several slices; every rollout of a task
    shows the same files), so each distinct line is looked up once."""

    def __init__(self, codebase: Mapping[str, str]) -> None:
        where: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.all_keys: set[str] = set()
        self.as_written: set[str] = set()  # the files' own lines, blanks collapsed
        self.text: dict[str, list[str]] = {}  # path -> its stripped lines
        self.nontrivial: dict[str, list[int]] = {}
        for path, text in codebase.items():
            keys = line_keys(text)
            self.text[path] = [ln.strip() for ln in split_lines(text)]
            self.as_written.update(" ".join(ln.split()) for ln in self.text[path])
            self.nontrivial[path] = [i for i, k in enumerate(keys, 1) if len(k) >= MIN_LINE_LENGTH]
            for i, k in enumerate(keys, 1):
                if k:
                    self.all_keys.add(k)
                    if len(k) >= MIN_LINE_LENGTH:
                        where[k].append((path, i))
        self.where = dict(where)
        self.memo: dict[str, _Resolved] = {}
        # Whole readings by prompt: the oracle reads each prompt it answers, grounding reads
        # it again for the reward, and every rollout of a task sends the same ones.
        self.reads: dict[str, _Reading] = {}
        self.read_lines = 0  # the non-empty lines of the prompts in ``reads``

    def resolve(self, raw: str, key: str) -> _Resolved:
        """What the (non-blank) prompt line ``raw``, whose key is ``key``, shows."""
        try:
            return self.memo[raw]
        except KeyError:
            pass
        if len(self.memo) >= _MEMO_LINES:
            self.memo.clear()
        out = self.memo[raw] = self._resolve(raw, key)
        return out

    def _resolve(self, raw: str, key: str) -> _Resolved:
        places = self.where.get(key)
        if places is None:
            return None if key in self.all_keys or not key else ()
        if len(places) > _AMBIGUOUS:
            return (None, ())
        # A number the line shows is its own unless the code itself reads so (``1 + x``).
        number = None if " ".join(raw.split()) in self.as_written else shown_number(raw)
        if number is not None:
            # A line whose text repeats in a file is the copy its number names.
            exact = {path for path, n in places if n == number}
            places = [(p, n) for p, n in places if p not in exact or n == number]
        return (number, tuple(places))


_shared: OrderedDict[frozenset[tuple[str, str]], _Index] = OrderedDict()
_shared_lock = threading.Lock()


def _index_for(codebase: dict[str, str]) -> _Index:
    """The index of ``codebase``, shared by readers of equal codebases (each rollout builds
    its own oracle, and so its own reader, over the same task)."""
    key = frozenset(codebase.items())
    with _shared_lock:  # oracles may answer from several threads (a trainer's, an env's)
        index = _shared.get(key)
        if index is not None:
            _shared.move_to_end(key)
            return index
    index = _Index(codebase)  # built outside the lock: two threads may both build one
    with _shared_lock:
        _shared[key] = index
        if len(_shared) > _SHARED:
            _shared.popitem(last=False)
    return index


class PromptReader:
    """Reads prompts against one codebase (indexed on first use)."""

    def __init__(self, codebase: Mapping[str, str]) -> None:
        self._codebase = {k.removeprefix("./"): v for k, v in codebase.items()}
        self._index: _Index | None = None

    def read(self, prompt: str) -> _Reading:
        """Files shown (by content), the instruction text (lines that are no code of the
        repository) and the prompt's size in non-empty lines. Readers of one codebase share
        what they read: the views are the same objects on every reading, not to be changed."""
        if not self._codebase:
            return self._read_blocks(prompt)
        if self._index is None:
            self._index = _index_for(self._codebase)
        index = self._index
        known = index.reads.get(prompt)
        if known is not None:
            return dict(known[0]), known[1], known[2]
        kept, instruction, size = self._read(prompt)
        if index.read_lines + size > _READ_LINES:  # bounded, as the line memo is
            index.reads.clear()
            index.read_lines = 0
        index.reads[prompt] = (kept, instruction, size)
        index.read_lines += size
        return dict(kept), instruction, size

    def _read(self, prompt: str) -> _Reading:
        """:meth:`read`, worked out."""
        assert self._index is not None
        # A prompt wrapping code in string literals is read as its unwrapped view (the one
        # whose lines resolve to the most code); its instruction is what is outside them.
        best: tuple[int, dict[str, ShownFile], str, int] | None = None
        for k, text in enumerate(views(prompt)):
            shown, instruction, size = self._read_text(text)
            code = sum(len(v.at) for v in shown.values())
            if best is None or code > best[0]:
                if k:
                    instruction = self._read_text(outside_literals(prompt))[1]
                best = (code, shown, instruction, size)
        assert best is not None
        _, shown, instruction, size = best
        nontrivial = self._index.nontrivial
        # Files that only share a line or two (boilerplate) with the prompt are not shown.
        kept = {
            p: v
            for p, v in shown.items()
            if v.shown_nontrivial >= min(5, max(1, len(nontrivial[p]) // 2))
        }
        return kept, instruction, size

    def _read_text(self, text: str) -> tuple[dict[str, ShownFile], str, int]:
        index = self._index
        assert index is not None
        resolve, nontrivial, file_text = index.resolve, index.nontrivial, index.text
        lines = split_lines(text)
        shown: dict[str, ShownFile] = {}
        instruction: list[str] = []
        size = 0
        for pos, (raw, key) in enumerate(zip(lines, line_keys(text), strict=True)):
            if not raw.strip():
                continue
            size += 1
            found = resolve(raw, key)
            if found is None:
                continue
            if not found:
                instruction.append(raw)
                continue
            number, places = found
            for path, n in places:
                view = shown.get(path)
                if view is None:
                    view = shown[path] = ShownFile(path, nontrivial=nontrivial[path])
                view.add(n, pos, file_text[path][n - 1], number)
        return shown, "\n".join(instruction), size

    def _read_blocks(self, prompt: str) -> tuple[dict[str, ShownFile], str, int]:
        shown: dict[str, ShownFile] = {}
        pos = 0
        for raw_path, content, start in extract_file_blocks(prompt):
            path = raw_path.strip().removeprefix("./")
            view = shown.setdefault(path, ShownFile(path))
            for k, line in enumerate(content.split("\n")):
                pos += 1
                if s := line.strip():
                    view.add(start + k, pos, s, None)
        for view in shown.values():
            view.nontrivial = sorted(n for n, t in view.text.items() if len(t) >= MIN_LINE_LENGTH)
        instruction = re.sub(r"<file .*?</file>", "", prompt, flags=re.DOTALL)
        size = sum(1 for ln in prompt.split("\n") if ln.strip())
        return {p: v for p, v in shown.items() if v.text}, instruction, size
