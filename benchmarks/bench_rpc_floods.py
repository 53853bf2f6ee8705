"""Peak memory of the parent while a cell floods the kernel's RPC pipe (issue 7, item 3).

Each flood runs in a fresh process: one ``Episode`` over the example repository, a
scripted root whose first cell floods and whose second calls ``set_answer``, the
built-in static worker, ``--max-sub-calls 2000`` (the CLI's default). The process's peak
RSS (``ru_maxrss``) is the figure; the target is 800 MB whatever the cell writes. The
kernel is a separate process, so its own memory is not counted.

Floods:

- ``baseline``: a cell that prints one line (the parent's own footprint);
- ``batch-2M``: ``llm_batch([''] * 2_000_000)`` through the stub;
- ``forged-unread``: requests of 10,000 prompts written straight onto the pipe, replies never read;
- ``forged-containers``: 8 MB request lines of ``[[],[],...]`` (the worst case for decoding);
- ``forged-overlong``: lines of 70 MB;
- ``forged-newlines``: 256 MB of empty lines;
- ``forged-result``: a result message with a 3 MB output, 3,000 findings and names of 1 MB.

Run: ``.venv/bin/python benchmarks/bench_rpc_floods.py [--only NAME ...]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from deeprepo import record_lines

ROOT = Path(__file__).resolve().parents[1]
TARGET_MB = 800
_FD = (  # the kernel's child -> parent pipe, as a cell finds it: its one write-only FIFO
    "import os, stat, sys, fcntl\n"
    "fd = next(f for f in range(3, 1024) if os.path.exists(f'/proc/self/fd/{f}')\n"
    "          and stat.S_ISFIFO(os.fstat(f).st_mode) and fcntl.fcntl(f, fcntl.F_GETFL) & 3 == 1)\n"
)

FLOODS: dict[str, str] = {
    "baseline": "print('hello')",
    "batch-2M": (
        "r = llm_batch([''] * 2_000_000)\n"
        "print(len(r), sum(not x.startswith('[llm error]') for x in r))\nprint(r[-1][:160])"
    ),
    "forged-unread": _FD
    + (
        'line = (json_line := \'{"type":"llm","id":7,"system":null,"prompts":[\' '
        "+ ','.join(['\"\"'] * 10_000) + ']}\\n').encode()\n"
        "sent = 0\nwhile True:\n    os.write(fd, line)\n    sent += 1"
    ),
    "forged-containers": _FD
    + (
        "body = b'[],' * (8 * 2**20 // 3 - 40)\n"
        'line = b\'{"type":"llm","id":7,"prompts":[\' + body[:-1] + b\']}\\n\'\n'
        "for _ in range(12):\n    os.write(fd, line)\nprint('sent', len(line))"
    ),
    "forged-overlong": _FD + "chunk = b'z' * 2**20\nfor _ in range(70):\n    os.write(fd, chunk)\n"
    "os.write(fd, b'\\n')\nprint('sent')",
    "forged-newlines": _FD
    + "chunk = b'\\n' * 2**20\nfor _ in range(256):\n    os.write(fd, chunk)\nprint('sent')",
    "forged-result": _FD
    + (
        "import json\ncell = int(sys._getframe(0).f_code.co_filename.strip('<>').split('-')[1])\n"
        "f = {'file': 'wsgi.py', 'line': 1, 'kind': 'bug', 'severity': 'low', 'title': 't', 'detail': 'd'}\n"
        "msg = {'type': 'result', 'id': cell, 'output': 'O' * 3_000_000, 'error': None,\n"
        "       'answer': {'content': '', 'ready': False}, 'findings': [f] * 3000,\n"
        "       'restored': [], 'user_vars': ['v' * 10**6] * 2, 'mark': False}\n"
        "os.write(fd, json.dumps(msg).encode() + b'\\n')\nimport time\ntime.sleep(1)"
    ),
}


def run_one(name: str) -> dict[str, object]:
    """Run one flood in this process; its figures."""
    from deeprepo import (
        Budget,
        ChatRequest,
        Completion,
        Episode,
        EpisodeConfig,
        Ledger,
        MeteredModel,
        PriceTable,
        SandboxConfig,
        SubDispatcher,
        Usage,
        load_codebase,
        make_static_worker,
    )

    fence = "```"
    replies = [
        f"{fence}python\n{FLOODS[name]}\n{fence}",
        f"{fence}python\nset_answer('# Report\\n\\ndone')\n{fence}",
    ]

    class Root:
        name = "bench/root"

        def __init__(self) -> None:
            self.n = 0
            self.last_request_chars = 0

        async def complete(self, request: ChatRequest) -> Completion:
            self.last_request_chars = sum(len(m.content) for m in request.messages)
            self.n += 1
            return Completion(
                replies[min(self.n, len(replies)) - 1], Usage(100, 10), model=self.name
            )

        async def aclose(self) -> None:
            return None

    async def go() -> dict[str, object]:
        codebase = load_codebase(ROOT / "examples" / "vulnapi")
        ledger = Ledger()
        prices = PriceTable.load()
        budget = Budget(ledger=ledger, max_sub_calls=2000)
        root = Root()
        metered = MeteredModel(root, "root", ledger, prices, budget=budget, concurrency=1)
        sub = MeteredModel(
            make_static_worker(), "sub", ledger, prices, budget=budget, concurrency=64
        )
        episode = Episode(
            codebase,
            root=metered,
            dispatcher=SubDispatcher(sub),
            ledger=ledger,
            config=EpisodeConfig(max_turns=3),
            sandbox=SandboxConfig(cell_timeout_s=10),
        )
        started = time.perf_counter()
        result = await episode.run()
        turn = result.turns[0]
        return {
            "flood": name,
            "seconds": round(time.perf_counter() - started, 1),
            "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "stop": result.stop_reason,
            "answer_ready": not result.incomplete,
            "turn_error": turn.error,
            "turn_output_chars": len(turn.output),
            "turn_findings": turn.findings_added,
            "sub_calls": result.sub_calls,
            "last_root_request_chars": root.last_request_chars,
            "output_head": turn.output[:300],
        }

    return asyncio.run(go())


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", nargs="*", choices=sorted(FLOODS), help="floods to run (default: all)")
    p.add_argument("--one", choices=sorted(FLOODS), help=argparse.SUPPRESS)
    p.add_argument(
        "--show-output", action="store_true", help="print the head of each flood turn's output"
    )
    args = p.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return 0
    worst = 0
    for name in args.only or list(FLOODS):
        proc = subprocess.run(
            [sys.executable, __file__, "--one", name],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        if proc.returncode != 0:
            print(f"{name:18} FAILED (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
            worst = max(worst, 10**6)
            continue
        row = json.loads(record_lines(proc.stdout)[-1])
        worst = max(worst, int(row["peak_mb"]))
        print(
            f"{name:18} peak {row['peak_mb']:>5} MB  ratio to {TARGET_MB} MB: {row['peak_mb'] / TARGET_MB:.2f}  "
            f"{row['seconds']:>5}s  stop={row['stop']} ready={row['answer_ready']} error={row['turn_error']} "
            f"output={row['turn_output_chars']} chars findings={row['turn_findings']} sub_calls={row['sub_calls']} "
            f"next root request={row['last_root_request_chars']:,} chars"
        )
        if args.show_output:
            print("    " + str(row["output_head"]).replace("\n", "\n    "))
    print(f"worst peak: {worst} MB (target {TARGET_MB} MB)")
    return 0 if worst <= TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
