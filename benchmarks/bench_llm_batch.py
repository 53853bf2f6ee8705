"""Benchmark: ``llm_batch`` throughput through the real HTTP clients, fast and SDK side by side.

Starts the loopback server as its own process (so its threads do not share our
GIL), then runs a :class:`SubDispatcher` batch through ``MeteredModel`` over each HTTP
client against it: ``fast`` (``FastOpenAIModel``, deeprepo's aiohttp client, the default)
and ``sdk`` (``OpenAICompatModel``, the official SDK; ``--backend`` picks its transport).
Rounds are interleaved (fast, sdk, sdk, fast, ...) so a noisy machine weighs on both alike;
each figure is the median of ``--repeats`` rounds, with the fast/sdk ratio. One prompt in
each batch is scripted to fail, to show that the batch still returns every other answer.

Per client: the batch from the dispatcher alone, the same batch as ``llm_batch(...)`` from
root code in the sandbox kernel (the RPC included), and this process's CPU per request
(``time.process_time`` over the round / prompts: the HTTP client, the metered wrapper
and the dispatcher; the server and the kernel are other processes).

Figures (DESIGN §9):

- ``small``: 100 prompts at 200 ms, concurrency 16. Ideal ⌈100/16⌉ × 0.2 s = 1.4 s;
  target wall time 2 s (ratio to target ≤ 1 passes).
- ``large``: 1,000 prompts at 50 ms, concurrency 64. Ideal 64 / 0.05 s = 1,280/s;
  target ≥ 85 % of it from the kernel with the fast client, ≤ 0.3 ms CPU a request.

``--scaffold`` also times the same batch over an in-process model that only sleeps,
which separates deeprepo's own overhead from the HTTP stack. ``--floor`` adds two lanes
to the same interleaved rounds with no deeprepo code (``http_floor.py``): bare aiohttp,
the floor of a client on aiohttp, and a minimal HTTP/1.1 client on ``asyncio.Protocol``,
what an own transport could reach.

    python benchmarks/bench_llm_batch.py [--mode small|large|all] [--repeats 5]
        [--clients fast,sdk] [--backend auto|httpx|aiohttp] [--scaffold] [--floor]
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deeprepo import (
    ERROR_PREFIX,
    ChatRequest,
    Completion,
    FastOpenAIModel,
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_floor import AiohttpFloor, RawFloor

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


@dataclass
class Lane:
    """One HTTP client under test: its metered model, dispatcher, kernel and figures."""

    label: str
    model: Any  # a MeteredModel, or a floor lane (http_floor.py)
    dispatcher: Any  # a SubDispatcher, or the same floor lane
    kernel: Any = None
    direct: list[tuple[float, float]] = field(default_factory=list)  # (wall s, cpu s)
    repl: list[tuple[float, float]] = field(default_factory=list)
    out: list[str] = field(default_factory=list)
    repl_out: list[str] = field(default_factory=list)


def build(client: str, backend: str, port: int, case: Case) -> MeteredModel:
    spec = parse_model_spec("openrouter/minimax/minimax-m2.5", f"http://127.0.0.1:{port}/v1")
    inner: Any
    if client == "fast":
        inner = FastOpenAIModel(spec, "bench", max_connections=case.concurrency)
    else:
        inner = OpenAICompatModel(
            spec, "bench", http_backend=backend, max_connections=case.concurrency
        )
    return MeteredModel(inner, "sub", Ledger(), PriceTable.load(), concurrency=case.concurrency)


REPL_CELL = (
    "import json\nanswers = llm_batch(PROMPTS)\n"
    "print(json.dumps([a if a.startswith('[llm error]') else 'ok' for a in answers]))"
)


async def timed(coro: Any) -> tuple[Any, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    got = await coro
    return got, time.perf_counter() - t0, time.process_time() - c0


async def run_lanes(lanes: list[Lane], case: Case, repeats: int, repl: bool) -> None:
    """Warm each lane, then interleave rounds: the order flips every round."""
    from deeprepo import Kernel, SandboxConfig

    prompts = prompts_for(case)
    payload = {"codebase": {"bench.py": "x = 1\n"}, "file_tree": "bench.py", "metadata": {}}
    try:
        for lane in lanes:
            await lane.dispatcher.batch(prompts[: case.concurrency])  # warm the pool
            if repl and isinstance(lane.dispatcher, SubDispatcher):
                lane.kernel = await Kernel.start(
                    payload, lane.dispatcher.batch, SandboxConfig(cell_timeout_s=120)
                )
                await lane.kernel.exec(f"PROMPTS = {prompts!r}")
        for r in range(repeats):
            for lane in lanes if r % 2 == 0 else lanes[::-1]:
                lane.out, wall, cpu = await timed(lane.dispatcher.batch(prompts))
                lane.direct.append((wall, cpu))
                if lane.kernel is not None:
                    result, wall, cpu = await timed(lane.kernel.exec(REPL_CELL))
                    lane.repl.append((wall, cpu))
                    lane.repl_out = json.loads(record_lines(result.output)[-1])
    finally:
        for lane in lanes:
            if lane.kernel is not None:
                await lane.kernel.close()
            await lane.model.aclose()


def report(case: Case, label: str, runs: list[tuple[float, float]], out: list[str]) -> float:
    """Print one lane's figures; returns its median wall time."""
    times = [w for w, _ in runs]
    med = statistics.median(times)
    cpu_ms = statistics.median(c for _, c in runs) / case.prompts * 1000
    errors = [o for o in out if o.startswith(ERROR_PREFIX)]
    print(f"  [{label}] runs: {' '.join(f'{t:.3f}' for t in times)} s; median {med:.3f} s")
    print(f"  [{label}] ideal {case.ideal_s:.3f} s; efficiency vs ideal {case.ideal_s / med:.0%}")
    print(f"  [{label}] CPU in this process: {cpu_ms:.3f} ms a request (median)")
    if case.name == "small":
        print(f"  [{label}] target 2.000 s -> ratio to target {med / 2.0:.2f} (<= 1.00 passes)")
    else:
        rate = case.prompts / med
        ideal_rate = case.concurrency / case.latency_s
        print(
            f"  [{label}] throughput {rate:,.0f}/s vs ideal {ideal_rate:,.0f}/s -> "
            f"{rate / ideal_rate:.0%} (target >= 85% from the kernel)"
        )
    print(
        f"  [{label}] answers {len(out) - len(errors)}, errors {len(errors)}: {errors[0] if errors else '-'}"
    )
    return med


