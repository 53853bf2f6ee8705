"""Benchmark the codebase loader against DESIGN §9: 20,000 files / 200 MB in ≤ 3 s, ≤ 2× memory.

Generates the tree in a temporary directory (ASCII source-like text, 100 files a directory, a
``.gitignore`` with a few rules, a junk directory, a binary and an ignored file), loads it
``--runs`` times and prints the median wall time and its ratio to the 3 s target. Memory is
measured twice, each relative to the size of the loaded text objects: the peak that
``tracemalloc`` traces, and the growth of the peak resident set of a fresh process (which also
sees heap fragmentation that ``tracemalloc`` does not).

The medians and the RSS growth are also printed as ``FIGURE`` lines for ``benchmarks/ab.py``.

Run: ``.venv/bin/python benchmarks/bench_loader.py [--files 20000] [--mb 200] [--runs 3]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from deeprepo import IgnoreRules, load_codebase

TARGET_S = 3.0
TARGET_MEMORY_RATIO = 2.0

_LINE = "    result = compute_value(alpha, beta, gamma)  # a typical line of source code\n"

# Run in a fresh interpreter: peak RSS growth over the baseline taken just before loading.
# VmHWM, not ru_maxrss: a child inherits its parent's ru_maxrss across fork and exec.
_RSS_PROBE = """
import json, sys
from deeprepo.codebase.loader import load_codebase
def hwm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM:"))
before = hwm()
codebase = load_codebase(sys.argv[1])
text = sum(sys.getsizeof(t) for t in codebase.files.values())
print(json.dumps({"grown": hwm() - before, "text": text}))
"""


def generate(root: Path, files: int, total_bytes: int) -> None:
    """Write ``files`` text files of about ``total_bytes`` in all, 100 to a directory."""
    per_file = max(1, total_bytes // files)
    body = (_LINE * (per_file // len(_LINE) + 1))[:per_file]
    (root / ".gitignore").write_text("*.log\n/tmp/\n*.generated.py\n!keep.log\n")
    for i in range(files):
        d = root / f"pkg{i // 1000:02d}" / f"mod{(i // 100) % 10}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        header = f"# file {i}\n"
        (d / f"f{i:05d}.py").write_text(header + body[len(header) :])
    # Things the loader must skip cheaply.
    (root / "node_modules" / "lib").mkdir(parents=True)
    (root / "node_modules" / "lib" / "index.js").write_text("x\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    (root / "debug.log").write_text("ignored\n")


_GITIGNORE_52 = """*.py[cod]
__pycache__/
*.so
.Python
build/
develop-eggs/
dist/
downloads/
eggs/
.eggs/
lib/
lib64/
parts/
sdist/
var/
wheels/
*.egg-info/
.installed.cfg
*.egg
MANIFEST
*.manifest
*.spec
pip-log.txt
htmlcov/
.tox/
.nox/
.coverage
.coverage.*
.cache
nosetests.xml
coverage.xml
*.cover
.hypothesis/
.pytest_cache/
*.mo
*.pot
*.log
local_settings.py
db.sqlite3
instance/
.webassets-cache
.scrapy
docs/_build/
target/
.ipynb_checkpoints
.env
.venv
env/
venv/
!keep.log
**/secret/**
/tmp/
""".splitlines()


def _ignore_matching_s() -> float:
    """CPU seconds to match 20,000 typical paths against a typical 52-rule ``.gitignore``."""
    rules = IgnoreRules(_GITIGNORE_52)
    paths = [f"pkg{i // 1000:02d}/mod{(i // 100) % 10}/f{i:05d}.py" for i in range(20_000)]
    c0 = time.process_time()
    for p in paths:
        rules.match(p, False)
    return time.process_time() - c0


def main() -> int:
    parser = argparse.ArgumentParser(description="Benchmark deeprepo's codebase loader.")
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--mb", type=float, default=200.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="deeprepo-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        generate(root, args.files, int(args.mb * 1_000_000))
        print(
            f"generated {args.files:,} files / {args.mb:,.0f} MB in {time.perf_counter() - t0:.1f} s"
        )

        times, cpu = [], []
        for _ in range(args.runs):
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            codebase = load_codebase(root)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            meta = codebase.metadata
            text_bytes = sum(sys.getsizeof(t) for t in codebase.files.values())
            del codebase

        tracemalloc.start()
        load_codebase(root)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

        probe = subprocess.run(
            [sys.executable, "-c", _RSS_PROBE, str(root)],
            capture_output=True,
            text=True,
            check=True,
        )
        rss = json.loads(probe.stdout)

    median = statistics.median(times)
    print(
        f"loaded {meta.files:,} files, {meta.chars:,} chars, {meta.lines:,} lines, "
        f"{len(meta.skipped)} skipped; {os.cpu_count()} CPUs"
    )
    print(f"runs: {', '.join(f'{t:.3f}' for t in times)} s")
    # CPU time of this process: steadier than the wall clock on a shared, loaded machine.
    print(
        f"CPU per run: {', '.join(f'{t:.3f}' for t in cpu)} s (median {statistics.median(cpu):.3f})"
    )
    print(f"ignore rules: {_ignore_matching_s():.3f} s to match 20,000 paths against 52 rules")
    verdict = "OK" if median <= TARGET_S else "OVER"
    print(
        f"median load time: {median:.3f} s; ratio to the {TARGET_S:.0f} s target: {median / TARGET_S:.2f} ({verdict})"
    )
    print(f"FIGURE load_cpu_s={statistics.median(cpu):.4f} s")
    print(f"FIGURE load_wall_s={median:.4f} s")
    print(f"FIGURE load_rss_growth_mb={rss['grown'] / 1e6:.2f} MB")
    measured = [("tracemalloc peak", peak, text_bytes)]
    if rss is not None:
        measured.append(("peak RSS growth", rss["grown"], rss["text"]))
    for label, used, text in measured:
        ratio = used / text
        verdict = "OK" if ratio <= TARGET_MEMORY_RATIO else "OVER"
        print(
            f"{label}: {used / 1e6:,.1f} MB for {text / 1e6:,.1f} MB of text; "
            f"ratio {ratio:.2f} (target ≤ {TARGET_MEMORY_RATIO:.0f}: {verdict})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
