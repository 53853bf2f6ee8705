"""The tells table: how well each field of an ``oracle`` finding predicts whether it is true.

A scripted root audits generated tasks through the real Episode with the oracle
worker (its false-finding rate raised, so there are enough false findings to measure) and
records what the workers report, unchecked (``--policy``, default ``own-prompts``; the
expert checks doubtful findings with short re-queries, which drops most false ones before
they are recorded); each recorded finding is labelled true or false by the
grader. For each field, a detector learns P(true | value)
on half of the findings (split by task) and scores the other half: balanced accuracy and
AUC, where 0.5 is chance. A field that predicted the label well would let a root filter
the worker's false findings without reading the code (issue 9's "stock text" route).

Run: ``.venv/bin/python benchmarks/bench_oracle_tells.py [--sizes small,medium]
[--seeds 1,2,3] [--n 6] [--false-rate 20] [--policy own-prompts]``
"""

from __future__ import annotations

import argparse
import re
import zlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from deeprepo.rl import family_hint

Feature = Callable[[dict[str, Any], str], str]

FEATURES: dict[str, Feature] = {
    "title": lambda f, line: f["title"],
    "detail (code quote removed)": lambda f, line: re.sub(r"`[^`]*`", "`…`", f["detail"]),
    "fix": lambda f, line: f["fix"],
    "kind": lambda f, line: f["kind"],
    "cwe": lambda f, line: str(f["cwe"]),
    "severity": lambda f, line: f["severity"],
    "title starts 'Possible'": lambda f, line: str(f["title"].startswith("Possible")),
    "detail length (10s)": lambda f, line: str(len(f["detail"]) // 10),
    "range length": lambda f, line: str(f["end_line"] - f["line"]),
    "flagged line uses a risky API": lambda f, line: str(family_hint(line) is not None),
}


def _collect(
    sizes: list[str],
    seeds: list[int],
    langs: list[str],
    n: int,
    false_rate: float,
    policy: str = "own-prompts",
) -> list[tuple[str, bool, dict[str, Any], str]]:
    """(task id, is true, finding as a dict, flagged line's text) for every finding the
    scripted ``policy`` recorded from the oracle's replies."""
    import asyncio

    from deeprepo import EpisodeConfig, grade, make_policy, parse_ground_truth
    from deeprepo.rl import TaskSpec, generate_tasks_in_memory, run_rollout

    tasks = [
        t
        for size in sizes
        for seed in seeds
        for lang in langs
        for t in generate_tasks_in_memory(TaskSpec(size, seed, lang), n)
    ]

    async def go() -> list[Any]:
        gate = asyncio.Semaphore(8)

        async def one(task: Any) -> Any:
            async with gate:
                return await run_rollout(
                    task,
                    root=make_policy(policy),
                    episode_config=EpisodeConfig(max_turns=20),
                    oracle_options={"false_rate": false_rate},
                )

        return list(await asyncio.gather(*(one(t) for t in tasks)))

    rows: list[tuple[str, bool, dict[str, Any], str]] = []
    for task, outcome in zip(tasks, asyncio.run(go()), strict=True):
        findings = outcome.result.findings
        score = grade(findings, parse_ground_truth(task.ground_truth))
        true_ids = {id(m.finding) for m in score.matches}
        for g in findings:
            text = task.files.get(g.file, "").split("\n")
            line = text[g.start_line - 1] if 0 < g.start_line <= len(text) else ""
            f = {
                "title": g.title,
                "detail": g.detail,
                "fix": g.fix,
                "kind": g.kind,
                "cwe": g.cwe,
                "severity": g.severity,
                "line": g.start_line,
                "end_line": g.end_line,
            }
            rows.append((task.id, id(g) in true_ids, f, line))
    return rows


def _auc(scored: list[tuple[float, bool]]) -> float:
    pos = [s for s, y in scored if y]
    neg = [s for s, y in scored if not y]
    if not pos or not neg:
        return 0.5
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="small,medium")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--langs", default="python,js,mixed")
    ap.add_argument("--n", type=int, default=6, help="tasks per (size, seed, lang)")
    ap.add_argument("--false-rate", type=float, default=20.0, help="per 1,000 lines shown")
    ap.add_argument("--policy", default="own-prompts", help="a root that records unchecked")
    args = ap.parse_args()
    rows = _collect(
        args.sizes.split(","),
        [int(s) for s in args.seeds.split(",")],
        args.langs.split(","),
        args.n,
        args.false_rate,
        args.policy,
    )
    n_true = sum(1 for _, y, _, _ in rows if y)
    print(
        f"{len(rows)} findings ({n_true} true, {len(rows) - n_true} false) · sizes {args.sizes} · "
        f"seeds {args.seeds} · false rate {args.false_rate:g}/1k lines\n"
    )
    print("| field | values | balanced accuracy | AUC |")
    print("|---|---|---|---|")
    for name, feature in FEATURES.items():
        train: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        test: list[tuple[str, bool]] = []
        for task, label, f, line in rows:
            value = feature(f, line)
            if zlib.crc32(task.encode()) % 2:
                train[value][label] += 1
            else:
                test.append((value, label))
        prior = (sum(t[1] for t in train.values()) + 1) / (sum(sum(t) for t in train.values()) + 2)

        def p_true(v: str, train: dict[str, list[int]] = train, prior: float = prior) -> float:
            neg, pos = train.get(v, [0, 0])
            return (pos + 2 * prior) / (pos + neg + 2)  # smoothed towards the prior

        scored = [(p_true(v), y) for v, y in test]
        tp = sum(1 for s, y in scored if y and s > prior)
        tn = sum(1 for s, y in scored if not y and s <= prior)
        pos = sum(1 for _, y in scored if y) or 1
        neg = sum(1 for _, y in scored if not y) or 1
        bal = (tp / pos + tn / neg) / 2
        values = len({feature(f, line) for _, _, f, line in rows})
        print(f"| {name} | {values} | {bal:.3f} | {_auc(scored):.3f} |")


if __name__ == "__main__":
    main()
