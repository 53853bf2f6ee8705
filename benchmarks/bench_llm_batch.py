"""Benchmark: ``llm_batch`` throughput through the real OpenAI-compatible adapter.

Starts the loopback server as its own process (so its threads do not share our
GIL), then runs a :class:`SubDispatcher` batch through ``MeteredModel`` +
``OpenAICompatModel`` (the official SDK) against it. One prompt in each batch is
scripted to fail, to show that the batch still returns every other answer.

Figures (DESIGN §9):

- ``small``: 100 prompts at 200 ms, concurrency 16. Ideal ⌈100/16⌉ × 0.2 s = 1.4 s;
  target wall time 2 s (ratio to target ≤ 1 passes).
- ``large``: 1,000 prompts at 50 ms, concurrency 64. Ideal 64 / 0.05 s = 1,280/s;
  target ≥ 80 % of it.

``--scaffold`` also times the same batch over an in-process model that only sleeps,
which separates deeprepo's own overhead from the SDK's HTTP stack.

    python benchmarks/bench_llm_batch.py [--mode small|large|all] [--repeats 3] [--backend auto]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from deeprepo import (
    ERROR_PREFIX,
    ChatRequest,
    Completion,
    Ledger,
    MeteredModel,
    OpenAICompatModel,
    PriceTable,
    SubDispatcher,
    Usage,
    parse_model_spec,
    record_lines,
)
from deeprepo.testing.loopback import spawn

FAIL_MARK = "PLEASE-FAIL-THIS-ITEM"


@dataclass(frozen=True)
class Case:
    name: str
    prompts: int
    latency_s: float
    concurrency: int

    @property
    def ideal_s(self) -> float:
        return math.ceil(self.prompts / self.concurrency) * self.latency_s


CASES = {
    "small": Case("small", 100, 0.2, 16),
    "large": Case("large", 1000, 0.05, 64),
}


class SleepyModel:
    """An in-process model that only waits: the scaffold's own overhead, no HTTP."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    @property
    def name(self) -> str:
        return "openai/sleepy"

    async def complete(self, request: ChatRequest) -> Completion:
        await asyncio.sleep(self.latency_s)
        if FAIL_MARK in request.messages[-1].content:
            from deeprepo import ProviderError

            raise ProviderError("scripted failure", retryable=False, status=400)
        return Completion('{"findings": []}', Usage(10, 5))

    async def aclose(self) -> None:
        return None