def compare(case: Case, lanes: list[Lane], pick: str) -> None:
    """fast/sdk ratios of the medians: throughput (>1 is faster) and CPU a request."""
    by = {lane.label.split("/")[0]: getattr(lane, pick) for lane in lanes}
    if "fast" not in by or "sdk" not in by:
        return
    fast, sdk = by["fast"], by["sdk"]
    speed = statistics.median(w for w, _ in sdk) / statistics.median(w for w, _ in fast)
    cpu = statistics.median(c for _, c in fast) / statistics.median(c for _, c in sdk)
    print(f"  [{pick}] fast/sdk: throughput x{speed:.2f}, CPU a request x{cpu:.2f}")


def bench(
    case: Case,
    repeats: int,
    clients: list[str],
    backend: str,
    scaffold: bool,
    script: Path,
    floor: bool = False,
) -> None:
    print(
        f"llm_batch: {case.prompts} prompts @ {case.latency_s * 1000:.0f} ms, "
        f"concurrency {case.concurrency}, {repeats} interleaved rounds"
    )
    proc, port = spawn(latency_s=case.latency_s, script=script)
    try:
        lanes = []
        for client in clients:
            model = build(client, backend, port, case)
            label = "fast" if client == "fast" else f"sdk/{backend}"
            lanes.append(Lane(label, model, SubDispatcher(model)))
        if floor:
            for label, kind in (("floor aiohttp", AiohttpFloor), ("floor raw", RawFloor)):
                lane_model = kind(port, case.concurrency)
                lanes.append(Lane(label, lane_model, lane_model))
        asyncio.run(run_lanes(lanes, case, repeats, repl=True))
        for lane in lanes:
            if not isinstance(lane.dispatcher, SubDispatcher):
                report(case, lane.label, lane.direct, lane.out)
                continue
            report(case, f"{lane.label} dispatcher", lane.direct, lane.out)
            report(case, f"{lane.label} repl llm_batch", lane.repl, lane.repl_out)
            row = lane.model.ledger.rows()[0]
            print(
                f"  [{lane.label}] ledger: {row.calls} billed calls, "
                f"{row.failed_requests} failed requests, {row.usage.input_tokens} input tokens"
            )
        compare(case, lanes, "direct")
        compare(case, lanes, "repl")
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
        lane = Lane("scaffold only", sleepy, SubDispatcher(sleepy))
        asyncio.run(run_lanes([lane], case, repeats, repl=False))
        report(case, "scaffold only", lane.direct, lane.out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--mode", choices=["small", "large", "all"], default="all")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--clients", default="fast,sdk", help="comma-separated: fast, sdk (default both)"
    )
    p.add_argument(
        "--backend",
        choices=["auto", "httpx", "aiohttp"],
        default="auto",
        help="the SDK client's transport",
    )
    p.add_argument(
        "--scaffold", action="store_true", help="also time an in-process model (no HTTP)"
    )
    p.add_argument(
        "--floor",
        action="store_true",
        help="also time bare aiohttp and a minimal HTTP/1.1 client (no deeprepo code)",
    )
    args = p.parse_args(argv)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if not clients or set(clients) - {"fast", "sdk"}:
        p.error("--clients takes fast, sdk or fast,sdk")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        rule = {
            "contains": FAIL_MARK,
            "reply": {"status": 400, "error_message": "scripted failure"},
        }
        script.write_text(json.dumps({"rules": [rule]}))
        for name in ("small", "large") if args.mode == "all" else (args.mode,):
            bench(
                CASES[name], args.repeats, clients, args.backend, args.scaffold, script, args.floor
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
