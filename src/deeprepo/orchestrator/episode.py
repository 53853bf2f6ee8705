"""One episode of the RLM loop: root reply → code blocks → sandbox → output → next turn.

The same Episode runs ``deeprepo analyze``, every benchmark row and every RL
rollout. It owns the conversation and the stop logic; the kernel owns code
execution, the metered models own money and retries.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from deeprepo.architecture import architecture_of, architecture_summary
from deeprepo.base import prompts
from deeprepo.base.chat import ChatModel, ChatRequest, Message
from deeprepo.base.errors import BudgetExceeded, ProviderError, SandboxError
from deeprepo.base.finding import Finding, dedupe, finding_from_dict
from deeprepo.base.records import RunResult, StopReason, Turn
from deeprepo.codebase.model import Codebase
from deeprepo.findings.coverage import shown_in
from deeprepo.orchestrator.audit import (
    DEFAULT_AUDIT_SCOPES,
    DispatchStats,
    audit_set,
    audited_files,
    shortfall,
)
from deeprepo.orchestrator.behaviour import behaviour_of, turn_calls
from deeprepo.orchestrator.parser import extract_code_blocks
from deeprepo.orchestrator.salvage import salvage_report
from deeprepo.providers.dispatch import SubDispatcher
from deeprepo.providers.ledger import Ledger
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.kernel import ExecResult, Kernel
from deeprepo.sandbox.pool import KernelPool
from deeprepo.sandbox.protocol import cut_middle

EventSink = Callable[[str, dict[str, Any]], None]
_ERROR_RANK = {None: 0, "exception": 1, "syntax": 2, "timeout": 3, "crashed": 4, "killed": 4}
# CPython's default repr shows a memory address that changes from run to run; masked, the
# root's next request is the same on a rerun and is answered from the response cache.
_ADDRESS = re.compile(r"(?<= at )0x[0-9a-fA-F]{4,16}(?=>)")


@dataclass(frozen=True)
class EpisodeConfig:
    max_turns: int = 20
    prompt: str = "default"  # key of prompts.ROOT_SYSTEM_PROMPTS
    task: str | None = None  # replaces the default analysis instruction
    max_root_tokens: int = 8192
    temperature: float | None = None
    cache_root_prompt: bool = True
    countdown_from: int = 3  # show "N turns left" when this few remain
    timeout_s: float | None = None  # whole-episode wall clock
    audit_scopes: frozenset[str] = DEFAULT_AUDIT_SCOPES  # scopes whose files must be audited
    # Ctrl-C (a cancelled task) ends the episode as ``interrupted`` with what it has,
    # instead of propagating: ``analyze`` writes partial outputs from it.
    catch_interrupt: bool = False
    # What one turn may add to the conversation, which is resent in every later root request:
    # its output (None: 4x the sandbox's output limit, so a few blocks fit whole) and findings.
    max_turn_output_chars: int | None = None
    # A finding's fields are bounded (sandbox.results), about 1 KB in practice: 20,000 is
    # some 20 MB, and a cut is counted and makes the run incomplete, never silent.
    max_findings_per_turn: int = 20_000
    max_findings_per_run: int = 20_000


def metadata_summary(
    codebase: Codebase, audit_scopes: frozenset[str] = DEFAULT_AUDIT_SCOPES
) -> str:
    """The short overview the root sees in its first message."""
    md = codebase.metadata
    langs = ", ".join(f"{k} ({v})" for k, v in list(md.languages.items())[:8]) or "unknown"
    largest = ", ".join(f"{p} ({n:,} chars)" for p, n in md.largest_files[:5])
    # Tests and examples named main.py or with a __main__ guard are not where a program starts.
    entry_points = [p for p in md.entry_points if codebase.scope_of(p) == "source"]
    lines = [
        f"- root: {md.root}" + (f" @ {md.revision}" if md.revision else ""),
        f"- {md.files:,} files, {md.lines:,} lines, {md.chars:,} chars",
        f"- languages: {langs}",
        f"- largest: {largest}",
        f"- entry points: {', '.join(entry_points[:10]) or 'none found'}"
        + (f" (+{len(entry_points) - 10} more)" if len(entry_points) > 10 else ""),
    ]
    if md.skipped:
        lines.append(
            f"- skipped: {len(md.skipped)} files (binary, oversized, ignored); see metadata['skipped']"
        )
    if md.scopes:
        lines.append("- scopes: " + ", ".join(f"{k} ({v:,})" for k, v in md.scopes.items()))
    n_audit = len(audit_set(codebase.files, codebase.scopes, audit_scopes))
    lines.append(
        f"- to audit: {n_audit:,} files (scopes {', '.join(sorted(audit_scopes))}); "
        "the list is metadata['audit_files']"
    )
    lines.append(architecture_summary(architecture_of(codebase)))
    return "\n".join(lines)


class Episode:
    """Run one root conversation to an answer (or a stop) over one codebase."""

    def __init__(
        self,
        codebase: Codebase,
        *,
        root: ChatModel,
        dispatcher: SubDispatcher,
        ledger: Ledger,
        config: EpisodeConfig | None = None,
        sandbox: SandboxConfig | None = None,
        on_turn: Callable[[Turn], None] | None = None,
        on_event: EventSink | None = None,
        clock: Callable[[], float] = time.monotonic,
        replay: Sequence[Turn] = (),
        pool: KernelPool | None = None,
    ) -> None:
        """``replay``: turns a previous process completed (``--resume``). Their recorded
        replies are fed instead of calling the root and their code runs again to rebuild
        the kernel's state; ``on_turn`` is not called for them (they are on record)."""
        self.codebase = codebase
        self.root = root
        self.dispatcher = dispatcher
        self.ledger = ledger
        self.config = config or EpisodeConfig()
        self.sandbox_config = sandbox or SandboxConfig()
        self.on_turn = on_turn
        self.on_event = on_event or (lambda kind, data: None)
        self.clock = clock
        self._batch_sizes: list[int] = []
        self._replay = list(replay)
        self.pool = pool  # pre-started kernels: many short episodes (RL rollouts) start faster
        self.replay_mismatches: list[int] = []  # replayed turns whose output came out different
        self.findings_cut = 0  # findings recorded but dropped by a cap, over the run
        if self.config.prompt not in prompts.ROOT_SYSTEM_PROMPTS:
            raise ValueError(f"unknown prompt {self.config.prompt!r}")
        #: The files this run must audit (``orchestrator.audit``); also ``metadata['audit_files']``.
        self.audit_paths = audit_set(codebase.files, codebase.scopes, self.config.audit_scopes)

    def _payload(self) -> dict[str, Any]:
        payload = self.codebase.payload()
        payload["metadata"] = {
            **payload["metadata"],
            "audit_files": self.audit_paths,
            "audit_scopes": sorted(self.config.audit_scopes),
            # How the root should plan its worker calls: a local llama.cpp worker answers one
            # prompt at a time, so an llm_batch of 100 prompts takes 100 answers' time.
            "workers": {
                "model": self.dispatcher.model.name,
                "parallel": getattr(self.dispatcher.model, "concurrency", None),
            },
            "architecture": architecture_of(self.codebase).to_dict(limit=200),
        }
        return payload

    async def _llm_handler(self, batch: list[str], system: str | None) -> list[str]:
        self._batch_sizes.append(len(batch))
        results = await self.dispatcher.batch(batch, system)
        self.on_event("sub_calls", {"count": self.dispatcher.calls})
        return results

    def opening(self) -> tuple[str, str]:
        """``(system prompt, first user message)`` the root is sent on its first turn.

        Recorded with the run (trajectory ``start``, rollout results) so that a trajectory
        can be turned back into the exact conversation (``deeprepo export sft``)."""
        system = prompts.ROOT_SYSTEM_PROMPTS[self.config.prompt]
        first = prompts.first_user_message(
            metadata_summary(self.codebase, self.config.audit_scopes), self.config.task
        )
        return system, first

    async def run(self) -> RunResult:
        started = self.clock()
        system, first = self.opening()
        messages: list[Message] = [Message("user", first)]
        turns: list[Turn] = []
        findings: list[Finding] = []
        answer: dict[str, Any] = {"content": "", "ready": False}
        stop_reason: StopReason = "max_turns"
        stop_detail = ""
        kernel = await Kernel.start(
            self._payload(),
            self._llm_handler,
            self.sandbox_config,
            pool=self.pool,
            capacity=self.dispatcher.sub_calls_left,
        )
        try:
            index = 0
            final_turn = False
            while True:
                if index >= self.config.max_turns:
                    if final_turn:
                        break
                    # One last chance to submit, as DESIGN §3 promises.
                    final_turn = True
                    last = messages.pop()
                    messages.append(
                        Message("user", last.content + "\n\n" + prompts.FINAL_TURN_NOTE)
                    )
                if (
                    self.config.timeout_s is not None
                    and self.clock() - started >= self.config.timeout_s
                ):
                    stop_reason, stop_detail = (
                        "timeout",
                        f"episode ran past {self.config.timeout_s:g}s",
                    )
                    break
                index += 1
                self.on_event("turn_start", {"turn": index, "max_turns": self.config.max_turns})
                try:
                    turn, answer, new = await self._turn(
                        kernel, system, messages, index, final_turn, len(findings)
                    )
                except BudgetExceeded as exc:
                    stop_reason = "timeout" if exc.kind == "timeout" else "budget"
                    stop_detail = str(exc)
                    break
                except ProviderError as exc:
                    stop_reason, stop_detail = "error", f"root model failed: {exc}"
                    break
                except asyncio.CancelledError:
                    if not self.config.catch_interrupt:
                        raise
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()  # handled: later awaits (closing the kernel) must run
                    stop_reason, stop_detail = (
                        "interrupted",
                        "interrupted by the user (Ctrl-C or SIGTERM)",
                    )
                    break
                turns.append(turn)
                findings.extend(new)
                if index <= len(self._replay):
                    self.on_event("turn_replayed", {"turn": index})
                elif self.on_turn is not None:
                    self.on_turn(turn)
                self.on_event(
                    "turn_end",
                    {"turn": index, "findings": len(findings), "sub_calls": self.dispatcher.calls},
                )
                if answer.get("ready"):
                    stop_reason = "answer_ready"
                    break
                if final_turn:
                    break
        except SandboxError as exc:
            stop_reason, stop_detail = "error", f"sandbox failed: {exc}"
        finally:
            await kernel.close()

        findings = dedupe(findings)
        content = str(answer.get("content") or "")
        incomplete = not (answer.get("ready") and content.strip())
        if stop_reason == "max_turns" and not stop_detail:
            stop_detail = f"no answer after {self.config.max_turns} turns and the final turn"
        if incomplete:
            content = salvage_report(findings, stop_reason, stop_detail, partial=content)
        sent = list(self.dispatcher.sent_prompts)
        shown = shown_in(sent)  # one pass over the prompts for coverage and behaviour
        audited = audited_files(self.codebase.files, sent, self.audit_paths, shown=shown)
        unaudited = sorted(set(self.audit_paths) - set(audited))
        d = self.dispatcher
        stats = DispatchStats(
            answered=d.calls,
            refused=d.refused,
            failed=d.failed,
            budget_kind=d.last_budget_error.kind if d.last_budget_error else None,
            first_error=d.first_error,
        )
        return RunResult(
            answer=content,
            incomplete=incomplete,
            stop_reason=stop_reason,
            stop_detail=stop_detail,
            findings=findings,
            turns=turns,
            sub_calls=self.dispatcher.calls,
            files_covered=audited,
            coverable_files=len(self.audit_paths),
            usage=[row.to_dict() for row in self.ledger.rows()],
            total_cost_usd=self.ledger.total_cost(),
            wall_seconds=self.clock() - started,
            root_model=self.root.name,
            sub_model=self.dispatcher.model.name,
            sandbox_mode=kernel.mode,
            sent_prompts=sent,
            batch_sizes=list(self._batch_sizes),
            unaudited=unaudited,
            audit_scopes=sorted(self.config.audit_scopes),
            sub_calls_refused=d.refused,
            sub_calls_failed=d.failed,
            incomplete_reason=shortfall(
                unaudited=len(unaudited),
                answered=not incomplete,
                stop_reason=stop_reason,
                stop_detail=stop_detail,
                stats=stats,
                findings_cut=self.findings_cut,
                max_turns=self.config.max_turns if len(turns) > self.config.max_turns else None,
            ),
            findings_cut=self.findings_cut,
            system_prompt=system,
            first_message=first,
            behaviour=behaviour_of(
                [turn_calls(t) for t in turns],
                files=self.codebase.files,
                sent_prompts=sent,
                sent_lines=set(shown.lines),
            ),
        )

    async def _turn(
        self,
        kernel: Kernel,
        system: str,
        messages: list[Message],
        index: int,
        final_turn: bool,
        findings_so_far: int = 0,
    ) -> tuple[Turn, dict[str, Any], list[Finding]]:
        t0 = self.clock()
        before = self._root_totals()
        request = ChatRequest(
            tuple(messages),
            system=system,
            max_tokens=self.config.max_root_tokens,
            temperature=self.config.temperature,
            cache_prompt=self.config.cache_root_prompt,
        )
        prior = self._replay[index - 1] if index <= len(self._replay) else None
        if prior is not None:
            reply = prior.reply  # the root already answered this turn in the resumed run
        else:
            completion = await self.root.complete(request)
            reply = completion.text
        messages.append(Message("assistant", reply))
        blocks = extract_code_blocks(reply)
        new_findings: list[Finding] = []
        outputs: list[str] = []
        worst: str | None = None
        sub_calls = 0
        query_calls = 0
        batch_sizes: list[int] = []
        answer: dict[str, Any] = {"content": "", "ready": False}
        if not blocks:
            outputs.append(prompts.NO_CODE_NOTE)
        for n, code in enumerate(blocks, 1):
            result = await kernel.exec(code)
            sub_calls += result.llm_calls
            query_calls += sum(1 for c in result.calls if c.api == "query")
            batch_sizes += [c.size for c in result.calls if c.api == "batch"]
            answer = result.answer
            self.findings_cut += result.findings_cut
            # An unknown error ranks as an exception both ways: as the worst so far it ranked
            # 0, so a later plain exception replaced it.
            if _ERROR_RANK.get(result.error, 1) > _ERROR_RANK.get(worst, 1):
                worst = result.error
            header = f"[block {n} of {len(blocks)}]\n" if len(blocks) > 1 else ""
            outputs.append(header + self._render_output(result))
            for raw in result.new_findings:
                finding = self._to_finding(raw)
                if finding is not None:
                    new_findings.append(finding)
        room = self.config.max_findings_per_run - findings_so_far
        room = max(0, min(self.config.max_findings_per_turn, room))
        if len(new_findings) > room:
            outputs.append(
                f"[deeprepo] {len(new_findings) - room:,} of the {len(new_findings):,} findings "
                f"recorded this turn were dropped: a run keeps at most "
                f"{self.config.max_findings_per_turn:,} a turn and "
                f"{self.config.max_findings_per_run:,} in all. Record fewer, merged findings."
            )
            self.findings_cut += len(new_findings) - room
            new_findings = new_findings[:room]
        limit = self.config.max_turn_output_chars or 4 * self.sandbox_config.output_limit
        output = cut_middle("\n".join(outputs).strip(), limit) or "[no output]"
        turns_left = self.config.max_turns - index
        if (
            not answer.get("ready")
            and not final_turn
            and 0 < turns_left <= self.config.countdown_from
        ):
            output += "\n" + prompts.turn_countdown(turns_left)
        if prior is not None:
            # The conversation goes on from what the root was shown, even where the
            # rerun printed something else (time, randomness): the record wins.
            if output != prior.output:
                self.replay_mismatches.append(index)
            messages.append(Message("user", prior.output))
            # Records from before behaviour metrics lack the call counts the rerun just made.
            prior = replace(prior, llm_query_calls=query_calls, llm_batch_sizes=batch_sizes)
            return prior, answer, new_findings
        messages.append(Message("user", output))
        after = self._root_totals()
        turn = Turn(
            index=index,
            reply=reply,
            code_blocks=blocks,
            output=output,
            error=worst,
            sub_calls=sub_calls,
            findings_added=len(new_findings),
            answer_ready=bool(answer.get("ready")),
            input_tokens=after[0] - before[0],
            output_tokens=after[1] - before[1],
            cache_read_tokens=after[2] - before[2],
            cache_write_tokens=after[3] - before[3],
            cost_usd=None if after[4] is None or before[4] is None else after[4] - before[4],
            seconds=self.clock() - t0,
            final_turn=final_turn,
            llm_query_calls=query_calls,
            llm_batch_sizes=batch_sizes,
        )
        return turn, answer, new_findings

    def _render_output(self, result: ExecResult) -> str:
        # The kernel's output already carries its own notes (restored names, restarts).
        return _ADDRESS.sub("0x…", result.output.rstrip()) or "[no output]"

    def _to_finding(self, raw: dict[str, Any]) -> Finding | None:
        try:
            finding = finding_from_dict(raw)
        except ValueError:
            return None
        return replace(finding, scope=self.codebase.scope_of(finding.file))

    def _root_totals(self) -> tuple[int, int, int, int, float | None]:
        inp = out = cr = cw = 0
        cost: float | None = 0.0
        for row in self.ledger.rows():
            if row.role != "root":
                continue
            inp += row.usage.input_tokens
            out += row.usage.output_tokens
            cr += row.usage.cache_read_tokens
            cw += row.usage.cache_write_tokens
            cost = None if cost is None or row.cost_usd is None else cost + row.cost_usd
        return inp, out, cr, cw, cost
