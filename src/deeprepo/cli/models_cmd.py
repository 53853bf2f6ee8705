"""``deeprepo models [FILTER]``: the known models, their prices, context and sources."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deeprepo.base.errors import UsageError
from deeprepo.providers.catalog import ModelInfo, known_models
from deeprepo.providers.prices import PriceTable
from deeprepo.report.tables import Column, fit_table, show
from deeprepo.report.text import visible

_UNLISTED = "*"  # marks a cache price that is the input price (no separate rate listed)


def _price(value: float, listed: bool = True) -> str:
    text = f"${value:,.4f}".rstrip("0").rstrip(".") if value else "$0"
    return text + ("" if listed else _UNLISTED)


def _source(m: ModelInfo) -> str:
    if m.kind == "built-in":
        return m.source or "built-in"
    parts = [m.source or "source unknown", m.as_of or "date unknown"]
    parts.append(m.source_url or "URL unknown")
    return "; ".join(parts)


#: Names never cut, prices and the context window next, where each price came from last
#: (the free text that wraps, and the first to go on a narrow terminal).
_COLUMNS = (
    Column("model", "name"),
    Column("input"),
    Column("output"),
    Column("cache\nread"),
    Column("cache\nwrite"),
    Column("context", drop=2),
    Column("source", "text", drop=1),
)


def _row(m: ModelInfo) -> list[str]:
    context = (
        "n/a"
        if m.kind == "built-in"
        else f"{m.context_window:,}"
        if m.context_window
        else "unknown"
    )
    return [
        visible(m.name),
        _price(m.input),
        _price(m.output),
        _price(m.cache_read, m.cache_read_listed),
        _price(m.cache_write, m.cache_write_listed),
        context,
        visible(_source(m)),
    ]


def models_command(
    pattern: str | None = typer.Argument(
        None, metavar="FILTER", help="Show only models whose name contains this (any case)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON list instead of a table."),
    prices: Path | None = typer.Option(
        None,
        "--prices",
        help="A JSON price file merged over the packaged table (default: $DEEPREPO_PRICES).",
    ),
) -> None:
    """List the known models: USD per 1M tokens (input, output, cache read, cache write),
    context window and where each price came from. Built-in models cost nothing."""
    table = PriceTable.load(prices)
    rows = known_models(table, pattern)
    if not rows:
        raise UsageError(
            f"no known model matches {pattern!r}; run `deeprepo models` to list them all "
            "(a model missing from the table still runs, with its cost reported as unknown)"
        )
    if json_out:
        typer.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return
    from rich.console import Console

    out = Console()
    title = "Known models (USD per 1M tokens)"
    show(out, fit_table(_COLUMNS, [_row(r) for r in rows], out.width, title=title))
    if any(not (r.cache_read_listed and r.cache_write_listed) for r in rows):
        out.print(
            f"{_UNLISTED} no separate cache rate is listed: deeprepo bills those tokens at the "
            "input price, which over- rather than under-states the cost.",
            highlight=False,
        )
    out.print(
        "Not listed: cost reported as unknown (null), never 0. Add prices with --prices FILE "
        "or $DEEPREPO_PRICES (docs/guide.md).",
        highlight=False,
    )
