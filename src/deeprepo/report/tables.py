"""Tables that read at any width, on a terminal or in a pipe.

Names (models, repositories, run ids, labels) are what a reader greps for, so they are never
cut: a name column does not wrap and is never squeezed. Figures do not wrap either. One
free-text column may wrap. When the table does not fit the width, its lesser columns are
dropped (the caller says which, in the order to drop them, and a footnote names them); when
even that does not fit, each row becomes a record of two lines, its names first, so no name
is ever cut or folded.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "fit_table", "show"]

#: Narrowest a wrapping free-text column may get before it is dropped instead.
MIN_TEXT_WIDTH = 16


@dataclass(frozen=True)
class Column:
    """One column: ``kind`` is ``name`` (never cut, left), ``figure`` (never cut, right) or
    ``text`` (wraps, left); ``drop`` orders the columns that may go when space is short
    (1 goes first; 0 never goes)."""

    header: str
    kind: str = "figure"
    drop: int = 0


#: Headers wrap to this width (or their longest word): a long header never widens a column
#: of short figures.
HEADER_WIDTH = 10


def _stack(header: str) -> str:
    if "\n" in header:
        return header
    words = header.split()
    room = max([HEADER_WIDTH, *(len(w) for w in words)])
    return "\n".join(textwrap.wrap(header, room, break_on_hyphens=False)) or header


def _width(text: str) -> int:
    return max((cell_len(line) for line in text.split("\n")), default=0)


def fit_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    title: str | None = None,
) -> list[RenderableType]:
    """``rows`` (plain strings, already made safe to show) as renderables for ``width``."""
    columns = [replace(c, header=_stack(c.header)) for c in columns]
    natural = [
        max([_width(c.header), *(_width(row[i]) for row in rows)]) for i, c in enumerate(columns)
    ]

    def needed(keep: list[int]) -> int:
        fixed = sum(
            min(natural[i], MIN_TEXT_WIDTH) if columns[i].kind == "text" else natural[i]
            for i in keep
        )
        return fixed + len(keep) - 1

    keep = list(range(len(columns)))
    for i in sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: columns[i].drop):
        if needed(keep) <= width:
            break
        keep.remove(i)
    dropped = [columns[i].header.replace("\n", " ") for i in range(len(columns)) if i not in keep]
    out: list[RenderableType] = []
    if needed(keep) <= width:
        if title:
            out.append(Text(title, style="bold"))
        table = Table(
            box=None,
            pad_edge=False,
            padding=(0, 1, 0, 0),
            header_style="bold",
            title_justify="left",
            expand=False,
        )
        for i in keep:
            c = columns[i]
            table.add_column(
                c.header,
                justify="right" if c.kind == "figure" else "left",
                no_wrap=c.kind != "text",
                overflow="fold",
                min_width=natural[i] if c.kind != "text" else None,
            )
        for row in rows:
            table.add_row(*(Text(row[i]) for i in keep))
        out.append(table)
    else:
        out += _records(columns, rows, title, width)
        dropped = []
    if dropped:
        out.append(
            Text(f"({', '.join(dropped)} left out at this width: widen the terminal or use --json)")
        )
    return out


def _records(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str | None, width: int
) -> list[RenderableType]:
    """Each row in two lines: its names, then ``header value`` for the rest."""
    out: list[RenderableType] = [Text(title, style="bold")] if title else []
    names = [i for i, c in enumerate(columns) if c.kind == "name"]
    others = [i for i, c in enumerate(columns) if c.kind != "name"]
    for row in rows:
        # Lines break between names, never inside one (a name wider than the terminal is
        # left whole for the terminal to wrap).
        line = ""
        for name in (row[i] for i in names if row[i]):
            if line and cell_len(line) + 2 + cell_len(name) > width:
                out.append(Text(line))
                line = name
            else:
                line = f"{line}  {name}" if line else name
        out.append(Text(line))
        rest = " · ".join(
            f"{columns[i].header.replace(chr(10), ' ')} {row[i]}" for i in others if row[i]
        )
        out.append(Padding(Text(rest), (0, 0, 0, 2), expand=False))
    return out


def show(console: Console, parts: Sequence[RenderableType]) -> None:
    """Print :func:`fit_table`'s parts: a line of text is never cut or folded by rich (a
    name wider than the terminal is left for the terminal to wrap)."""
    for part in parts:
        console.print(part, soft_wrap=isinstance(part, Text))
