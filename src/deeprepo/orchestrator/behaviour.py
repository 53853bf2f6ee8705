"""How the root worked, from counts: the behaviour metrics and their one-word label.

The seed's behavioural-gap table described each model's delegation by hand ("prefers
self-analysis", "mixed", "consistent delegation via llm_batch", "over-exploration"). This
module computes the same distinction from what every run records, so it can be compared
across runs and models. The counts:

- ``llm_query_calls`` / ``llm_batch_calls``: calls the root's code made (a large batch that
  travels in several requests is one call); ``batch_sizes``: prompts per ``llm_batch`` call.
- ``files_read_by_root``: files whose content the root was shown, in its REPL output;
  ``files_sent_to_workers``: files whose content was in answered worker prompts. Both use
  one rule, :meth:`ShownIndex.shown`, so the two numbers compare like with like.
- ``turns_with_sub_calls``: turns whose code asked workers for anything (refused prompts
  included); ``exploration_turns``: the other turns before the answer turn;
  ``answer_turn``: the turn whose code set the answer (None: never).

The label is the first rule that holds, in this order (docs/decisions.md gives the reasons):

1. ``no-delegation``: no prompt was asked of a worker.
2. ``over-exploration``: at least :data:`OVER_EXPLORATION_TURNS` exploration turns, and at
   least twice as many as turns with sub-LLM work.
3. ``self-analysis``: the root was shown at least as many files as the workers were
   (and at least one).
4. ``batch-delegation``: at least :data:`BATCH_SHARE` of the prompts went in ``llm_batch``
   calls of two or more, and the root read at most :data:`ROOT_READ_SHARE` as many files
   as it sent to workers.
5. ``mixed``: anything else (delegation alongside reading, or ``llm_query`` one by one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Protocol

from deeprepo.base.records import Behaviour, Label
from deeprepo.findings.coverage import nontrivial_lines, prompt_lines

__all__ = [
    "BATCH_SHARE",
    "OVER_EXPLORATION_TURNS",
    "ROOT_READ_SHARE",
    "SHOWN_LINES",
    "ShownIndex",
    "TurnCalls",
    "behaviour_of",
    "label_of",
    "turn_calls",
]

#: Exploration turns (no sub-LLM work, before the answer) from which a run over-explores: a
#: delegating workflow needs at most four (orient, plan, review the workers' answers,
#: synthesise), plus two for a retry or a SyntaxError.
OVER_EXPLORATION_TURNS = 6
#: Share of the prompts that must go in real batches (two or more) for ``batch-delegation``.
BATCH_SHARE = 0.75
#: Files the root may read itself, as a share of the files it sent to workers, and still be
#: ``batch-delegation`` (the other side of the same three-to-one majority).
ROOT_READ_SHARE = 0.25
#: Distinctive lines of a file that must be shown for it to count as read (else every one of
#: its non-trivial lines): a quoted line in a finding or a grep hit or two is not reading it.
SHOWN_LINES = 5


@dataclass(frozen=True)
class TurnCalls:
    """What one turn's code asked of workers and showed the root."""

    index: int
    output: str  # what the root was shown after the turn
    query_calls: int = 0
    batch_sizes: tuple[int, ...] = ()
    answer_ready: bool = False

    @property
    def sub_prompts(self) -> int:
        return self.query_calls + sum(self.batch_sizes)


