"""Benchmark: wall time of a 300-file expert run over its critical path (DESIGN §9).

The scripted expert's three replies are served as the *root* by the loopback server on the
Anthropic route and every sub-call goes to the OpenAI-compatible route, both with the same
latency per call (default 200 ms), through the real SDKs, the metered wrapper, the sandbox
kernel and the Episode loop. The critical path is the root calls plus ⌈sub-calls /
concurrency⌉ waves of sub-calls; the figure is wall time / critical path (target ≤ 1.10).

    python benchmarks/bench_critical_path.py [--files 300] [--latency 0.2] [--concurrency 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

from deeprepo import POLICIES, AnalyzeOptions, ChatRequest, Message, RunLimits, analyze, make_policy
from deeprepo.testing.loopback import spawn

TARGET = 1.10


def write_repo(root: Path, files: int) -> None:
    """``files`` small, distinct Python modules (one audit prompt each)."""
    for i in range(files):
        pkg = root / "app" / f"pkg{i // 25:02d}"
        pkg.mkdir(parents=True, exist_ok=True)
        body = "\n".join(
            [
                "import json",
                "",
                f"def handler_{i}(request):",
                f"    payload = json.loads(request.body or '{{}}')  # module {i}",
                f"    total_{i} = sum(int(v) for v in payload.get('values', []))",
                f"    return {{'module': {i}, 'total': total_{i}}}",
                "",
            ]
        )
        (pkg / f"mod_{i:03d}.py").write_text(body)


def expert_replies() -> list[str]:
    model = make_policy("expert")
    messages = [Message("user", "overview")]
    out: list[str] = []
    for _ in range(len(POLICIES["expert"])):
        text = asyncio.run(model.complete(ChatRequest(tuple(messages)))).text
        out.append(text)
        messages += [Message("assistant", text), Message("user", "output")]
    return out


def one_run(
    repo: Path, work: Path, latency: float, concurrency: int, n: int
) -> tuple[float, int, int]:
    replies = expert_replies()
    script = work / f"script-{n}.json"
    script.write_text(json.dumps({"anthropic": [{"text": r} for r in replies]}))
    proc, port = spawn(latency_s=latency, script=script, ttl_s=900)
    try:
        options = AnalyzeOptions(
            path=str(repo),
            root="anthropic/bench-root",
            root_base_url=f"http://127.0.0.1:{port}",
            sub="openrouter/bench/sub",
            sub_base_url=f"http://127.0.0.1:{port}/v1",
            limits=RunLimits(sub_concurrency=concurrency),
            cache=False,
            out_dir=work / f"run-{n}",
            env={"ANTHROPIC_API_KEY": "bench", "OPENROUTER_API_KEY": "bench"},
        )
        t0 = time.perf_counter()
        handle = asyncio.run(analyze(options))
        wall = time.perf_counter() - t0
    finally:
        proc.kill()
        proc.wait()
    r = handle.result
    if r.stop_reason != "answer_ready":
        raise RuntimeError(f"run stopped early: {r.stop_reason} {r.stop_detail}")
    return wall, r.num_turns, r.sub_calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        repo = work / "repo"
        write_repo(repo, args.files)
        # The first run in a process pays one-time costs (SDK imports, the bwrap probe);
        # it is shown but left out of the median.
        wall, turns, subs = one_run(repo, work, args.latency, args.concurrency, -1)
        print(f"warm-up: {wall:.2f}s wall (one-time imports and probes included)")
        walls: list[float] = []
        for n in range(args.runs):
            wall, turns, subs = one_run(repo, work, args.latency, args.concurrency, n)
            critical = (turns + math.ceil(subs / args.concurrency)) * args.latency
            walls.append(wall)
            print(f"run {n + 1}: {wall:.2f}s wall · {turns} root calls + {subs} sub-calls "
                  f"→ critical path {critical:.2f}s · ratio {wall / critical:.3f}")  # fmt: skip
        med = statistics.median(walls)
        print(f"\nmedian wall {med:.2f}s over a critical path of {critical:.2f}s: ratio "
              f"{med / critical:.3f} (target ≤ {TARGET}; {'meets' if med / critical <= TARGET else 'misses'})")  # fmt: skip


if __name__ == "__main__":
    main()
