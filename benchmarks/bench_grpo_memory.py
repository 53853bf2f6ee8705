"""Peak memory of one GRPO step, the whole step in one pass vs micro-batches (issue 12).

The H100 run of ``configs/gpu-qwen2.5-coder-0.5b.toml`` ran out of memory because all 128
rollouts of a step went through one forward pass. ``[grpo] micro_batch_size`` makes TRL take
them a few at a time; this measures what that saves, on CPU, with the tiny model
(``train/tiny.py``, 4,096-token vocabulary) and long rollouts.

Each measurement is a fresh process (peak RSS only grows within one): it builds TRL's
GRPOTrainer exactly as ``deeprepo train grpo`` does (``deeprepo.rl.train.grpo.build_trainer``)
and runs one optimizer step on ``--rollouts`` rollouts of ``--prompt`` + ``--length``
tokens, then reports its peak RSS (``ru_maxrss``) and its RSS before ``train()``. The
rollouts are synthetic token sequences (model turns and environment turns alternating,
rewards that differ inside each group): what a step's memory depends on is how many
tokens go through a pass, not what they say, and running real episodes to that length
would take minutes per measurement. Configurations alternate run by run; the table shows
medians.

Run: ``.venv/bin/python benchmarks/bench_grpo_memory.py [--rollouts 4,8,16] [--group 4]
[--length 4096] [--prompt 256] [--micro 1] [--runs 3] [--checkpointing] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from deeprepo import record_lines


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(opts: argparse.Namespace) -> dict[str, Any]:
    """One measurement: one GRPO step in this process."""
    import random

    import torch

    torch.set_num_threads(1)
    from deeprepo.rl import (
        PART_METRICS,
        EpisodeSection,
        GrpoSection,
        TrainConfig,
        build_trainer,
        import_train_stack,
        library_warnings_off,
        load_policy,
        quiet,
    )

    import_train_stack()
    prompts_per_step = opts.rollouts // opts.group
    config = TrainConfig(
        output_dir=opts.out,
        threads=1,
        episode=EpisodeSection(max_new_tokens=256, max_context_tokens=opts.prompt + opts.length),
        grpo=GrpoSection(
            group_size=opts.group,
            prompts_per_step=prompts_per_step,
            steps=1,
            micro_batch_size=opts.micro or None,
            gradient_checkpointing=opts.checkpointing,
        ),
    )
    model, tokenizer = load_policy(Path(opts.model), config)
    vocab = len(tokenizer)
    calls = []

    def rollouts(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        rng = random.Random(0)
        calls.append(len(prompts))
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "env_mask": []}
        for _ in prompts:
            out["prompt_ids"].append([rng.randrange(5, vocab) for _ in range(opts.prompt)])
            out["completion_ids"].append([rng.randrange(5, vocab) for _ in range(opts.length)])
            # Turns of 192 model tokens then 64 environment tokens.
            out["env_mask"].append([1 if i % 256 < 192 else 0 for i in range(opts.length)])
        out["logprobs"] = [[0.0] * opts.length for _ in prompts]
        out["deeprepo_reward"] = [rng.random() for _ in prompts]
        out["format_reward"] = [0.0 for _ in prompts]
        for name in PART_METRICS:
            out[name] = [0.0 for _ in prompts]
        return out

    rows = [{"prompt": f"task-{i}"} for i in range(prompts_per_step)]
    with library_warnings_off():
        trainer = build_trainer(config, model, tokenizer, rollouts, rows)
        quiet(trainer)
        baseline = _rss_mib()
        started = time.perf_counter()
        trainer.train()
    logs = [h for h in trainer.state.log_history if "grad_norm" in h]
    return {
        "micro_batch": config.grpo.micro_batch if config.grpo else 0,
        "accumulation_steps": config.grpo.accumulation_steps if config.grpo else 0,
        "optimizer_steps": int(trainer.state.global_step),
        "rollout_calls": calls,
        "grad_norm": float(logs[0]["grad_norm"]) if logs else None,
        "baseline_mib": round(baseline, 1),
        "peak_mib": round(_peak_mib(), 1),
        "train_seconds": round(time.perf_counter() - started, 2),
    }


def _measure(opts: argparse.Namespace, model: Path, tmp: Path, rollouts: int) -> dict[str, Any]:
    settings = {"one pass": 0, f"micro-batch {opts.micro}": opts.micro}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
    for run in range(opts.runs):
        for name, micro in settings.items():
            cmd = [
                sys.executable, __file__, "--child", "--model", str(model),
                "--out", str(tmp / f"out-{rollouts}-{run}-{micro}"),
                "--rollouts", str(rollouts), "--group", str(opts.group),
                "--length", str(opts.length), "--prompt", str(opts.prompt),
                "--micro", str(micro),
            ] + (["--checkpointing"] if opts.checkpointing else [])  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
                raise RuntimeError(f"{rollouts} rollouts, {name}, run {run + 1}: {tail[0]}")
            row = json.loads(record_lines(proc.stdout)[-1])
            results[name].append(row)
            print(
                f"{rollouts} rollouts, {name}, run {run + 1}/{opts.runs}: peak "
                f"{row['peak_mib']:.0f} MiB (before train {row['baseline_mib']:.0f}), "
                f"{row['train_seconds']:.1f}s",
                file=sys.stderr,
            )

    def med(name: str, key: str) -> float:
        return float(statistics.median(float(r[key]) for r in results[name]))

    out: dict[str, Any] = {"rollouts": rollouts, "settings": {}}
    for name in settings:
        first = results[name][0]
        out["settings"][name] = {
            "micro_batch": first["micro_batch"],
            "accumulation_steps": first["accumulation_steps"],
            "optimizer_steps": first["optimizer_steps"],
            "rollout_calls": first["rollout_calls"],
            "grad_norm": first["grad_norm"],
            "peak_mib_median": med(name, "peak_mib"),
            "step_mib_median": med(name, "peak_mib") - med(name, "baseline_mib"),
            "train_seconds_median": med(name, "train_seconds"),
            "peak_mib_all": [r["peak_mib"] for r in results[name]],
        }
    full, small = (out["settings"][n] for n in settings)
    out["peak_ratio"] = round(small["peak_mib_median"] / full["peak_mib_median"], 3)
    out["step_ratio"] = (
        round(small["step_mib_median"] / full["step_mib_median"], 3)
        if full["step_mib_median"] > 0
        else None
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rollouts", default="4,8,16", help="rollouts per step, a comma list (default 4,8,16)"
    )
    parser.add_argument("--group", type=int, default=4, help="rollouts per task (default 4)")
    parser.add_argument("--length", type=int, default=4096, help="completion tokens a rollout")
    parser.add_argument("--prompt", type=int, default=256, help="prompt tokens a rollout")
    parser.add_argument("--micro", type=int, default=1, help="the small micro-batch (default 1)")
    parser.add_argument("--runs", type=int, default=3, help="measurements per setting")
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing on")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        opts.rollouts = int(opts.rollouts)
        print(json.dumps(child(opts)))
        return 0
    try:
        counts = [int(x) for x in str(opts.rollouts).split(",") if x.strip()]
    except ValueError:
        parser.error(f"--rollouts takes whole numbers separated by commas, not {opts.rollouts!r}")
    if not counts or opts.runs < 1 or any(n % opts.group or n % opts.micro for n in counts):
        parser.error("--group and --micro must divide every --rollouts count; --runs at least 1")

    from deeprepo.rl import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="bench-grpo-mem-") as tmp:
        model = build_tiny_model(Path(tmp) / "model")
        try:
            rows = [_measure(opts, model, Path(tmp), n) for n in counts]
        except RuntimeError as exc:
            print(f"bench_grpo_memory: a measurement failed: {exc}", file=sys.stderr)
            return 1
    summary = {
        "tokens_per_rollout": opts.prompt + opts.length,
        "group": opts.group,
        "micro": opts.micro,
        "gradient_checkpointing": opts.checkpointing,
        "runs": opts.runs,
        "rows": rows,
    }
    if opts.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(
        f"One GRPO step, tiny model, rollouts of {opts.prompt} + {opts.length} tokens "
        f"({opts.group} a task), CPU, 1 thread, median of {opts.runs} fresh processes"
        f"{', gradient checkpointing' if opts.checkpointing else ''}:"
    )
    print(
        f"{'rollouts':>8}  {'setting':<15} {'passes':>6} {'peak RSS MiB':>13} "
        f"{'above start':>11} {'seconds':>8}  grad_norm"
    )
    for row in rows:
        for name, s in row["settings"].items():
            print(
                f"{row['rollouts']:>8}  {name:<15} {s['accumulation_steps']:>6} "
                f"{s['peak_mib_median']:>13.0f} {s['step_mib_median']:>11.0f} "
                f"{s['train_seconds_median']:>8.1f}  {s['grad_norm']:.6g}"
            )
        step = row["step_ratio"]
        print(
            f"{'':>8}  peak ratio {row['peak_ratio']:.3f}, above-start ratio "
            f"{step if step is not None else '-'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
