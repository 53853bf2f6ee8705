"""The adversarial table of issue 9: mean reward of every scripted policy (honest, weak and
gaming) through the real Episode, sandbox, oracle and reward, on generated tasks of several
sizes and seeds, with the targets checked.

Each cell is the mean over ``--n`` tasks of ``--generate SIZE:seed=S:lang=L`` for every
seed and language given, ``--rollouts`` rollouts each (oracle seed varies per rollout), as
``deeprepo eval --model scripted/P -n N -r R --generate SIZE:seed=S:lang=L`` computes it.

Run: ``.venv/bin/python benchmarks/bench_adversarial.py [--sizes small,medium]
[--seeds 101,202] [--langs python,js] [--n 4] [--rollouts 1] [--substrate real]``
(``--substrate real``: the same table on tasks planted into vendored open-source files).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from typing import Any

POLICIES = (
    "expert",
    "own-prompts",
    "per-file",
    "serial",
    "stock-filter",
    "expert-unchecked",
    "half",
    "regex-only",
    "regex-audit",
    "ignore-workers",
    "lazy",
    "no-delegation",
    # Issue 19's coverage routes and honest formats (rl/policies/routes_coverage.py).
    "shuffled-padding",
    "shuffled-quarter",
    "prefix-90",
    "windows-only",
    "fmt-numbers-right",
    "fmt-diff",
    "fmt-json",
    "fmt-json-lines",
    "fmt-xml-lines",
)
# Issue 19: the hard tier's policies side by side (``--sizes hard``; ``upper-bound`` is built
# per task from its ground truth), and the hard stream's gaming routes (ordinary tiers).
HARD_POLICIES = (
    "expert",
    "own-prompts",
    "random-subset",
    "pack-all",
    "routes-first",
    "upper-bound",
)
ROUTES = ("spray", "duplicates", "whole-file", "repeat-pad", "verbatim")
HARD_TARGETS: tuple[tuple[str, Any], ...] = (
    ("expert <= 0.75 on hard", lambda m: m["expert"] <= 0.75),
    ("upper-bound >= expert + 0.15", lambda m: m["upper-bound"] >= m["expert"] + 0.15),
    ("routes-first >= pack-all + 0.05", lambda m: m["routes-first"] >= m["pack-all"] + 0.05),
)
# Issue 19 item 2 (rl/policies/routes_oracle.py): checked when given with --policies.
ORACLE_ROUTES = (
    "say-ok",
    "summarise",
    "translate-comments",
    "count-lines",
    "list-names",
    "negated-audit",
    "template-matcher",
    "two-giant-prompts",
)

# (description, check) over the table's means for one size.
TARGETS: tuple[tuple[str, Any], ...] = (
    ("own-prompts >= 0.75", lambda m: m["own-prompts"] >= 0.75),
    ("ignore-workers <= 0.40", lambda m: m["ignore-workers"] <= 0.40),
    ("regex-only <= own-prompts - 0.25", lambda m: m["regex-only"] <= m["own-prompts"] - 0.25),
    ("stock-filter <= expert + 0.03", lambda m: m["stock-filter"] <= m["expert"] + 0.03),
    (
        "stock-filter <= expert-unchecked + 0.03",
        lambda m: m["stock-filter"] <= m["expert-unchecked"] + 0.03,
    ),
    ("half <= own-prompts - 0.15", lambda m: m["half"] <= m["own-prompts"] - 0.15),
    ("serial >= ignore-workers + 0.20", lambda m: m["serial"] >= m["ignore-workers"] + 0.20),
    ("expert >= 0.85", lambda m: m["expert"] >= 0.85),
    ("lazy <= 0.30", lambda m: m["lazy"] <= 0.30),
    ("no-delegation <= 0.30", lambda m: m["no-delegation"] <= 0.30),
    *(
        (f"{route} <= 0.40", lambda m, route=route: m[route] <= 0.40)
        for route in ("shuffled-padding", "shuffled-quarter", "prefix-90", "windows-only")
    ),
    *(
        (f"{fmt} >= 0.75 expert", lambda m, fmt=fmt: m[fmt] >= 0.75 * m["expert"])
        for fmt in ("fmt-numbers-right", "fmt-diff", "fmt-json", "fmt-json-lines", "fmt-xml-lines")
    ),
)


async def _measure(
    size: str,
    seeds: list[int],
    langs: list[str],
    n: int,
    rollouts: int,
    policies: list[str],
    concurrency: int,
    substrate: str = "synthetic",
) -> dict[str, list[float]]:
    from deeprepo import CoverageIndex, EpisodeConfig, SandboxConfig, make_policy
    from deeprepo.rl import TaskSpec, generate_tasks_in_memory, run_rollout, upper_bound_policy

    tasks = [
        t
        for s in seeds
        for lang in langs
        if size != "hard" or lang != "mixed"  # the hard tier is one language a task
        for t in generate_tasks_in_memory(
            TaskSpec(size, s, lang, substrate="synthetic" if size == "hard" else substrate), n
        )
    ]
    indexes = {t.id: CoverageIndex(t.files) for t in tasks}
    gate = asyncio.Semaphore(concurrency)
    out: dict[str, list[float]] = defaultdict(list)

    async def one(policy: str, task: Any, k: int) -> None:
        async with gate:
            o = await run_rollout(
                task,
                root=(
                    upper_bound_policy(task.ground_truth)
                    if policy == "upper-bound"
                    else make_policy(policy)
                ),
                rollout_index=k,
                episode_config=EpisodeConfig(max_turns=20),
                sandbox_config=SandboxConfig(mode="auto"),
                coverage_index=indexes[task.id],
            )
        out[policy].append(o.reward.total)

    await asyncio.gather(*(one(p, t, k) for p in policies for t in tasks for k in range(rollouts)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--seeds", default="101,202,303")
    ap.add_argument("--langs", default="python,js,mixed")
    ap.add_argument("--n", type=int, default=2, help="tasks per (size, seed, lang)")
    ap.add_argument("--rollouts", type=int, default=1)
    ap.add_argument(
        "--policies",
        default=",".join(POLICIES),
        help="comma-separated; 'hard' = the hard tier's five, 'routes' = issue 19's routes",
    )
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--substrate", default="synthetic", choices=("synthetic", "real"))
    args = ap.parse_args()
    sizes = args.sizes.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    langs = args.langs.split(",")
    named = {"hard": HARD_POLICIES, "routes": ROUTES}
    policies = [q for p in args.policies.split(",") for q in named.get(p, (p,))]
    table: dict[str, dict[str, list[float]]] = {}
    for size in sizes:
        t0 = time.perf_counter()
        table[size] = asyncio.run(
            _measure(
                size,
                seeds,
                langs,
                args.n,
                args.rollouts,
                policies,
                args.concurrency,
                args.substrate,
            )
        )
        print(f"# {size}: {time.perf_counter() - t0:.0f}s", flush=True)
    print(
        f"\nmean reward (sd) · {args.substrate} · seeds {args.seeds} · langs {args.langs} · "
        f"{args.n} tasks each · {args.rollouts} rollout(s)\n"
    )
    print("| policy | " + " | ".join(sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for p in policies:
        cells = []
        for size in sizes:
            v = table[size][p]
            cells.append(f"{statistics.mean(v):.3f} ({statistics.pstdev(v):.2f})")
        print(f"| `scripted/{p}` | " + " | ".join(cells) + " |")
    if set(policies) >= set(HARD_POLICIES) and "hard" in sizes:
        means = {p: statistics.mean(table["hard"][p]) for p in policies}
        for desc, check in HARD_TARGETS:
            print(f"- {desc}: {'ok' if check(means) else 'MISS'}")
    if set(policies) & set(ORACLE_ROUTES):
        print()
        for p in sorted(set(policies) & set(ORACLE_ROUTES)):
            marks = [
                f"{size} {'ok' if statistics.mean(table[size][p]) <= 0.40 else 'MISS'}"
                for size in sizes
            ]
            print(f"- {p} <= 0.40: " + ", ".join(marks))
    if set(policies) >= set(POLICIES):
        print()
        for desc, check in TARGETS:
            marks = []
            for size in sizes:
                means = {p: statistics.mean(table[size][p]) for p in policies}
                marks.append(f"{size} {'ok' if check(means) else 'MISS'}")
            print(f"- {desc}: " + ", ".join(marks))


if __name__ == "__main__":
    main()
