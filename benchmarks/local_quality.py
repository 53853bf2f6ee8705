"""Benchmark: how well small local models find planted bugs, and how fast, on this machine.

Each configuration analyses the bundled example (``examples/vulnapi`` with its ground
truth) and ``--tasks`` small generated repositories (``deeprepo tasks generate``), then
the findings are graded against the ground truth (``deeprepo.findings.grading``):

- ``expert+static``: ``scripted/expert`` root, ``static`` worker (the offline engine);
- ``expert+0.5b`` / ``expert+1.5b``: the same root, the local Qwen2.5-Coder as worker;
- ``1.5b+1.5b``: the 1.5B model as root too (``--prompt small``).

Runs go through the ``deeprepo`` command with ``--no-cache`` (a rerun is measured, not
replayed) and ``--timeout`` each (a cut run is graded on what it found, and marked).
Tokens per second are the local model's tokens (prompt + generated) over the run's
wall time, so they include the time the root and the analyzers took.

    python benchmarks/local_quality.py --tasks 2 --timeout 1500 --json /tmp/local.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from deeprepo import Usage, UsageRow, grade, load_findings, load_ground_truth

ROOT = Path(__file__).resolve().parents[1]
CONFIGS: dict[str, list[str]] = {
    "expert+static": ["--root", "scripted/expert", "--sub", "static"],
    "expert+0.5b": ["--root", "scripted/expert", "--sub", "local/qwen2.5-coder-0.5b"],
    "expert+1.5b": ["--root", "scripted/expert", "--sub", "local/qwen2.5-coder-1.5b"],
    "1.5b+1.5b": [
        "--root", "local/qwen2.5-coder-1.5b", "--sub", "local/qwen2.5-coder-1.5b",
        "--prompt", "small", "--max-turns", "4",
    ],
}  # fmt: skip


def _deeprepo() -> str:
    return shutil.which("deeprepo") or str(Path(sys.executable).parent / "deeprepo")


def _repos(tasks: int, seed: int, work: Path) -> list[tuple[str, Path, Path]]:
    repos = [
        ("vulnapi", ROOT / "examples" / "vulnapi", ROOT / "examples" / "vulnapi.ground_truth.json")
    ]
    if tasks:
        folder = work / "tasks"
        subprocess.run(
            [_deeprepo(), "tasks", "generate", str(folder), "--seed", str(seed), "--n", str(tasks),
             "--size", "small", "--lang", "python"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        for task in sorted(p for p in folder.iterdir() if (p / "ground_truth.json").is_file()):
            repo = task / "repo" if (task / "repo").is_dir() else task
            repos.append((task.name, repo, task / "ground_truth.json"))
    return repos


def run_one(
    config: list[str], repo: Path, truth: Path, out: Path, timeout: float
) -> dict[str, Any]:
    started = time.perf_counter()
    proc = subprocess.run(
        [_deeprepo(), "analyze", str(repo), "--out", str(out), "--no-cache",
         "--timeout", str(timeout), *config],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    row: dict[str, Any] = {"exit": proc.returncode, "wall_s": round(wall, 1)}
    try:
        metrics = json.loads((out / "metrics.json").read_text())
        findings = load_findings(out / "findings.json")
    except (OSError, ValueError) as exc:
        row["error"] = (proc.stderr.strip().splitlines() or [str(exc)])[-1][:200]
        return row
    score = grade(findings, load_ground_truth(truth))
    rows = [UsageRow.from_dict(u) for u in metrics.get("usage", [])]
    local = sum((u.usage for u in rows if u.model.startswith("local/")), Usage())
    row.update(
        tp=score.tp, fp=score.fp, fn=score.fn,
        complete=not metrics.get("incomplete", False),
        tokens_in=local.input_tokens,
        tokens_out=local.output_tokens,
        cost_usd=metrics.get("total_cost_usd"),
    )  # fmt: skip
    return row


def _rates(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=2, help="generated small tasks besides vulnapi")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset")
    ap.add_argument(
        "--root-repos",
        type=int,
        default=1,
        help="repositories the 1.5b root config runs on (the slowest)",
    )
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument("--out-root", type=Path, help="keep the runs here (default: a temp dir)")
    args = ap.parse_args()
    work = args.out_root or Path(tempfile.mkdtemp(prefix="local-quality-"))
    repos = _repos(args.tasks, args.seed, work)
    rows: list[dict[str, Any]] = []
    for name in args.configs.split(","):
        chosen = repos[: args.root_repos] if name == "1.5b+1.5b" else repos
        for repo_name, repo, truth in chosen:
            row = run_one(CONFIGS[name], repo, truth, work / name / repo_name, args.timeout)
            row.update(config=name, repo=repo_name)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    print(
        "| config | repos | TP | FP | FN | precision | recall | F1 | wall s | local tok in/s | local tok out/s | cut |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.configs.split(","):
        mine = [r for r in rows if r["config"] == name and "tp" in r]
        if not mine:
            print(f"| {name} | 0 | | | | | | | | | | every run failed |")
            continue
        tp, fp, fn = (sum(r[k] for r in mine) for k in ("tp", "fp", "fn"))
        p, r_, f1 = _rates(tp, fp, fn)
        wall = sum(r["wall_s"] for r in mine)
        tin, tout = sum(r["tokens_in"] for r in mine), sum(r["tokens_out"] for r in mine)
        speed = (f"{tin / wall:.0f}", f"{tout / wall:.1f}") if tin else ("-", "-")
        cut = sum(1 for r in mine if not r["complete"])
        print(f"| {name} | {len(mine)} | {tp} | {fp} | {fn} | {p:.2f} | {r_:.2f} | {f1:.2f} | "
              f"{wall:.0f} | {speed[0]} | {speed[1]} | {cut} |")  # fmt: skip
    print(f"\nruns kept in {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