def prompts_for(case: Case) -> list[str]:
    # Realistic size: a file-audit prompt is a few KB.
    body = "def handler(request):\n    return query(request.args['id'])\n" * 40
    out = [f"Audit file {i}.py\n{body}" for i in range(case.prompts)]
    out[case.prompts // 2] = f"Audit file broken.py {FAIL_MARK}\n{body}"
    return out


async def run_batches(
    model: MeteredModel, case: Case, repeats: int
) -> tuple[list[float], list[str]]:
    dispatcher = SubDispatcher(model)
    prompts = prompts_for(case)
    await dispatcher.batch(prompts[: case.concurrency])  # warm the connection pool
    times: list[float] = []
    out: list[str] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = await dispatcher.batch(prompts)
        times.append(time.perf_counter() - t0)
    return times, out


async def run_batches_in_repl(
    model: MeteredModel, case: Case, repeats: int
) -> tuple[list[float], list[str]]:
    """The same batch called as ``llm_batch(...)`` from root code in the sandbox kernel,
    so the figure includes the RPC between the kernel and the parent."""
    from deeprepo import Kernel, SandboxConfig

    dispatcher = SubDispatcher(model)
    prompts = prompts_for(case)
    payload = {"codebase": {"bench.py": "x = 1\n"}, "file_tree": "bench.py", "metadata": {}}
    await dispatcher.batch(prompts[: case.concurrency])
    times: list[float] = []
    out: list[str] = []
    async with await Kernel.start(
        payload, dispatcher.batch, SandboxConfig(cell_timeout_s=120)
    ) as kernel:
        await kernel.exec(f"PROMPTS = {prompts!r}")
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = await kernel.exec(
                "import json\nanswers = llm_batch(PROMPTS)\n"
                "print(json.dumps([a if a.startswith('[llm error]') else 'ok' for a in answers]))"
            )
            times.append(time.perf_counter() - t0)
        out = json.loads(record_lines(result.output)[-1])
    return times, out


def report(case: Case, label: str, times: list[float], out: list[str]) -> float:
    med = statistics.median(times)
    errors = [o for o in out if o.startswith(ERROR_PREFIX)]
    print(f"  [{label}] runs: {' '.join(f'{t:.3f}' for t in times)} s; median {med:.3f} s")
    print(f"  [{label}] ideal {case.ideal_s:.3f} s; efficiency vs ideal {case.ideal_s / med:.0%}")
    if case.name == "small":
        print(f"  [{label}] target 2.000 s -> ratio to target {med / 2.0:.2f} (<= 1.00 passes)")
    else:
        rate = case.prompts / med
        ideal_rate = case.concurrency / case.latency_s
        print(
            f"  [{label}] throughput {rate:,.0f}/s vs ideal {ideal_rate:,.0f}/s -> "
            f"{rate / ideal_rate:.0%} (target >= 80%)"
        )
    print(
        f"  [{label}] answers {len(out) - len(errors)}, errors {len(errors)}: {errors[0] if errors else '-'}"
    )
    return med


def bench(case: Case, repeats: int, backend: str, scaffold: bool, script: Path) -> None:
    print(
        f"llm_batch: {case.prompts} prompts @ {case.latency_s * 1000:.0f} ms, "
        f"concurrency {case.concurrency}"
    )
    proc, port = spawn(latency_s=case.latency_s, script=script)
    try:
        spec = parse_model_spec("openrouter/minimax/minimax-m2.5", f"http://127.0.0.1:{port}/v1")
        inner = OpenAICompatModel(
            spec, "bench", http_backend=backend, max_connections=case.concurrency
        )
        model = MeteredModel(
            inner, "sub", Ledger(), PriceTable.load(), concurrency=case.concurrency
        )

        async def go() -> tuple[list[float], list[str]]:
            try:
                return await run_batches(model, case, repeats)
            finally:
                await model.aclose()

        times, out = asyncio.run(go())
        report(case, f"sdk/{backend}", times, out)

        async def go_repl() -> tuple[list[float], list[str]]:
            try:
                return await run_batches_in_repl(model, case, repeats)
            finally:
                await model.aclose()

        times, out = asyncio.run(go_repl())
        report(case, f"repl llm_batch/{backend}", times, out)
        row = model.ledger.rows()[0]
        print(
            f"  [sdk/{backend}] ledger: {row.calls} billed calls, {row.failed_requests} failed requests"
        )
    finally:
        proc.kill()
        proc.wait()
    if scaffold:
        sleepy = MeteredModel(
            SleepyModel(case.latency_s),
            "sub",
            Ledger(),
            PriceTable.load(),
            concurrency=case.concurrency,
        )
        times, out = asyncio.run(run_batches(sleepy, case, repeats))
        report(case, "scaffold only", times, out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--mode", choices=["small", "large", "all"], default="all")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--backend", choices=["auto", "httpx", "aiohttp"], default="auto")
    p.add_argument(
        "--scaffold", action="store_true", help="also time an in-process model (no HTTP)"
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        rule = {
            "contains": FAIL_MARK,
            "reply": {"status": 400, "error_message": "scripted failure"},
        }
        script.write_text(json.dumps({"rules": [rule]}))
        for name in ("small", "large") if args.mode == "all" else (args.mode,):
            bench(CASES[name], args.repeats, args.backend, args.scaffold, script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
