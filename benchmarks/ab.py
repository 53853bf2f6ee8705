"""A/B the benchmarks: this working tree (new) against a git revision (old), interleaved.

``REV`` is checked out in a temporary detached git worktree (``git worktree add --detach``),
removed at the end. Each side runs its OWN copy of each benchmark script (the old tree's
``benchmarks/`` and ``src/`` differ from the new one's) with ``PYTHONPATH=<tree>/src`` and the
same Python interpreter and virtualenv as ``ab.py`` itself: the two sides' dependencies are
assumed to be the same or close, so a revision that needs a different dependency set must be
measured by hand. Old and new alternate within each of ``--rounds`` rounds (the side that goes
first alternates too), so a change in machine load hits both sides alike; the table gives each
figure's median per side and the ratio new/old.

A benchmark the old revision does not have runs from this tree's copy when its text says
:data:`PORTABLE` (it imports nothing of deeprepo, e.g. ``bench_memory``); otherwise that side
is skipped and its figures show ``-``.

Figures: a benchmark prints one line per figure, ``FIGURE <name>=<number> <unit> [higher|lower]``
(``lower`` is better unless it says ``higher``). A revision whose benchmark predates this
convention is read through :data:`LEGACY` (patterns for the human lines that benchmark has
always printed).

Run: ``.venv/bin/python benchmarks/ab.py 77af229 "bench_kernel --starts 4 --execs 300"``
(each BENCH is a script name in ``benchmarks/`` and its arguments, as one quoted word).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BENCHES = (
    "bench_loader --files 5000 --mb 20 --runs 3",
    "bench_kernel --starts 6 --execs 500",
    "bench_rollouts --tasks 16 --rollouts 4 --runs 1",
)
#: What a benchmark says in its text when it imports nothing of deeprepo (it runs deeprepo
#: as a subprocess), so that its copy here can measure a revision that predates it.
PORTABLE = "ab.py can run this copy against an old revision"
_FIGURE = re.compile(r"^FIGURE\s+([\w.\-/]+)=(\S+)\s+(\S+)(?:\s+(higher|lower))?\s*$")


@dataclass(frozen=True)
class Figure:
    """One measured number a benchmark printed."""

    name: str
    value: float
    unit: str
    higher_is_better: bool = False


def parse_figures(text: str) -> list[Figure]:
    """The ``FIGURE`` lines of a benchmark's output, in order."""
    out = []
    for line in text.splitlines():
        m = _FIGURE.match(line.strip())
        if m:
            out.append(Figure(m[1], float(m[2]), m[3], m[4] == "higher"))
    return out


def _sections(text: str) -> Iterable[tuple[str, str]]:
    """(section, line) for output split by ``[name]`` header lines (bench_kernel's modes)."""
    section = ""
    for line in text.splitlines():
        head = re.match(r"^\[(\w+)\]\s*$", line.strip())
        if head:
            section = head[1]
        yield section, line


def _legacy_kernel(text: str) -> list[Figure]:
    out = []
    for mode, line in _sections(text):
        for label, name in (
            ("start from warm pool", "start_pool_ms"),
            ("exec round trip", "exec_ms"),
            ("exec with llm_query", "exec_llm_ms"),
            ("cold start (no pool)", "start_cold_ms"),
        ):
            m = re.match(rf"\s*{re.escape(label)}\s*:\s*([\d.]+) ms", line)
            if m and mode:
                out.append(Figure(f"{name}.{mode}", float(m[1]), "ms"))
    return out


def _legacy_pattern(*specs: tuple[str, str, str, bool]) -> Callable[[str], list[Figure]]:
    def parse(text: str) -> list[Figure]:
        out = []
        for pattern, name, unit, higher in specs:
            m = re.search(pattern, text, re.MULTILINE)
            if m:
                out.append(Figure(name, float(m[1].replace(",", "")), unit, higher))
        return out

    return parse


#: How to read a benchmark's output from before the FIGURE convention, by script name.
LEGACY: dict[str, Callable[[str], list[Figure]]] = {
    "bench_kernel": _legacy_kernel,
    "bench_rollouts": _legacy_pattern(
        (r"rollouts/s \(median of \d+\): ([\d.]+)", "rollouts_per_s", "1/s", True),
    ),
    "bench_llm_batch": _legacy_pattern(
        *(
            (rf"^  \[{lane} {leg}\] throughput ([\d,]+)/s", f"{name}_{short}_per_s", "1/s", True)
            for lane, name in (("fast", "fast"), ("sdk/auto", "sdk"))
            for leg, short in (("dispatcher", "dispatcher"), ("repl llm_batch", "kernel"))
        ),
        *(
            (
                rf"^  \[{lane} {leg}\] CPU in this process: ([\d.]+) ms",
                f"{name}_{short}_cpu_ms",
                "ms",
                False,
            )
            for lane, name in (("fast", "fast"), ("sdk/auto", "sdk"))
            for leg, short in (("dispatcher", "dispatcher"), ("repl llm_batch", "kernel"))
        ),
    ),
    "bench_loader": _legacy_pattern(
        (r"^CPU per run: .*\(median ([\d.]+)\)", "load_cpu_s", "s", False),
        (r"^median load time: ([\d.]+) s", "load_wall_s", "s", False),
        (r"^peak RSS growth: ([\d,.]+) MB", "load_rss_growth_mb", "MB", False),
    ),
}


def figures_of(bench: str, text: str) -> list[Figure]:
    """A benchmark's figures: its ``FIGURE`` lines, else its legacy lines."""
    found = parse_figures(text)
    if found or bench not in LEGACY:
        return found
    return LEGACY[bench](text)


