"""Benchmark: what the offline engine (scripted/expert + static) finds, and how precisely.

Two figures, as issue 8 asks for them:

- ``repos DIR...``: for each repository, the run time and the findings by scope
  (source and config are the headline), plus up to 20 source-scope findings listed
  for a person to judge real or not.
- ``tasks DIR``: for a folder written by ``deeprepo tasks generate``, analyse every
  task and score it against its ground truth; prints TP/FP/FN, precision, recall
  and F1 in total and per CWE family.

Runs go through the installed ``deeprepo`` command (``--no-cache``, so an engine
change is measured, not replayed), under ``--out-root`` (default: a temp dir).

    python benchmarks/bench_offline_engine.py repos /path/to/flask /path/to/express
    deeprepo tasks generate --seed 7 --n 20 --size medium --lang mixed /tmp/tasks
    python benchmarks/bench_offline_engine.py tasks /tmp/tasks
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEADLINE = ("source", "config")


def _deeprepo() -> list[str]:
    exe = shutil.which("deeprepo") or str(Path(sys.executable).parent / "deeprepo")
    return [exe]


def _analyze(path: Path, out: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [*_deeprepo(), "analyze", str(path), "--out", str(out), "--no-cache",
         "--max-sub-calls", "100000"],
        check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - t0


def _findings(out: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads((out / "findings.json").read_text())
    except (OSError, ValueError):
        return []
    return list(data if isinstance(data, list) else data.get("findings", []))


def repos(paths: list[Path], out_root: Path, sample: int, seed: int) -> None:
    for path in paths:
        out = out_root / path.name
        seconds = _analyze(path, out)
        found = _findings(out)
        by_scope = collections.Counter(str(f.get("scope", "?")) for f in found)
        head = [f for f in found if f.get("scope") in HEADLINE]
        print(f"\n{path.name}: {len(found)} findings in {seconds:.0f} s; by scope {dict(by_scope)}")
        picked = random.Random(seed).sample(head, min(sample, len(head)))
        for f in sorted(picked, key=lambda f: (f["file"], f["start_line"])):
            print(
                f"  {f['severity']:8s} {f['file']}:{f['start_line']}  {f.get('cwe')}  {f['title'][:70]}"
            )


def tasks(folder: Path, out_root: Path) -> None:
    total = collections.Counter[str]()
    family: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    task_dirs = sorted(p for p in folder.iterdir() if (p / "ground_truth.json").is_file())
    for task in task_dirs:
        out = out_root / task.name
        _analyze(task / "repo", out)
        proc = subprocess.run(
            [*_deeprepo(), "score", str(out / "findings.json"), str(task / "ground_truth.json"),
             "--json"],
            check=False, capture_output=True, text=True,
        )  # fmt: skip
        try:
            score = json.loads(proc.stdout)
        except ValueError:
            print(f"{task.name}: no score ({proc.stderr.strip()[-200:]})")
            continue
        for key in ("tp", "fp", "fn", "decoys_hit"):
            total[key] += int(score.get(key, 0))
        for name, row in score.get("per_family", {}).items():
            for key in ("tp", "fp", "fn"):
                family[name][key] += int(row.get(key, 0))
    tp, fp, fn = total["tp"], total["fp"], total["fn"]
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    print(
        f"{len(task_dirs)} tasks: TP {tp}  FP {fp}  FN {fn}  decoys hit {total['decoys_hit']}  "
        f"precision {precision:.3f}  recall {recall:.3f}  F1 {f1:.3f}"
    )
    for name, row in sorted(family.items()):
        print(f"  {name:26s} TP {row['tp']:3d}  FP {row['fp']:3d}  FN {row['fn']:3d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("repos")
    r.add_argument("paths", nargs="+", type=Path)
    r.add_argument("--sample", type=int, default=20)
    r.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("tasks")
    t.add_argument("folder", type=Path)
    for p in (r, t):
        p.add_argument("--out-root", type=Path, default=None)
    args = parser.parse_args()
    out_root = args.out_root or Path(tempfile.mkdtemp(prefix="deeprepo-bench-engine-"))
    if args.what == "repos":
        repos(args.paths, out_root, args.sample, args.seed)
    else:
        tasks(args.folder, out_root)
    print(f"\nruns under {out_root}")


if __name__ == "__main__":
    main()
