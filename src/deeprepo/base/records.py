"""Records of one episode: each turn, and the run's result."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple

from deeprepo.base.chat import UsageRowDict
from deeprepo.base.finding import Baseline, Finding, SetAside

#: The one-word label of how a root worked (rules in ``orchestrator/behaviour.py``).
Label = Literal["no-delegation", "self-analysis", "mixed", "batch-delegation", "over-exploration"]
LABELS: tuple[Label, ...] = (
    "no-delegation",
    "over-exploration",
    "self-analysis",
    "batch-delegation",
    "mixed",
)


@dataclass(frozen=True)
class Behaviour:
    """The ``behaviour`` object of metrics.json and of every results.jsonl row."""

    label: str
    llm_query_calls: int
    llm_batch_calls: int
    batch_sizes: list[int] = field(default_factory=list)
    files_read_by_root: int = 0
    files_sent_to_workers: int = 0
    turns_with_sub_calls: int = 0
    answer_turn: int | None = None
    exploration_turns: int = 0
    sub_prompts: int = 0  # prompts asked of workers: query calls plus every batch's size
    batched_share: float | None = None  # share of sub_prompts in batches of two or more

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Behaviour:
        """Parse a ``behaviour`` object (raises ``ValueError`` on a wrong type)."""
        try:
            answer = d.get("answer_turn")
            share = d.get("batched_share")
            return cls(
                label=str(d["label"]),
                llm_query_calls=int(d.get("llm_query_calls") or 0),
                llm_batch_calls=int(d.get("llm_batch_calls") or 0),
                batch_sizes=[int(n) for n in d.get("batch_sizes") or []],
                files_read_by_root=int(d.get("files_read_by_root") or 0),
                files_sent_to_workers=int(d.get("files_sent_to_workers") or 0),
                turns_with_sub_calls=int(d.get("turns_with_sub_calls") or 0),
                answer_turn=None if answer is None else int(answer),
                exploration_turns=int(d.get("exploration_turns") or 0),
                sub_prompts=int(d.get("sub_prompts") or 0),
                batched_share=None if share is None else float(share),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad behaviour object ({e})") from None


StopReason = Literal["answer_ready", "max_turns", "budget", "timeout", "error", "interrupted"]
STOP_REASONS: tuple[StopReason, ...] = (
    "answer_ready",
    "max_turns",
    "budget",
    "timeout",
    "error",
    "interrupted",
)


@dataclass(frozen=True)
class Turn:
    """One root turn: what the root wrote, what ran, and what it was shown next."""

    index: int  # 1-based
    reply: str
    code_blocks: list[str]
    output: str  # the message the root received after this turn
    error: str | None  # worst kernel error of the turn: syntax, exception, timeout, crashed
    sub_calls: int  # sub-LLM prompts requested during this turn
    findings_added: int
    answer_ready: bool
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None
    seconds: float
    final_turn: bool = False  # the extra turn given at max_turns to submit an answer
    llm_query_calls: int = 0  # llm_query calls the turn's code made
    llm_batch_sizes: list[int] = field(default_factory=list)  # prompts per llm_batch call

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RootTokens(NamedTuple):
    """What the root read and wrote over a run: the one definition the reward and the
    results records share. ``input`` is every prompt token it was billed for: fresh,
    read from the cache and written to it (a cached prompt is still a prompt the root
    was sent); ``output`` the tokens it wrote."""

    input: int
    output: int

    @property
    def total(self) -> int:
        return self.input + self.output

    @classmethod
    def of(cls, turns: Iterable[Turn]) -> RootTokens:
        """The sums over ``turns``."""
        turns = list(turns)
        return cls(
            input=sum(t.input_tokens + t.cache_read_tokens + t.cache_write_tokens for t in turns),
            output=sum(t.output_tokens for t in turns),
        )


@dataclass(frozen=True)
class NotAnalysed:
    """A file an analyzer that applies to it could not read (it did not parse, the
    analyzer failed on it or is not installed): the file is not audited, the run is
    incomplete. ``tool`` is the analyzer (``bandit``, ``semgrep``); ``reason`` says why."""

    path: str
    tool: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class RunResult:
    """Everything an Episode produced; reports and rewards are computed from it.

    ``incomplete`` is narrow: the root never set its answer (the report was salvaged).
    Whether the *run* is complete (answer set and every file of the audit set audited)
    is :attr:`complete`; :attr:`incomplete_reason` says why not (``orchestrator.audit``).
    """

    answer: str
    incomplete: bool
    stop_reason: StopReason
    stop_detail: str
    findings: list[Finding]
    turns: list[Turn]
    sub_calls: int  # worker prompts answered (by a model or the cache); refused ones are not calls
    files_covered: list[str]  # files of the audit set audited by answered worker prompts
    coverable_files: int  # files in the audit set
    usage: list[UsageRowDict]  # one entry per (role, model), see docs/outputs.md
    total_cost_usd: float | None
    wall_seconds: float
    root_model: str
    sub_model: str
    sandbox_mode: str
    sent_prompts: list[str] = field(default_factory=list, repr=False)
    batch_sizes: list[int] = field(default_factory=list)  # prompts per llm_query/llm_batch request
    notes: list[str] = field(default_factory=list)  # for the reader: files left out, fallbacks
    unaudited: list[str] = field(default_factory=list)  # audit-set files no answered prompt held
    audit_scopes: list[str] = field(default_factory=list)  # scopes in the audit set
    sub_calls_refused: int = 0  # worker prompts refused by a budget (never sent)
    sub_calls_failed: int = 0  # worker calls that failed for good
    incomplete_reason: str = ""  # why the run is incomplete, with the option to change
    # What the root was sent first (``Episode.opening``): a trajectory's turns replayed on
    # these give the exact conversation (``deeprepo export sft``).
    system_prompt: str = field(default="", repr=False)
    first_message: str = field(default="", repr=False)
    behaviour: Behaviour | None = None  # how the root worked (orchestrator.behaviour)
    # Audit-set files an analyzer could not read; they are not in ``files_covered``.
    not_analysed: list[NotAnalysed] = field(default_factory=list)
    findings_cut: int = 0  # findings recorded but dropped by a cap (a cell, a turn, the run)
    python_parser: str = ""  # the interpreter whose grammar the Python analyzers parsed with
    #: Findings suppressed in the source or already in the baseline: out of ``findings`` and
    #: the gate, still counted in every output (``run/setaside.py``).
    set_aside: list[SetAside] = field(default_factory=list)
    baseline: Baseline | None = None  # what the findings were compared with, if anything

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def root_tokens(self) -> RootTokens:
        """The root's tokens over every turn (:class:`RootTokens`)."""
        return RootTokens.of(self.turns)

    @property
    def complete(self) -> bool:
        """The root set its answer, every file of the audit set was audited (sent to a
        worker and read by every analyzer that applies), and no finding was cut."""
        return (
            not self.incomplete
            and not self.unaudited
            and not self.not_analysed
            and not self.findings_cut
            and self.stop_reason != "interrupted"
        )
