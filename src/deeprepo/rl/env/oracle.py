"""The ``oracle`` sub-worker: answers like an LLM auditor, from a task's ground truth (DESIGN §5).

It isolates orchestration skill in RL: a root that gets the code to a worker with a real
audit request is rewarded, however well the worker reads. It behaves the way an LLM
worker does, so a root cannot game it with something an LLM would not answer:

* **It reads the code the prompt carries, in any shape.** Files are found by content
  (``findings.coverage``): bare, fenced, quoted, numbered in any common style, with or
  without a path header. A path without content shows nothing.
* **It reports what it can locate.** A true bug is reported only when one of its lines
  is in the prompt *in order with its neighbours* (the lines around it in the file sit on
  the same side of it in the prompt, close by): shuffled lines show nothing. A cross-file
  bug (``related`` in the ground truth) is reported only when its source line reached the
  same prompt too.
* **It follows the instruction** (``oracle_ask.py``). It audits when asked to, in any
  wording, and not when told not to ("do not check anything", "just say OK") or asked for
  something else ("summarise", "translate the comments", "count the lines"): then it
  answers what was asked (``oracle_reply.py``) with no finding (``off_task_rate``, 0 by
  default, is the share of normal findings an off-task prompt still gets).
* **It tires.** Past ``context_lines`` non-empty prompt lines (``dispatch.prompt_size``,
  the size the reward weighs coverage by), the chance of reporting a bug falls as
  ``(context_lines / lines) ** 2`` (``dispatch.prompt_attention``): a prompt holding a hundred
  files finds almost nothing (``docs/reward.md``, "Long prompts").
* **It errs like a worker.** Each located bug is missed with probability ``miss_rate``;
  false findings come at ``false_rate`` per 1,000 non-trivial lines shown, half of them on
  a decoy when one is shown, the rest preferably on lines that use a risky-looking API.
* **Its false findings look like its true ones.** Every finding, true or false, is written
  by the same function from its bug class: title, detail and fix drawn from per-class
  templates (with the flagged code quoted), kind and CWE drawn from the task's own kinds
  and CWEs for that class, severity from a per-class distribution. The ground truth's
  description and severity are never used, so no field tells a true finding from a false
  one (``benchmarks/bench_oracle_tells.py`` measures it).

Reported line numbers are the file's, shifted to the prompt's own numbering when the
line carries a number prefix (a worker cites what it sees).

Without a ``codebase`` only ``<file path="...">`` blocks are read, and trusted.

Randomness is drawn from an RNG seeded by a hash of (seed, path, lines shown, instruction)
(decision 6), so a given prompt always gets the same answer, whatever the call order or
concurrency.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypedDict, Unpack

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.findings.coverage import MIN_LINE_LENGTH
from deeprepo.findings.families import FamilyTable, default_families
from deeprepo.findings.grading import (
    DEFAULT_TOLERANCE,
    GroundTruthEntry,
    load_ground_truth,
    parse_ground_truth,
)
from deeprepo.rl.env.dispatch import DEFAULT_CONTEXT_LINES, attention, prompt_attention
from deeprepo.rl.env.oracle_ask import classify_instruction, read_request
from deeprepo.rl.env.oracle_read import PromptReader, ShownFile
from deeprepo.rl.env.oracle_reply import off_task_reply
from deeprepo.rl.env.oracle_text import (
    FALLBACK_FAMILIES,
    RenderedFinding,
    family_hint,
    render_finding,
)

__all__ = ["OracleWorker", "classify_instruction", "make_oracle"]

_DECOY_SHARE = 0.5  # share of false findings placed on a decoy when one is shown
# How much likelier a false finding of a class lands on a line whose API suggests that
# class, or another risky class, than on a plain line.
_HINT_WEIGHT = 20.0
_OTHER_HINT_WEIGHT = 5.0

#: Ground truth as callers hold it: parsed entries, raw JSON entries, or ``{"entries": ...}``.
GroundTruth = Iterable[Mapping[str, object] | GroundTruthEntry] | Mapping[str, object]


class OracleFinding(RenderedFinding):
    """One finding of the oracle's answer, as a worker writes it."""

    file: str
    line: int
    end_line: int


class OracleOptions(TypedDict, total=False):
    """The :class:`OracleWorker` settings :func:`make_oracle` passes on."""

    miss_rate: float
    false_rate: float
    seed: int
    codebase: Mapping[str, str] | None
    context_lines: int
    off_task_rate: float
    families: FamilyTable | None


