"""``deeprepo runs``: the run log (every analyze / baseline run) listed, shown, exported."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, OverflowMethod
from rich.padding import PaddingDimensions
from rich.table import Table
from rich.text import Text

from deeprepo.base.chat import TOKEN_KEYS
from deeprepo.base.errors import DeeprepoError, UsageError
from deeprepo.base.safefile import write_atomic
from deeprepo.report.rundir import check_out_dir, make_out_dir
from deeprepo.report.tables import Column, fit_table, show
from deeprepo.report.text import console, one_line, visible
from deeprepo.runlog import find_run, list_runs, log_path, open_log, process_gone, run_record
from deeprepo.runlog.query import ledger_check

out = Console()
err = Console(stderr=True)

runs_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="The run log: every analyze and baseline run, its turns and LLM calls "
    "(SQLite in $DEEPREPO_HOME, else the user data directory).",
)

#: Column headers of the four token counts (``TOKEN_KEYS``), in their order.
_TOKEN_HEADERS = ("input", "output", "cache r", "cache w")

RunRef = Annotated[
    str,
    typer.Argument(
        metavar="RUN", help="A run id, a unique prefix of one, or the run's output folder."
    ),
]


def _money(v: Any) -> str:
    return "unknown" if v is None else f"${float(v):.4f}"


def _when(iso: Any, *, short: bool = False, seconds: bool = False) -> str:
    form = "%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    try:
        return datetime.fromisoformat(str(iso)).strftime(form)
    except ValueError:
        return visible(iso)


def _status(run: dict[str, Any]) -> str:
    return "running (process gone)" if run.get("process_gone") else str(run.get("status"))


def _num(v: Any) -> str:
    return "" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


def _cell(v: Any) -> Text:
    return Text(visible(one_line("" if v is None else v)))


def _table(
    columns: Sequence[str],
    *,
    left: Collection[str] = (),
    title: str | None = None,
    overflow: OverflowMethod = "fold",
    padding: PaddingDimensions = (0, 1),
) -> Table:
    """A table as this command prints them all: no box, bold headers, the title on the left;
    figures right-aligned, the ``left`` columns (names, text) left-aligned."""
    table = Table(
        title=title,
        box=None,
        pad_edge=False,
        header_style="bold",
        title_justify="left",
        padding=padding,
    )
    for name in columns:
        table.add_column(name, justify="left" if name in left else "right", overflow=overflow)
    return table


#: Names and the status are never cut; the time, then the turn and call counts go first
#: when the terminal is narrow (`runs show` has them all).
_LIST_COLUMNS = (
    Column("id", "name"),
    Column("when (UTC)", "name", drop=3),
    Column("repo", "name"),
    Column("root", "name"),
    Column("sub", "name"),
    Column("status", "name"),
    Column("turns", drop=1),
    Column("sub-calls", drop=2),
    Column("findings"),
    Column("cost"),
)


@runs_app.command("list")
def list_command(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Show this many runs.")] = 20,
    json_out: Annotated[bool, typer.Option("--json", help="Print the runs as JSON.")] = False,
) -> None:
    """The logged runs, newest first: id, when, repo, models, status, turns, sub-calls, findings, cost."""
    db = _open()
    runs: list[dict[str, Any]] = []
    if db is not None:
        try:
            runs = list_runs(db, limit)
        finally:
            db.close()
    for run in runs:
        run["process_gone"] = process_gone(run)
    if json_out:
        typer.echo(json.dumps(runs, indent=2))
        return
    if not runs:
        err.print(
            f"no runs logged yet in {console(log_path())}: `deeprepo analyze` and "
            "`deeprepo baseline` add theirs",
            highlight=False,
        )
        return
    rows = [
        [
            visible(one_line(run["id"])),
            _when(run["started_at"], short=out.width < 120),
            visible(one_line(Path(str(run.get("repo") or "")).name or run.get("repo") or "")),
            visible(one_line(run.get("root_model") or "")),
            visible(one_line(run.get("sub_model") or "")),
            visible(one_line(_status(run))),
            _num(run.get("turns")),
            _num(run.get("sub_calls")),
            _num(run.get("findings")),
            "" if run["status"] == "running" else _money(run.get("cost_usd")),
        ]
        for run in runs
    ]
    show(out, fit_table(_LIST_COLUMNS, rows, out.width))
    if any(run["process_gone"] for run in runs):
        err.print(
            "running (process gone): the run was killed or crashed before it ended; "
            "`deeprepo analyze --resume <its folder>` continues it",
            highlight=False,
        )


@runs_app.command("show")
def show_command(
    run: RunRef,
    calls_shown: Annotated[
        int, typer.Option("--calls", min=0, help="Show at most this many LLM calls.")
    ] = 200,
) -> None:
    """A run's turns, LLM calls (role, model, tokens, cost, latency) and ledger, checked against each other."""
    record = _load(run)
    r = record["run"]
    r["process_gone"] = process_gone(r)
    out.print(
        f"[bold]run {console(r['id'])}[/] · {console(r['mode'])} · {console(_status(r))} · "
        f"started {console(_when(r['started_at'], seconds=True))} UTC",
        highlight=False,
    )
    repo = visible(r.get("repo") or "")
    if r.get("rev"):
        repo += f" @ {visible(r['rev'])}"
    out.print(Text(f"repo {repo}"), soft_wrap=True)
    out.print(Text(f"folder {visible(r.get('out_dir') or '')}"), soft_wrap=True)
    out.print(
        Text(f"root {visible(r.get('root_model'))} · sub {visible(r.get('sub_model'))}"),
        soft_wrap=True,
    )
    if r["status"] != "running":
        line = (
            f"stop {one_line(r.get('stop_reason'))} · turns {_num(r.get('turns'))} · "
            f"sub-calls {_num(r.get('sub_calls'))} · findings {_num(r.get('findings'))} · "
            f"cost {_money(r.get('cost_usd'))} · {float(r.get('wall_seconds') or 0):.1f}s"
        )
        out.print(Text(line), soft_wrap=True)
        why = r.get("incomplete_reason") or (
            r.get("stop_detail") if r["status"] == "failed" else ""
        )
        if why:
            out.print(Text(f"why: {one_line(why)}"), soft_wrap=True)
    if r["mode"] == "eval":
        _rollouts_table(record["rollouts"])
    else:
        _turns_table(record["turns"])
        _calls_table(record["calls"], calls_shown)
    _ledger(record["usage"], record["calls"], r)