class _TurnLike(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def output(self) -> str: ...
    @property
    def llm_query_calls(self) -> int: ...
    @property
    def llm_batch_sizes(self) -> list[int]: ...
    @property
    def answer_ready(self) -> bool: ...


def turn_calls(turn: _TurnLike) -> TurnCalls:
    """The part of a recorded turn (``records.Turn``) the behaviour is computed from."""
    return TurnCalls(
        index=turn.index,
        output=turn.output,
        query_calls=turn.llm_query_calls,
        batch_sizes=tuple(turn.llm_batch_sizes),
        answer_ready=turn.answer_ready,
    )


class ShownIndex:
    """Each file's non-trivial lines (``findings.coverage``), built once per run, and the
    rule that says which files a text shows."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self._lines: dict[str, frozenset[str]] = {}
        for path, text in files.items():
            lines = nontrivial_lines(text)
            if lines:  # else nothing of substance to read (empty, or only short lines)
                self._lines[path] = lines

    def shown(self, texts: Iterable[str], min_lines: int = SHOWN_LINES) -> set[str]:
        """Files of which ``texts`` show at least ``min_lines`` *distinctive* lines (lines of
        that file that no other file has, so a licence header or a common import printed
        once does not count as reading every file that has it), or every non-trivial line.
        Lines count bare, numbered or quoted in any common style
        (``findings.coverage.prompt_lines``)."""
        return self.shown_by_lines(prompt_lines(texts), min_lines)

    def shown_by_lines(self, lines: set[str], min_lines: int = SHOWN_LINES) -> set[str]:
        """:meth:`shown` for the ``prompt_lines`` of the texts."""
        if not lines:
            return set()
        hits = {path: hit for path, own in self._lines.items() if (hit := own & lines)}
        # A shown line that several files hold is in each of their hits: counting over the
        # hits alone finds every shared one.
        counts = Counter(chain.from_iterable(hits.values()))
        shared = {ln for ln, n in counts.items() if n > 1}
        return {
            path
            for path, hit in hits.items()
            if len(hit - shared if shared else hit) >= min_lines or hit == self._lines[path]
        }


def label_of(
    *,
    sub_prompts: int,
    batched_prompts: int,
    files_read_by_root: int,
    files_sent_to_workers: int,
    exploration_turns: int,
    turns_with_sub_calls: int,
) -> Label:
    """The behaviour label from the counts (rules in the module docstring)."""
    if sub_prompts == 0:
        return "no-delegation"
    if (
        exploration_turns >= OVER_EXPLORATION_TURNS
        and exploration_turns >= 2 * turns_with_sub_calls
    ):
        return "over-exploration"
    if files_read_by_root >= 1 and files_read_by_root >= files_sent_to_workers:
        return "self-analysis"
    if (
        batched_prompts >= BATCH_SHARE * sub_prompts
        and files_read_by_root <= ROOT_READ_SHARE * files_sent_to_workers
    ):
        return "batch-delegation"
    return "mixed"


def behaviour_of(
    turns: Sequence[TurnCalls],
    *,
    files: Mapping[str, str],
    sent_prompts: Sequence[str],
    root_read: set[str] | None = None,
    sent_lines: set[str] | None = None,
) -> Behaviour:
    """The behaviour of one run. ``root_read`` replaces what the turns' outputs show (a
    baseline's model reads the files its one prompt carried); ``sent_lines`` are the
    ``prompt_lines`` of ``sent_prompts`` when the caller has them (the episode's coverage)."""
    index = ShownIndex(files)
    read = root_read if root_read is not None else index.shown(t.output for t in turns)
    sent = index.shown_by_lines(prompt_lines(sent_prompts) if sent_lines is None else sent_lines)
    answer_turn = next((t.index for t in turns if t.answer_ready), None)
    busy = [t for t in turns if t.sub_prompts > 0]
    exploring = [
        t for t in turns if t.sub_prompts == 0 and (answer_turn is None or t.index < answer_turn)
    ]
    sizes = [n for t in turns for n in t.batch_sizes]
    queries = sum(t.query_calls for t in turns)
    prompts = queries + sum(sizes)
    batched = sum(n for n in sizes if n >= 2)
    return Behaviour(
        label=label_of(
            sub_prompts=prompts,
            batched_prompts=batched,
            files_read_by_root=len(read),
            files_sent_to_workers=len(sent),
            exploration_turns=len(exploring),
            turns_with_sub_calls=len(busy),
        ),
        llm_query_calls=queries,
        llm_batch_calls=len(sizes),
        batch_sizes=sizes,
        files_read_by_root=len(read),
        files_sent_to_workers=len(sent),
        turns_with_sub_calls=len(busy),
        answer_turn=answer_turn,
        exploration_turns=len(exploring),
        sub_prompts=prompts,
        batched_share=round(batched / prompts, 4) if prompts else None,
    )