class OracleWorker:
    """A :class:`~deeprepo.base.chat.ChatModel` answering from ground truth."""

    def __init__(
        self,
        ground_truth: GroundTruth,
        *,
        miss_rate: float = 0.1,
        false_rate: float = 0.1,
        seed: int = 0,
        codebase: Mapping[str, str] | None = None,
        context_lines: int = DEFAULT_CONTEXT_LINES,
        off_task_rate: float = 0.0,
        families: FamilyTable | None = None,
    ) -> None:
        if not 0.0 <= miss_rate <= 1.0:
            raise ValueError(f"miss_rate must be within [0, 1], got {miss_rate}")
        if false_rate < 0.0:
            raise ValueError(f"false_rate must be >= 0, got {false_rate}")
        if context_lines < 1:
            raise ValueError(f"context_lines must be >= 1, got {context_lines}")
        if not 0.0 <= off_task_rate <= 1.0:
            raise ValueError(f"off_task_rate must be within [0, 1], got {off_task_rate}")
        self.miss_rate = miss_rate
        self.false_rate = false_rate
        self.seed = seed
        self.context_lines = context_lines
        self.off_task_rate = off_task_rate
        self._families = families or default_families()
        entries = parse_ground_truth(
            ground_truth if isinstance(ground_truth, Mapping) else list(ground_truth)
        )
        self._bugs: dict[str, list[GroundTruthEntry]] = defaultdict(list)
        self._decoys: dict[str, list[GroundTruthEntry]] = defaultdict(list)
        for e in entries:
            (self._bugs if e.vulnerable else self._decoys)[e.file].append(e)
        for group in (*self._bugs.values(), *self._decoys.values()):
            group.sort(key=lambda e: (e.start_line, e.end_line, e.id))
        # The task's own vocabulary per bug class, used for true and false findings alike.
        self._kinds: dict[str, list[str]] = defaultdict(list)
        self._cwes: dict[str, list[str]] = defaultdict(list)
        self._bug_families: list[str] = []
        self._spans = [e.end_line - e.start_line for e in entries]
        for e in entries:
            fam = self._family(e)
            if e.kind:
                self._kinds[fam].append(e.kind)
            if e.cwe:
                self._cwes[fam].append(e.cwe)
            if e.vulnerable:
                self._bug_families.append(fam)
        self._reader = PromptReader(codebase or {})

    @property
    def name(self) -> str:
        return "oracle"

    async def complete(self, request: ChatRequest) -> Completion:
        prompt = request.last_user_text()
        return Completion(
            text=self.answer(prompt, request.system),
            usage=Usage(),
            model="oracle",
            finish_reason="stop",
        )

    async def aclose(self) -> None:
        return None

    def answer(self, prompt: str, system: str | None = None) -> str:
        """The worker's reply to one prompt: the findings JSON (``{"findings": [...]}``) when
        it asks for an audit, asks nothing (bare code) or an off-task draw found something,
        else what the prompt asked for ("OK", a summary, a line count, the function names)."""
        shown, instruction, _ = self._reader.read(prompt)
        request = read_request(instruction, system)
        found = self._findings(shown, instruction, self._attention(prompt), bool(request.audit))
        if request.audit is False and not found:
            return off_task_reply(request.kind, shown)
        return json.dumps({"findings": found})

    def findings(self, prompt: str, system: str | None = None) -> list[OracleFinding]:
        """Findings (worker dicts with ``file``) for the code the prompt shows."""
        shown, instruction, _ = self._reader.read(prompt)
        audit = classify_instruction(instruction, system)
        return self._findings(shown, instruction, self._attention(prompt), audit)

    def attention(self, size: int) -> float:
        """The chance a located bug in a prompt of ``size`` non-empty lines is reported (before
        ``miss_rate``), and the scale of false findings: 1 within ``context_lines``, then
        ``(context_lines / size) ** 2`` (``docs/reward.md``, "The oracle worker")."""
        return attention(size, self.context_lines)

    def _attention(self, prompt: str) -> float:
        """:meth:`attention` of ``prompt`` at the size the reward weighs it by."""
        return prompt_attention(prompt, self.context_lines)

    def _findings(
        self, shown: Mapping[str, ShownFile], instruction: str, attention: float, audit: bool
    ) -> list[OracleFinding]:
        if not shown:
            return []
        if not audit:
            attention *= self.off_task_rate
            if attention == 0.0:
                return []
        out: list[OracleFinding] = []
        for path in sorted(shown):
            view = shown[path]
            rng = self._rng(view, instruction, audit)
            out.extend(self._answer_view(view, shown, rng, attention))
        return out

    def _rng(self, view: ShownFile, instruction: str, audit: bool) -> random.Random:
        h = hashlib.sha256(f"{self.seed}\0{view.path}\0{audit}\0{instruction}\0".encode())
        text = view.text
        # One update of the joined lines: the same digest as one update a line, in C.
        h.update("".join([f"{n}\0{text[n]}\n" for n in sorted(text)]).encode())
        return random.Random(int.from_bytes(h.digest()[:8], "big"))

    # ------------------------------------------------------------------ the answer

    def _family(self, e: GroundTruthEntry) -> str:
        return self._families.label(e.cwe, e.kind)

    def _answer_view(
        self, view: ShownFile, shown: Mapping[str, ShownFile], rng: random.Random, attention: float
    ) -> list[OracleFinding]:
        out = []
        bugs = self._bugs.get(view.path, [])
        for e in bugs:
            hit = view.located(e.start_line, e.end_line)
            if hit is None:
                continue
            if any(
                (src := shown.get(f)) is None or src.located(max(1, n - 1), n + 1) is None
                for f, n in e.related
            ):
                continue  # a cross-file bug needs its source in the same prompt
            if rng.random() >= (1.0 - self.miss_rate) * attention:
                continue
            fam = self._family(e)
            out.append(self._render(view, fam, e.start_line, e.end_line, hit, rng))
        expected = self.false_rate * view.shown_nontrivial / 1000 * attention
        n_false = int(expected) + (rng.random() < expected - int(expected))
        for _ in range(n_false):
            false = self._false_finding(view, bugs, rng)
            if false is not None:
                out.append(false)
        return out

    def _render(
        self, view: ShownFile, fam: str, start: int, end: int, anchor: int, rng: random.Random
    ) -> OracleFinding:
        shift = view.cited(anchor) - anchor
        code = view.text.get(anchor, "")
        finding = render_finding(
            fam,
            code,
            rng,
            families=self._families,
            kinds=self._kinds.get(fam, ()),
            cwes=self._cwes.get(fam, ()),
        )
        return {"file": view.path, "line": start + shift, "end_line": end + shift, **finding}

    def _false_finding(
        self, view: ShownFile, bugs: Sequence[GroundTruthEntry], rng: random.Random
    ) -> OracleFinding | None:
        decoys = [
            (d, n)
            for d in self._decoys.get(view.path, [])
            if (n := view.located(d.start_line, d.end_line)) is not None
        ]
        if decoys and rng.random() < _DECOY_SHARE:
            d, n = rng.choice(decoys)
            return self._render(view, self._family(d), d.start_line, d.end_line, n, rng)
        # The class is drawn as the task's bugs are (so a class says nothing about truth),
        # the line among shown lines far from every true bug (so the finding is surely
        # false), preferring lines whose API suggests that class, as an LLM's eye would,
        # and the range as long as the task's ranges are.
        fam = rng.choice(self._bug_families or list(FALLBACK_FAMILIES))
        span = rng.choice(self._spans) if self._spans else 0
        far = [
            n
            for n, t in sorted(view.text.items())
            if len(t) >= MIN_LINE_LENGTH
            and all(_gap(n, b) > DEFAULT_TOLERANCE + span for b in bugs)
        ]
        if not far:
            return None
        hints = [family_hint(view.text[n]) for n in far]
        weights = [_HINT_WEIGHT if h == fam else _OTHER_HINT_WEIGHT if h else 1.0 for h in hints]
        line = rng.choices(far, weights)[0]
        return self._render(view, fam, line, line + span, line, rng)


def _gap(line: int, e: GroundTruthEntry) -> int:
    return max(0, e.start_line - line, line - e.end_line)


def make_oracle(
    ground_truth: GroundTruth | str | Path, **kwargs: Unpack[OracleOptions]
) -> OracleWorker:
    """Build an :class:`OracleWorker`; ``ground_truth`` may be a path to ``ground_truth.json``."""
    if isinstance(ground_truth, str | Path):
        return OracleWorker(load_ground_truth(Path(ground_truth)), **kwargs)
    return OracleWorker(ground_truth, **kwargs)