def _rollouts_table(rollouts: list[dict[str, Any]]) -> None:
    if not rollouts:
        out.print("rollouts: none recorded")
        return
    table = _table(
        (
            "example",
            "rollout",
            "reward",
            "turns",
            "sub-calls",
            "findings",
            "stop",
            "cost",
            "seconds",
        ),
        left=("example", "stop"),
        title="rollouts",
    )
    for x in rollouts:
        table.add_row(
            _cell(x.get("example_id")),
            str(int(x.get("rollout") or 0) + 1),
            f"{float(x.get('reward') or 0):.3f}",
            _num(x.get("num_turns")),
            _num(x.get("sub_calls")),
            _num(x.get("findings")),
            _cell(x.get("stop_condition")),
            _money(x.get("cost_usd")),
            f"{float(x.get('seconds') or 0):.1f}",
        )
    out.print(table)


def _turns_table(turns: list[dict[str, Any]]) -> None:
    if not turns:
        out.print("turns: none recorded")
        return
    table = _table(
        ("#", *_TOKEN_HEADERS, "cost", "seconds", "sub-calls", "findings", "error"),
        left=("error",),
        title="turns",
        overflow="ellipsis",
    )
    for t in turns:
        table.add_row(
            str(t["idx"]) + (" (final)" if t.get("final_turn") else ""),
            *(_num(t.get(k)) for k in TOKEN_KEYS),
            _money(t.get("cost_usd")),
            f"{float(t.get('seconds') or 0):.2f}",
            _num(t.get("sub_calls")),
            _num(t.get("findings_added")),
            _cell(t.get("error")),
        )
    out.print(table)


