"""Escaping, cutting and formatting shared by the viewer's sections.

Everything from a model or a repository goes through :func:`h` (one line) or :func:`hb`
(a block for ``<pre>``): control and bidi characters made visible (``textsafe``), then
``html.escape(..., quote=True)``. Texts longer than their limit keep head and tail, and the
cut is counted in :class:`Cuts` so the page can say it.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from deeprepo.base.textsafe import escape_name, escape_text
from deeprepo.report.viewer.runview import num, text

__all__ = ["Cuts", "Limits", "h", "hb", "money", "pre", "whole"]


@dataclass(frozen=True)
class Limits:
    """How much text the page holds (characters); the rest stays in the run's files."""

    turn_field: int = 60_000  # a reply, a code block, an output
    call_field_max: int = 8_000  # a sub-call's prompt or response, when there are few calls
    call_field_min: int = 600  # … shrinking with the number of calls down to this
    call_text_budget: int = 6_000_000  # all sub-call text on the page together
    call_rows: int = 5_000  # sub-calls listed at all (the rest counted)
    findings: int = 2_000


@dataclass
class Cuts:
    """What the page left out, said at its top."""

    fields: int = 0  # texts shortened
    chars: int = 0  # characters left out of them
    calls_without_text: int = 0
    calls_not_listed: int = 0
    findings_not_listed: int = 0
    call_field_limit: int = 0


def h(value: object) -> str:
    """One line of untrusted text for HTML: controls shown as escapes, markup as text."""
    return escape(escape_name(text(value) if not isinstance(value, str) else value), quote=True)


def hb(value: str) -> str:
    """Untrusted multi-line text for a ``<pre>``: line breaks and tabs kept."""
    return escape(escape_text(value), quote=True)


def pre(value: str, limit: int, cuts: Cuts, where: str, cls: str = "", hidden: int = 0) -> str:
    """A ``<pre>`` of untrusted text, cut to ``limit`` characters (head and tail kept).

    ``hidden``: characters of the text the run folder's reader did not load; ``value`` is
    then the text's head and tail (three quarters and one), or empty."""
    total = len(value) + hidden
    if total <= limit:
        body = hb(value)
    else:
        head = limit * 3 // 4
        tail = limit - head
        if hidden:  # only what was loaded can be shown: each half at most
            loaded_head = len(value) * 3 // 4
            head, tail = min(head, loaded_head), min(tail, len(value) - loaded_head)
        removed = total - head - tail
        cuts.fields += 1
        cuts.chars += removed
        body = (
            f'{hb(value[:head])}<span class="cut">[… {removed:,} characters cut here; the whole '
            f"text is in {escape(where)} …]</span>{hb(value[len(value) - tail :])}"
        )
    return f'<pre class="{cls}">{body}</pre>' if cls else f"<pre>{body}</pre>"


def money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def whole(value: object) -> str:
    return f"{int(num(value)):,}"
