"""Benchmark the sandbox kernel against DESIGN §9: start ≤ 50 ms (2 MB codebase, warm pool),
exec round trip ≤ 2 ms.

For each isolation mode that works here (bwrap, process) it measures, as medians:

- start from the warm pool: ``Kernel.start`` with a 2 MB codebase when a pre-started child is
  idle (the pool is refilled between samples, outside the timing);
- cold start: the same without a pool (for reference, no target);
- exec round trip: ``kernel.exec("x = 1")``, parent to child and back;
- an ``llm_query`` round trip through a handler that answers at once (for reference).

Each median is also printed as a ``FIGURE`` line for ``benchmarks/ab.py``.

Run: ``.venv/bin/python benchmarks/bench_kernel.py [--mb 2] [--starts 20] [--execs 500]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from deeprepo import Kernel, KernelPool, SandboxConfig, bwrap_problem

TARGET_START_S = 0.050
TARGET_EXEC_S = 0.002
_LINE = "    result = compute_value(alpha, beta, gamma)  # a typical line of source code\n"


def make_payload(total_bytes: int, file_bytes: int = 4096) -> dict[str, Any]:
    """A codebase of ``total_bytes`` in files of ``file_bytes``, with tree and metadata."""
    body = (_LINE * (file_bytes // len(_LINE) + 1))[:file_bytes]
    n = max(1, total_bytes // file_bytes)
    files = {f"pkg{i // 100:03d}/mod_{i:05d}.py": f"# {i}\n" + body for i in range(n)}
    tree = "\n".join(sorted(files))
    metadata = {"files": n, "chars": sum(map(len, files.values())), "languages": {"python": n}}
    return {"codebase": files, "file_tree": tree, "metadata": metadata}


async def answer_now(batch: list[str], system: str | None) -> list[str]:
    return ["{}"] * len(batch)


async def bench_mode(
    mode: str, payload: dict[str, Any], starts: int, execs: int
) -> dict[str, float]:
    config = SandboxConfig(mode=mode)  # type: ignore[arg-type]
    out: dict[str, float] = {}
    with KernelPool(config, size=2) as pool:
        samples = []
        for _ in range(starts):
            pool.fill()
            await asyncio.sleep(0.3)  # a warm pool: its children have finished starting
            t0 = time.perf_counter()
            kernel = await Kernel.start(payload, answer_now, config, pool=pool)
            samples.append(time.perf_counter() - t0)
            await kernel.close()
        out["start_pool"] = statistics.median(samples)

        kernel = await Kernel.start(payload, answer_now, config, pool=pool)
        for _ in range(20):  # warm up
            await kernel.exec("x = 1")
        samples = []
        for _ in range(execs):
            t0 = time.perf_counter()
            await kernel.exec("x = 1")
            samples.append(time.perf_counter() - t0)
        out["exec"] = statistics.median(samples)
        samples = []
        for _ in range(execs // 5):
            t0 = time.perf_counter()
            await kernel.exec("r = llm_query('hi')")
            samples.append(time.perf_counter() - t0)
        out["exec_llm"] = statistics.median(samples)
        await kernel.close()

    samples = []
    for _ in range(max(3, starts // 4)):
        t0 = time.perf_counter()
        kernel = await Kernel.start(payload, answer_now, config)
        samples.append(time.perf_counter() - t0)
        await kernel.close()
    out["start_cold"] = statistics.median(samples)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=2.0, help="codebase size in MB")
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--execs", type=int, default=500)
    args = parser.parse_args()
    payload = make_payload(int(args.mb * 1024 * 1024))
    chars = sum(map(len, payload["codebase"].values()))
    print(f"codebase: {len(payload['codebase'])} files, {chars / 1e6:.2f} M chars")
    problem = bwrap_problem()
    modes = ["process"] if problem else ["bwrap", "process"]
    if problem:
        print(f"bwrap skipped: {problem}")
    for mode in modes:
        r = await bench_mode(mode, payload, args.starts, args.execs)
        print(f"\n[{mode}]")
        print(
            f"  start from warm pool : {r['start_pool'] * 1e3:7.2f} ms   "
            f"ratio to {TARGET_START_S * 1e3:g} ms target: {r['start_pool'] / TARGET_START_S:.2f}"
        )
        print(
            f"  exec round trip      : {r['exec'] * 1e3:7.3f} ms   "
            f"ratio to {TARGET_EXEC_S * 1e3:g} ms target: {r['exec'] / TARGET_EXEC_S:.2f}"
        )
        print(f"  exec with llm_query  : {r['exec_llm'] * 1e3:7.3f} ms   (reference)")
        print(f"  cold start (no pool) : {r['start_cold'] * 1e3:7.2f} ms   (reference)")
        for key in ("start_pool", "exec", "exec_llm", "start_cold"):
            print(f"FIGURE {key}_ms.{mode}={r[key] * 1e3:.4f} ms")


if __name__ == "__main__":
    asyncio.run(main())