def _calls_table(calls: list[dict[str, Any]], limit: int) -> None:
    if not calls:
        out.print("LLM calls: none recorded (calls.jsonl missing or empty)")
        return
    table = _table(
        ("seq", "turn", "role", "model", *_TOKEN_HEADERS, "cost", "latency", "note"),
        left=("role", "model", "note"),
        title="LLM calls",
    )
    for c in calls[:limit]:
        note = "cached" if c.get("cached") else ""
        if c.get("error"):
            note = f"error: {c['error']}"
        elif c.get("truncated"):
            note = (note + " truncated").strip()
        table.add_row(
            _num(c.get("seq")),
            _num(c.get("turn")),
            _cell(c.get("role")),
            _cell(c.get("model")),
            *(_num(c.get(k)) for k in TOKEN_KEYS),
            _money(c.get("cost_usd")),
            f"{float(c.get('latency_s') or 0):.2f}s",
            _cell(note[:200]),
        )
    out.print(table)
    if len(calls) > limit:
        out.print(f"… and {len(calls) - limit:,} more calls (--calls, or `deeprepo runs export`)")


def _ledger(usage: list[dict[str, Any]], calls: list[dict[str, Any]], run: dict[str, Any]) -> None:
    if not usage:
        out.print("ledger: none recorded (the run has not ended, or wrote no metrics.json)")
        return
    table = _table(
        ("role", "model", "calls", "cached", "failed", *_TOKEN_HEADERS, "cost"),
        left=("role", "model"),
        title="ledger (summed over the rollouts)"
        if run["mode"] == "eval"
        else "ledger (metrics.json usage)",
    )
    for u in usage:
        table.add_row(
            _cell(u.get("role")),
            _cell(u.get("model")),
            _num(u.get("calls")),
            _num(u.get("cached_calls")),
            _num(u.get("failed_calls")),
            *(_num(u.get(k)) for k in TOKEN_KEYS),
            _money(u.get("cost_usd")),
        )
    out.print(table)
    out.print(f"total cost {_money(run.get('cost_usd'))}", highlight=False)
    if not calls:
        return
    problems = ledger_check(usage, calls)
    if not problems:
        out.print(
            "the calls add up to the ledger: records, tokens and cost per role and model",
            highlight=False,
        )
        return
    for problem in problems:
        out.print(Text(f"calls differ from the ledger: {visible(problem)}"), soft_wrap=True)


@runs_app.command("export")
def export_command(
    run: RunRef,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the JSON here instead of stdout.")
    ] = None,
) -> None:
    """A run, its ledger, turns and LLM calls as one JSON object."""
    if output is not None:
        if output.is_dir():
            raise UsageError(f"-o {output} is a directory; give a file name")
        check_out_dir(output.parent, "-o")  # created below if missing; refused if it cannot be
    text = json.dumps(_load(run), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    make_out_dir(output.parent, "-o")
    write_atomic(output, text)
    err.print(f"wrote {console(output)}", highlight=False)


def _open() -> sqlite3.Connection | None:
    """The log, or None when there is none yet; an unreadable one is one line, exit 1."""
    try:
        return open_log()
    except (OSError, sqlite3.Error) as exc:
        raise DeeprepoError(
            f"the run log {log_path()} cannot be read ({exc}); move it aside to start a new "
            "one, or point DEEPREPO_HOME elsewhere"
        ) from None


def _load(ref: str) -> dict[str, Any]:
    db = _open()
    try:
        found = find_run(db, ref)
        assert db is not None  # find_run raised otherwise
        return run_record(db, str(found["id"]))
    finally:
        if db is not None:
            db.close()
