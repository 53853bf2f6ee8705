"""Train the template matcher of the ``template-matcher`` route and write its table.

The route (``rl/policies/routes_oracle.py``) sends every file to workers with the real audit
request, reads no reply, and submits the guesses of a line-shape matcher learned here on
labelled generated tasks: the shapes (identifiers, strings, numbers abstracted) that sat
inside bugs. The training seeds are disjoint from every seed the tests, the calibration and
the held-out tables use (``tests/test_routes_oracle.py`` checks it). Rerun it whenever the
task generator changes, so the route measures the generator's current tells:

    .venv/bin/python benchmarks/train_shape_matcher.py [--seeds 9001,...] [--n 4]
"""

from __future__ import annotations

import argparse
import pprint
import subprocess
import sys
from pathlib import Path

from deeprepo.rl import generate_task, task_seeds, train_shape_table

TABLE = Path(__file__).resolve().parents[1] / "src/deeprepo/rl/policies/shape_table.py"
SEEDS = "9001,9002,9003,9004,9005,9006"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default=SEEDS, help="base seeds (each gives --n task seeds)")
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--langs", default="python,js,mixed")
    ap.add_argument("--n", type=int, default=4, help="tasks per (base seed, size, lang)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    sizes, langs = args.sizes.split(","), args.langs.split(",")
    tasks = [
        generate_task(s, size, lang)
        for base in seeds
        for size in sizes
        for lang in langs
        for s in task_seeds(base, args.n)
    ]
    table, threshold = train_shape_table(tasks)
    trained_on = {
        "base_seeds": seeds,
        "sizes": sizes,
        "langs": langs,
        "n": args.n,
        "tasks": len(tasks),
        "threshold": threshold,
    }
    TABLE.write_text(
        '"""The template matcher of the ``template-matcher`` route: line shape → (kind, CWE).\n\n'
        "Written by ``benchmarks/train_shape_matcher.py``; do not edit.\n"
        '"""\n\n'
        f"TRAINED_ON: dict[str, object] = {pprint.pformat(trained_on, width=96)}\n"
        f"SHAPES: dict[str, tuple[str, str]] = {pprint.pformat(table, width=96)}\n",
        "utf-8",
    )
    # The table is source under src/: written in the house format, so retraining changes only
    # what was learned (pprint's quotes and wrapping are not ruff's).
    fmt = subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(TABLE)], check=False)
    if fmt.returncode:
        print(f"note: ruff could not format {TABLE}; run `ruff format` on it", file=sys.stderr)
    print(f"{len(table)} shapes from {len(tasks)} tasks (threshold {threshold}) -> {TABLE}")


if __name__ == "__main__":
    main()
