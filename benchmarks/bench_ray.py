"""``deeprepo eval`` on Ray against the local pool, and what one Ray task costs.

One local Ray instance (loopback only, ``--cpus`` CPUs, its files in a temporary folder)
serves the whole run, as a cluster would serve many evaluations; starting it is timed
apart (``ray_start_s``). Then ``--runs`` rounds, each running the same evaluation (the
same tasks, seeds and rollouts: ``--model`` + the oracle on ``--tasks`` small tasks x
``--rollouts``) once on the local executor and once on Ray, the side that goes first
alternating, and checks that both gave the same rewards. Rollouts/s is the evaluation's
rollouts over its wall time (medians); the CPU Ray's daemons (GCS, raylet) spend during
the Ray runs is reported per rollout, and so is the driver's (this process): what bounds
how many rollouts/s one driver can take in from a cluster. Last, ``--trivial`` no-op Ray tasks, one at a time
(the round trip of one task) and all at once (the scheduler's throughput).

Run: ``.venv/bin/python benchmarks/bench_ray.py [--tasks 20] [--rollouts 2] [--runs 3]``
(needs ``pip install 'deeprepo[ray]'``). Prints ``FIGURE`` lines for ``benchmarks/ab.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


async def _eval(executor: str, out: Path, args: argparse.Namespace) -> tuple[float, list[Any]]:
    from deeprepo.rl import EvalOptions, run_eval

    options = EvalOptions(
        model=args.model,
        n=args.tasks,
        rollouts=args.rollouts,
        generate=f"small:seed={args.seed}",
        out_dir=out,
        concurrency=args.cpus,
        run_log=False,
        executor=executor,
    )
    t0 = time.perf_counter()
    run = await run_eval(options)
    wall = time.perf_counter() - t0
    if run.failed:
        raise SystemExit(f"{executor}: {len(run.failed)} rollouts failed: {run.first_error}")
    return wall, [(r.example_id, r.rollout, r.reward) for r in run.results]


def _daemon_cpu_s() -> float:
    """CPU seconds used so far by this process's Ray daemons (gcs_server, raylet)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        if name in ("gcs_server", "raylet") and int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def _trivial(n: int) -> tuple[float, float]:
    """(ms a task, one at a time; tasks/s, all in flight at once)."""
    from deeprepo.rl import RayExecutor

    executor = RayExecutor()  # uses the Ray this process started
    await executor.run(abs, -1)  # a worker is warm
    t0 = time.perf_counter()
    for _ in range(n):
        await executor.run(abs, -1)
    one = (time.perf_counter() - t0) / n * 1000
    t0 = time.perf_counter()
    await asyncio.gather(*(executor.run(abs, -i) for i in range(n)))
    many = n / (time.perf_counter() - t0)
    return one, many


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="scripted/expert")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--cpus", type=int, default=2, help="Ray CPUs and eval concurrency")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--trivial", type=int, default=200)
    args = parser.parse_args()

    from deeprepo.rl import ray_session

    planned = args.tasks * args.rollouts
    # A short folder: Ray's AF_UNIX socket paths under it must stay under ~107 bytes.
    with tempfile.TemporaryDirectory(prefix="drb-", dir="/tmp") as tmp:
        t0 = time.perf_counter()
        with ray_session(num_cpus=args.cpus, temp_dir=Path(tmp) / "r"):
            start = time.perf_counter() - t0
            walls: dict[str, list[float]] = {"local": [], "ray": []}
            rewards: dict[str, list[Any]] = {}
            daemons = {"local": 0.0, "ray": 0.0}
            driver = {"local": 0.0, "ray": 0.0}  # this process's CPU: all of it, locally
            for k in range(args.runs):
                order = ("local", "ray") if k % 2 == 0 else ("ray", "local")
                for side in order:
                    out = Path(tmp) / f"{side}-{k}"
                    cpu, mine = _daemon_cpu_s(), time.process_time()
                    wall, got = asyncio.run(_eval(side, out, args))
                    daemons[side] += _daemon_cpu_s() - cpu
                    driver[side] += time.process_time() - mine
                    walls[side].append(wall)
                    rewards.setdefault(side, got)
                    print(f"run {k + 1} {side:5}: {planned} rollouts in {wall:.2f} s", flush=True)
            if rewards["local"] != rewards["ray"]:
                raise SystemExit("Ray and local gave different rewards: " + json.dumps(rewards))
            one, many = asyncio.run(_trivial(args.trivial))
    local = planned / statistics.median(walls["local"])
    ray = planned / statistics.median(walls["ray"])
    print(f"same rewards on both ({planned} rollouts, {args.model} + oracle, seed {args.seed})")
    print(f"FIGURE eval_local_rollouts_per_s={local:.2f} rollouts/s higher")
    print(f"FIGURE eval_ray_rollouts_per_s={ray:.2f} rollouts/s higher")
    print(f"FIGURE eval_ray_vs_local={ray / local:.3f} x higher")
    print(f"FIGURE ray_start_s={start:.2f} s lower")
    per = daemons["ray"] / (planned * args.runs) * 1000
    print(f"FIGURE ray_daemon_cpu_ms_per_rollout={per:.1f} ms lower")
    per = driver["ray"] / (planned * args.runs) * 1000
    print(f"FIGURE ray_driver_cpu_ms_per_rollout={per:.1f} ms lower")
    print(f"FIGURE ray_task_roundtrip_ms={one:.2f} ms lower")
    print(f"FIGURE ray_trivial_tasks_per_s={many:.0f} tasks/s higher")


if __name__ == "__main__":
    main()
