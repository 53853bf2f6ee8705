"""``deeprepo compare A.jsonl B.jsonl ...``: the before/after table with CIs and p-values."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deeprepo.rl.evals.compare import (
    compare_runs,
    default_labels,
    parse_pairs,
    render_markdown,
    render_rich,
)
from deeprepo.rl.evals.results import load_results
from deeprepo.rl.evals.stats import DEFAULT_RESAMPLES


def compare_command(
    files: list[Path] = typer.Argument(
        ..., help="results.jsonl files (or run folders holding one)."
    ),
    labels: str | None = typer.Option(
        None, "--labels", help="Comma-separated labels, one per file: a,b,c."
    ),
    pairs: str | None = typer.Option(
        None,
        "--pairs",
        help="Pairs to compare as A:B (labels or 1-based positions), comma-separated. "
        "Default: consecutive pairs and first:last.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a markdown table."),
    resamples: int = typer.Option(
        DEFAULT_RESAMPLES, "--resamples", min=100, help="Bootstrap resamples and permutations."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap and permutation test."),
) -> None:
    """Compare evaluation runs: reward, turns, delegation, behaviour labels, tokens and deltas
    with 95% CIs."""
    names = default_labels(files, labels)
    runs = [(name, load_results(path)) for name, path in zip(names, files, strict=True)]
    table = compare_runs(
        runs, parse_pairs(pairs, names), resamples=resamples, permutations=resamples, seed=seed
    )
    if json_out:
        typer.echo(json.dumps(table.to_dict(), indent=2))
    elif markdown:
        typer.echo(render_markdown(table), nl=False)
    else:
        from rich.console import Console

        from deeprepo.report.tables import show

        console = Console()
        show(console, render_rich(table, console.width))
