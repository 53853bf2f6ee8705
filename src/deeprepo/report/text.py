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

``visible``, ``one_line``, ``md_text`` and ``md_code`` live on the ground floor
(``deeprepo.base.textsafe``) so that every room that renders a name (the architecture
section, SARIF) escapes it the same way; they are re-exported here.
"""

from __future__ import annotations

import re

from rich.markup import escape as _rich_escape

from deeprepo.base.textsafe import md_code, md_text, one_line, visible

__all__ = ["console", "md_block", "md_code", "md_text", "one_line", "visible"]


def console(text: object) -> str:
    """``text`` for ``rich`` output: controls escaped and markup shown literally."""
    return _rich_escape(visible(text))


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