@dataclass
class Samples:
    """Every value one figure took, per side, over the rounds."""

    unit: str
    higher_is_better: bool
    old: list[float] = field(default_factory=list)
    new: list[float] = field(default_factory=list)


def collect(samples: dict[str, Samples], bench: str, side: str, figures: list[Figure]) -> None:
    """Add one run's figures to ``samples`` (keyed ``bench:figure``)."""
    for f in figures:
        s = samples.setdefault(f"{bench}:{f.name}", Samples(f.unit, f.higher_is_better))
        getattr(s, side).append(f.value)


def summary(samples: dict[str, Samples]) -> list[dict[str, object]]:
    """Per figure: the medians, the ratio new/old, and whether new is the better side."""
    rows: list[dict[str, object]] = []
    for key, s in samples.items():
        old = statistics.median(s.old) if s.old else None
        new = statistics.median(s.new) if s.new else None
        ratio = new / old if old and new is not None else None
        rows.append(
            {
                "figure": key,
                "unit": s.unit,
                "better": "higher" if s.higher_is_better else "lower",
                "old_median": old,
                "new_median": new,
                "ratio": ratio,
                "old_n": len(s.old),
                "new_n": len(s.new),
            }
        )
    return rows


def _num(x: object) -> str:
    if not isinstance(x, float | int):
        return "-"
    return f"{x:.4g}"


def table(rows: list[dict[str, object]], old_label: str) -> str:
    """The summary as a Markdown table (pastes into docs/performance.md)."""
    lines = [
        f"| figure | unit | better | old ({old_label}) | new | new/old |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["ratio"]
        shown = f"{ratio:.2f}" if isinstance(ratio, float) else "-"
        lines.append(
            f"| {r['figure']} | {r['unit']} | {r['better']} | {_num(r['old_median'])} "
            f"| {_num(r['new_median'])} | {shown} |"
        )
    return "\n".join(lines)


def script_for(tree: Path, name: str) -> Path | None:
    """The copy of benchmark ``name`` to run on ``tree``: its own; else, for a benchmark
    written after ``tree``, this tree's copy when it says it runs on older sources (its text
    holds :data:`PORTABLE`); else None."""
    own = tree / "benchmarks" / f"{name}.py"
    if own.exists():
        return own
    ours = ROOT / "benchmarks" / f"{name}.py"
    if ours.exists() and PORTABLE in ours.read_text(encoding="utf-8"):
        return ours
    return None


def run_bench(tree: Path, argv: list[str], timeout: float, script: Path | None = None) -> str:
    """Run a benchmark (``tree``'s copy unless ``script`` is given) with ``tree``'s sources
    first; its stdout."""
    script = script or tree / "benchmarks" / f"{argv[0].removesuffix('.py')}.py"
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), PYTHONHASHSEED="0")
    proc = subprocess.run(
        [sys.executable, str(script), *argv[1:]],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise BenchFailed(
            f"{script} failed (exit {proc.returncode}); its last output:\n"
            f"{(proc.stdout + proc.stderr)[-2000:]}"
        )
    return proc.stdout


class BenchFailed(Exception):
    """One run of a benchmark failed or ran past ``--timeout``; the other runs go on."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Both sides run with this interpreter and virtualenv; only PYTHONPATH differs "
        "(<tree>/src), so REV must work with the dependencies installed now.",
    )
    ap.add_argument("rev", help="the old side: any git revision (the new side is this tree)")
    ap.add_argument("bench", nargs="*", help=f"'script args...' (default: {DEFAULT_BENCHES})")
    ap.add_argument("--rounds", type=int, default=3, help="old/new pairs per benchmark")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per benchmark run")
    args = ap.parse_args(argv)
    # A kill (SIGTERM) unwinds like Ctrl-C, so the temporary worktree is still removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    benches = [shlex.split(b) for b in (args.bench or DEFAULT_BENCHES)]
    samples: dict[str, Samples] = {}
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="deeprepo-ab-") as tmp:
        old_tree = Path(tmp) / "old"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old_tree), args.rev],
            check=True,
        )
        try:
            sides = {"old": old_tree, "new": ROOT}
            for r in range(args.rounds):
                order = ("old", "new") if r % 2 == 0 else ("new", "old")
                for bench in benches:
                    name = bench[0].removesuffix(".py")
                    for side in order:
                        script = script_for(sides[side], name)
                        if script is None:
                            print(f"{side}: no benchmarks/{name}.py", file=sys.stderr)
                            continue
                        try:
                            out = run_bench(sides[side], bench, args.timeout, script)
                        except (BenchFailed, subprocess.TimeoutExpired) as exc:
                            # One hung or failed run (an old revision's bug, say) must not
                            # throw away the medians of all the others: said, and counted.
                            failed.append(f"round {r + 1} {side} {name}")
                            print(f"round {r + 1} {side} {name}: FAILED: {exc}", file=sys.stderr)
                            continue
                        figures = figures_of(name, out)
                        print(
                            f"round {r + 1} {side} {name}: {len(figures)} figures", file=sys.stderr
                        )
                        collect(samples, name, side, figures)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old_tree)],
                check=False,
            )
    rows = summary(samples)
    if args.json:
        print(
            json.dumps(
                {"old": args.rev, "rounds": args.rounds, "figures": rows, "failed": failed},
                indent=2,
            )
        )
    else:
        print(table(rows, args.rev))
        if failed:
            print(f"\n{len(failed)} run(s) failed and are not in the medians: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
