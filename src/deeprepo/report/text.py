"""Text from a model or a repository, made safe to show.

Finding titles and details, file names and answers come from a model or from the
repository under analysis: they may hold terminal escape sequences (``ESC [2J``),
carriage returns that overwrite a line, bidi overrides that reverse what a reader sees,
rich markup (``[bold red]``, ``[/]``) or markdown and HTML that would restructure a
report. They are shown as text, never interpreted:

- :func:`visible` escapes every control character (C0, DEL, C1), the bidi controls and
  the line/paragraph separators as ``\\xNN`` / ``\\uNNNN``, so what the text *is* stays
  readable and nothing acts on the terminal;
- :func:`console` is :func:`visible` with rich markup escaped, for ``Console.print``;
- :func:`md_text` and :func:`md_code` are for ``report.md``: one line, markdown and
  HTML escaped (``<`` becomes ``&lt;``), pipes escaped so a table stays a table; a code
  span gets a backtick fence longer than any run inside it.
"""

from __future__ import annotations

import re

from rich.markup import escape as _rich_escape

__all__ = ["console", "md_block", "md_code", "md_text", "visible"]

# C0 and DEL and C1; bidi embeddings/overrides/isolates and marks; LS/PS; BOM-like ZWNBSP.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]"
)
_WHITESPACE_RUN = re.compile(r"[\t\r\n]+")
# Enough to keep emphasis, code, links/images (their brackets), strikethrough and table
# cells from forming; "(" and "#" need no escape once "[" is escaped and "#" is not first.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` with every control or direction-changing character escaped."""
    return _UNSAFE.sub(_escape_char, str(text))


def console(text: object) -> str:
    """``text`` for ``rich`` output: controls escaped and markup shown literally."""
    return _rich_escape(visible(text))


def one_line(text: object) -> str:
    """Tabs and line breaks as single spaces, then :func:`visible`."""
    return visible(_WHITESPACE_RUN.sub(" ", str(text)).strip())


def md_text(text: object) -> str:
    """One line of markdown that renders as exactly ``text`` (no markup, no HTML)."""
    s = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    # A leading "-", "1." or "=" could start a list or a heading underline.
    return re.sub(r"^([-=+#]|\d+\.)", r"\\\1", s)


def md_code(text: object) -> str:
    """An inline code span showing ``text`` verbatim (one line, controls escaped)."""
    s = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


_HEADING = re.compile(r"^(#{1,6})(?=\s)")


def md_block(text: object, shift_headings: int = 0) -> str:
    """Free text (several lines) for a report: controls escaped but line breaks kept, and
    what would open an HTML tag neutralised outside fenced code; the markdown its author
    wrote (headings, lists, code blocks) still renders, headings ``shift_headings`` levels
    deeper (at most level 6) so they nest under the report's own."""
    out: list[str] = []
    fenced = False
    for line in str(text).replace("\r\n", "\n").split("\n"):
        line = visible(line)
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            line = _TAG_START.sub("&lt;", line)
            if shift_headings:
                line = _HEADING.sub(lambda m: "#" * min(6, len(m[1]) + shift_headings), line)
        out.append(line)
    return "\n".join(out)
