"""The turns, in order, each with the root's reply, the code it ran, the REPL output and
its sub-calls (prompt, response, tokens, cost, latency), collapsible with ``<details>``."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from deeprepo.report.viewer.bounded import hidden_of
from deeprepo.report.viewer.markup import Cuts, Limits, h, money, pre, whole
from deeprepo.report.viewer.runview import CallRecord, RunView, num, opt_num, text

__all__ = ["turns_section"]


def _call_line(c: CallRecord) -> str:
    parts = [
        f"#{c.seq}",
        h(c.model),
        f"{c.usage.input_tokens:,} in / {c.usage.output_tokens:,} out"
        + (f" / {c.usage.cache_read_tokens:,} cache read" if c.usage.cache_read_tokens else "")
        + (f" / {c.usage.cache_write_tokens:,} cache write" if c.usage.cache_write_tokens else ""),
        escape(money(c.cost_usd)),
        f"{c.latency_s:.2f} s",
        f"at {c.t:.1f} s",
    ]
    if c.cached:
        parts.append("cached")
    if c.error:
        parts.append(f'<b class="sev-high">failed: {h(c.error[:200])}</b>')
    return " · ".join(parts)


class _CallText:
    """Hands out the sub-call text budget in call order. A system prompt that several calls
    share is listed once above the turns (``S1``, ``S2`` …), not in each call."""

    def __init__(self, subs: list[CallRecord], limits: Limits, cuts: Cuts) -> None:
        per = limits.call_text_budget // max(1, 2 * len(subs))
        self.field = max(limits.call_field_min, min(limits.call_field_max, per))
        self.left = limits.call_text_budget
        cuts.call_field_limit = self.field
        uses: dict[str, int] = {}
        #: Characters of each system prompt the reader did not load (see CallRecord.hidden).
        self.system_hidden: dict[str, int] = {}
        for c in subs:
            if c.system:
                uses[c.system] = uses.get(c.system, 0) + 1
                self.system_hidden.setdefault(c.system, c.hidden[0])
        self.uses = {s: n for s, n in uses.items() if n > 1}
        self.shared = {s: i for i, s in enumerate(self.uses, 1)}

    def take(self, c: CallRecord) -> bool:
        want = sum(
            min(len(t), self.field)
            for t in (c.prompt, c.response or "", "" if c.system in self.shared else c.system)
        )
        if want > self.left:
            return False
        self.left -= want
        return True


def _shared_systems(budget: _CallText, limits: Limits, cuts: Cuts) -> list[str]:
    if not budget.shared:
        return []
    out = [f"<details><summary>System prompts shared by sub-calls ({len(budget.shared)})</summary>"]
    for system, n in budget.shared.items():
        out += [
            f'<h4 id="system-{n}">S{n}: used by {budget.uses[system]:,} sub-calls</h4>',
            pre(system, limits.turn_field, cuts, "calls.jsonl", "", budget.system_hidden[system]),
        ]
    return [*out, "</details>"]


def _call(c: CallRecord, budget: _CallText, cuts: Cuts) -> str:
    failed = " failed" if c.error else ""
    head = f'<details class="call{failed}" id="call-{c.seq}"><summary>{_call_line(c)}</summary>'
    if not budget.take(c):
        cuts.calls_without_text += 1
        return (
            head + '<p class="cut">Text not shown: the page\'s text budget is spent '
            "(see calls.jsonl).</p></details>"
        )
    where = f"calls.jsonl (seq {c.seq})"
    out = [head]
    if c.system in budget.shared:
        out.append(
            f'<p class="muted">System prompt: S{budget.shared[c.system]} (listed above the turns)</p>'
        )
    elif c.system:
        out += ["<h4>System</h4>", pre(c.system, budget.field, cuts, where, "", c.hidden[0])]
    out += ["<h4>Prompt</h4>", pre(c.prompt, budget.field, cuts, where, "", c.hidden[1])]
    if c.response is not None:
        out += [
            "<h4>Response</h4>",
            pre(c.response, budget.field, cuts, where, "out", c.hidden[2]),
        ]
    else:
        out.append('<p class="muted">No response.</p>')
    if c.error:
        out += ["<h4>Error</h4>", pre(c.error, budget.field, cuts, where, "err", c.hidden[3])]
    facts = [f"finish reason: {h(c.finish_reason)}"] if c.finish_reason else []
    if c.truncated:
        facts.append("prompt or response was cut to 32 KiB when recorded")
    if facts:
        out.append(f'<p class="muted">{"; ".join(facts)}</p>')
    return "".join(out) + "</details>"


def _turn(
    index: int,
    turn: dict[str, Any] | None,
    calls: list[CallRecord],
    ctx: _TurnContext,
) -> list[str]:
    subs = [c for c in calls if c.role != "root"]
    roots = [c for c in calls if c.role == "root"]
    bits = [f"Turn {index}"]
    if turn is None:
        bits.append("not recorded: the run ended during this turn")
    else:
        bits += [
            f"{whole(turn.get('input_tokens'))} in / {whole(turn.get('output_tokens'))} out tokens",
            escape(money(opt_num(turn.get("cost_usd")))),
            f"{num(turn.get('seconds')):.2f} s",
            f"{whole(turn.get('sub_calls'))} sub-call(s)",
        ]
        if num(turn.get("findings_added")):
            bits.append(f"+{whole(turn.get('findings_added'))} finding(s)")
        if turn.get("answer_ready") is True:
            bits.append("answer set")
        if turn.get("final_turn") is True:
            bits.append("final submit turn")
        if turn.get("error"):
            bits.append(f'<span class="sev-high">error: {h(turn.get("error"))}</span>')
    is_open = " open" if ctx.open_turns else ""
    out = [
        f'<details class="turn" id="turn-{index}"{is_open}><summary>{" · ".join(bits)}</summary>'
    ]
    where = f"trajectory.jsonl (turn {index})"
    if turn is not None:
        out += [
            "<h4>Root reply</h4>",
            pre(
                text(turn.get("reply")),
                ctx.limits.turn_field,
                ctx.cuts,
                where,
                "",
                hidden_of(turn, "reply"),
            ),
        ]
        blocks = turn.get("code_blocks")
        if isinstance(blocks, list) and blocks:
            out.append(f"<details><summary>Code run: {len(blocks)} block(s)</summary>")
            out += [
                pre(
                    text(b),
                    ctx.limits.turn_field,
                    ctx.cuts,
                    where,
                    "",
                    hidden_of(turn, "code_blocks", i),
                )
                for i, b in enumerate(blocks)
            ]
            if more := hidden_of(turn, "code_blocks_left_out"):
                out.append(
                    f'<p class="cut">{more:,} more code blocks not shown (see {escape(where)}).</p>'
                )
            out.append("</details>")
        out += [
            "<h4>REPL output (what the root was shown next)</h4>",
            pre(
                text(turn.get("output")),
                ctx.limits.turn_field,
                ctx.cuts,
                where,
                "out",
                hidden_of(turn, "output"),
            ),
        ]
    for c in roots:
        out.append(f'<p class="muted" id="call-{c.seq}">Root call: {_call_line(c)}</p>')
    if subs:
        cost = sum(c.cost_usd or 0.0 for c in subs)
        unknown = sum(c.cost_usd is None for c in subs)
        failed = sum(bool(c.error) for c in subs)
        listed = subs[: max(0, ctx.limits.call_rows - ctx.listed)]
        ctx.listed += len(listed)
        ctx.cuts.calls_not_listed += len(subs) - len(listed)
        out.append(
            f'<details class="subcalls"><summary>{len(subs):,} sub-call(s) · '
            f"{sum(c.usage.input_tokens for c in subs):,} in / {sum(c.usage.output_tokens for c in subs):,} "
            f"out tokens · ${cost:.4f}"
            + (f" + {unknown} unknown" if unknown else "")
            + (f" · {failed} failed" if failed else "")
            + "</summary>"
        )
        out += [_call(c, ctx.budget, ctx.cuts) for c in listed]
        if len(listed) < len(subs):
            out.append(
                f'<p class="cut">{len(subs) - len(listed):,} more sub-calls not listed (the page '
                f"lists {ctx.limits.call_rows:,} at most; all are in calls.jsonl).</p>"
            )
        out.append("</details>")
    elif turn is not None and ctx.has_calls and num(turn.get("sub_calls")):
        out.append('<p class="muted">No sub-call of this turn is in calls.jsonl.</p>')
    return [*out, "</details>"]


@dataclass
class _TurnContext:
    limits: Limits
    cuts: Cuts
    budget: _CallText
    open_turns: bool
    has_calls: bool
    listed: int = 0


def turns_section(view: RunView, limits: Limits, cuts: Cuts) -> list[str]:
    by_turn = view.calls_by_turn()
    subs = [c for c in view.calls or [] if c.role != "root"]
    budget = _CallText(subs, limits, cuts)
    ctx = _TurnContext(limits, cuts, budget, len(view.turns) <= 12, view.calls is not None)
    out = ['<section id="turns"><h2>Turns</h2>', *_shared_systems(budget, limits, cuts)]
    if view.calls is None:
        out.append(
            '<p class="muted">This run folder has no calls.jsonl (a run made before deeprepo '
            "recorded each call): sub-calls are counted per turn but their text is not shown.</p>"
        )
    seen: set[int] = set()
    for event in view.events:
        if event.get("type") == "resume":
            out.append(
                f'<div class="resume">Resumed ({h(event.get("resumed_at"))}): '
                f"{whole(event.get('replayed_turns'))} turn(s) replayed from the record.</div>"
            )
            continue
        index = int(num(event.get("index"), len(seen) + 1))
        calls = by_turn.get(index, []) if index not in seen else []
        seen.add(index)
        out += _turn(index, event, calls, ctx)
    for index in sorted(set(by_turn) - seen):
        out += _turn(index, None, by_turn[index], ctx)
    if not view.events and not by_turn:
        out.append("<p>No turn was recorded.</p>")
    return [*out, "</section>"]
