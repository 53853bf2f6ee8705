"""Benchmark: where generated tasks put their bugs, on each substrate (issue 19 item 3a).

For every (substrate, size) it prints the share of bugs whose file is in the larger half of
its task's code files (by lines) next to chance (the share of files above the median), and
the bugs' relative position in their file (start line / file length) in thirds. A generator
without a size tell has the first two equal.

    python benchmarks/bench_task_placement.py [--seeds 300-329] [--large-seeds 6]
        [--substrates synthetic,real] [--langs python,js,mixed]

``--tells SUBSTRATE -- ARGS`` instead runs ``benchmarks/bench_task_tells.py`` (unchanged) with
its tasks drawn from SUBSTRATE, e.g. ``--tells real -- --n 8 --train 8 --sizes small,medium``.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from deeprepo.rl import generate_task

CODE = (".py", ".js", ".cjs", ".mjs")


def placement(substrate: str, size: str, langs: list[str], seeds: list[int]) -> str:
    hits = total = 0
    chance = 0.0
    rel: list[float] = []
    for lang in langs:
        for seed in seeds:
            t = generate_task(seed, size, lang, substrate)
            lines = {p: x.count("\n") for p, x in t.files.items() if p.endswith(CODE)}
            ranked = sorted(lines.values())
            median = ranked[len(ranked) // 2]
            larger = {p for p, n in lines.items() if n > median}
            for e in t.bugs:
                total += 1
                hits += e.file in larger
                chance += len(larger) / len(lines)
                rel.append(e.start_line / max(1, lines[e.file]))
    thirds = " / ".join(
        f"{sum(lo <= r < lo + 1 / 3 for r in rel) / len(rel):.2f}" for lo in (0, 1 / 3, 2 / 3)
    )
    return (
        f"| {substrate} | {size} | {total} | {hits / total:.2f} | {chance / total:.2f} | {thirds} |"
    )


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi) + 1)) if hi else [int(s) for s in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--tells"]:
        sys.path.insert(0, str(Path(__file__).parent))
        import bench_task_tells

        bench_task_tells.generate_task = functools.partial(generate_task, substrate=argv[1])  # type: ignore[assignment]
        return bench_task_tells.main([a for a in argv[2:] if a != "--"])
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", default="300-329", help="a range lo-hi or a comma list")
    ap.add_argument("--large-seeds", type=int, default=6, help="the first K seeds for large")
    ap.add_argument("--substrates", default="synthetic,real")
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--langs", default="python,js,mixed")
    args = ap.parse_args(argv)
    seeds = _seeds(args.seeds)
    print("| substrate | size | bugs | in larger half | chance | position thirds |")
    print("|---|---|---:|---:|---:|---|")
    for sub in args.substrates.split(","):
        for size in args.sizes.split(","):
            use = seeds[: args.large_seeds] if size == "large" else seeds
            print(placement(sub, size, args.langs.split(","), use), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
