"""Benchmark RL rollouts against DESIGN §9: ``scripted/expert`` + ``oracle`` on small tasks,
2 cores, >= 10 rollouts/s.

Generates ``--tasks`` small tasks in memory, then runs ``--rollouts`` rollouts of each
(every one a full Episode in a sandbox kernel, scored by the reward) through
``env.rollout.run_rollout``, ``--concurrency`` at a time in each of ``--workers`` worker
processes, all pinned to ``--cores`` CPUs (kernel children inherit the pinning). Prints
rollouts/s (median of ``--runs``), its ratio to the target, and where one rollout's time
goes (kernel start, root turns, sub-calls, reward), so a miss says what limits it; the same as
``FIGURE`` lines for ``benchmarks/ab.py``.
``--profile`` adds a cProfile of one run's parent process.

Run: ``.venv/bin/python benchmarks/bench_rollouts.py [--tasks 16] [--rollouts 4] [--cores 2]``
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import multiprocessing as mp
import os
import pstats
import statistics
import time
from queue import Empty
from typing import Any

TARGET_PER_S = 10.0


def _pin(cores: int) -> list[int]:
    available = sorted(os.sched_getaffinity(0))
    chosen = available[:cores]
    os.sched_setaffinity(0, chosen)
    return chosen


def _tasks(n: int, seed: int, lang: str) -> list[Any]:
    from deeprepo.rl import TaskSpec, generate_tasks_in_memory

    return list(generate_tasks_in_memory(TaskSpec("small", seed=seed, lang=lang), n))


# Warm kernels per worker process (0: every rollout starts its kernel cold). Set by main()
# before the worker processes fork.
POOL_SIZE = 0


async def _run(
    tasks: list[Any], rollouts: int, concurrency: int, mode: str, phases: dict[str, float]
) -> int:
    from deeprepo import (
        CoverageIndex,
        EpisodeConfig,
        Kernel,
        KernelPool,
        SandboxConfig,
        make_policy,
    )
    from deeprepo.rl import run_rollout

    # Time the kernel's phases by wrapping the methods the rollout calls (no change to
    # behaviour); the rollout times its own scoring (``reward_seconds``).
    start, execute = Kernel.start, Kernel.exec

    async def timed_start(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await start(*a, **k)
        finally:
            phases["kernel_start"] += time.perf_counter() - t0

    async def timed_exec(self: Any, code: str) -> Any:
        t0 = time.perf_counter()
        try:
            return await execute(self, code)
        finally:
            phases["kernel_exec"] += time.perf_counter() - t0

    setattr(Kernel, "start", timed_start)  # noqa: B010 - patched for timing only
    setattr(Kernel, "exec", timed_exec)  # noqa: B010
    root = make_policy("expert")
    config = EpisodeConfig(max_turns=20)
    sandbox = SandboxConfig(mode=mode)  # type: ignore[arg-type,unused-ignore]
    indexes = {t.id: CoverageIndex(t.files) for t in tasks}
    pool = KernelPool(sandbox, size=POOL_SIZE) if POOL_SIZE else None
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one(task: Any, k: int) -> None:
        nonlocal done
        async with gate:
            t0 = time.perf_counter()
            out = await run_rollout(
                task,
                root=root,
                rollout_index=k,
                episode_config=config,
                sandbox_config=sandbox,
                coverage_index=indexes[task.id],
                pool=pool,
            )
            phases["rollout"] += time.perf_counter() - t0
            phases["reward"] += out.reward_seconds
            if out.result.stop_reason != "answer_ready":
                raise RuntimeError(f"{task.id}: {out.result.stop_reason} {out.result.stop_detail}")
            done += 1

    try:
        await asyncio.gather(*(one(t, k) for t in tasks for k in range(rollouts)))
    finally:
        if pool is not None:
            await pool.aclose()
        setattr(Kernel, "start", start)  # noqa: B010
        setattr(Kernel, "exec", execute)  # noqa: B010
    return done


def _worker(args: tuple[list[Any], int, int, str, Any, Any]) -> None:
    tasks, rollouts, concurrency, mode, queue, barrier = args
    phases: dict[str, float] = dict.fromkeys(
        ("kernel_start", "kernel_exec", "reward", "rollout"), 0.0
    )
    barrier.wait()
    t0 = time.perf_counter()
    done = asyncio.run(_run(tasks, rollouts, concurrency, mode, phases))
    queue.put((done, time.perf_counter() - t0, phases))


def one_run(
    tasks: list[Any], rollouts: int, workers: int, concurrency: int, mode: str
) -> tuple[float, int, dict[str, float]]:
    """Wall seconds, rollouts done, summed phase seconds."""
    ctx = mp.get_context("fork")
    queue, barrier = ctx.Queue(), ctx.Barrier(workers + 1)
    shares = [tasks[i::workers] for i in range(workers)]
    procs = [
        ctx.Process(target=_worker, args=((share, rollouts, concurrency, mode, queue, barrier),))
        for share in shares
    ]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    outs: list[Any] = []
    while len(outs) < len(procs):
        try:
            outs.append(queue.get(timeout=1.0))
        except Empty:
            # A worker that died (an exception, a kill) sends nothing: fail, never hang.
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                for p in procs:
                    p.kill()
                raise RuntimeError(f"a worker exited with {dead[0]}; see its traceback") from None
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    phases: dict[str, float] = {}
    for _, _, ph in outs:
        for k, v in ph.items():
            phases[k] = phases.get(k, 0.0) + v
    return wall, sum(d for d, _, _ in outs), phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--rollouts", type=int, default=4, help="rollouts per task")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="worker processes")
    ap.add_argument("--concurrency", type=int, default=8, help="rollouts at once per worker")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lang", default="python")
    ap.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "process"))
    ap.add_argument("--profile", action="store_true", help="cProfile one run in one process")
    ap.add_argument(
        "--pool",
        type=int,
        default=0,
        help="warm kernels per worker (0: none, every kernel starts cold)",
    )
    args = ap.parse_args()
    global POOL_SIZE
    POOL_SIZE = args.pool

    cores = _pin(args.cores)
    t0 = time.perf_counter()
    tasks = _tasks(args.tasks, 1, args.lang)
    gen_s = time.perf_counter() - t0
    files = statistics.mean(len(t.files) for t in tasks)
    from deeprepo import resolve_mode

    mode = resolve_mode(args.sandbox).mode
    print(f"cores {cores} · sandbox {mode} · {args.tasks} small {args.lang} tasks "
          f"({files:.1f} files avg, generated in {gen_s * 1000:.0f} ms) x {args.rollouts} rollouts · "
          f"{args.workers} workers x concurrency {args.concurrency} · kernel pool {POOL_SIZE}")  # fmt: skip
    _run_once = one_run(tasks[:2], 1, 1, 1, mode)  # warm-up: imports, page cache

    rates, last_phases, total = [], {}, 0
    for i in range(args.runs):
        wall, done, phases = one_run(tasks, args.rollouts, args.workers, args.concurrency, mode)
        rates.append(done / wall)
        last_phases, total = phases, done
        print(f"run {i + 1}: {done} rollouts in {wall:.2f}s = {done / wall:.1f}/s")
    rate = statistics.median(rates)
    print(f"\nrollouts/s (median of {args.runs}): {rate:.1f} · target >= {TARGET_PER_S:g}/s · "
          f"ratio {rate / TARGET_PER_S:.2f} ({'meets' if rate >= TARGET_PER_S else 'misses'} the target)")  # fmt: skip
    print(f"FIGURE rollouts_per_s={rate:.3f} 1/s higher")
    per = {k: v / max(total, 1) * 1000 for k, v in last_phases.items()}
    for phase in ("kernel_start", "kernel_exec", "reward"):
        print(f"FIGURE {phase}_ms={per[phase]:.2f} ms")
    print(
        "per rollout (ms, summed over concurrent rollouts, last run): "
        f"total {per['rollout']:.0f} = kernel start {per['kernel_start']:.0f} + "
        f"cells (root code incl. sub-calls) {per['kernel_exec']:.0f} + reward {per['reward']:.0f} + "
        f"other {per['rollout'] - per['kernel_start'] - per['kernel_exec'] - per['reward']:.0f}"
    )

    if args.profile:
        prof = cProfile.Profile()
        phases = dict.fromkeys(("kernel_start", "kernel_exec", "reward", "rollout"), 0.0)
        prof.enable()
        asyncio.run(_run(tasks, args.rollouts, args.concurrency, mode, phases))
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
        print(buf.getvalue())


if __name__ == "__main__":
    main()
