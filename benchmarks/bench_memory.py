"""Benchmark: peak resident memory of a ``deeprepo analyze`` run's parent and kernel child.

Generates a tree of ``--files`` Python files, ``--mb`` MB in all (default 10,000 files /
41 MB, issue 20's figure), and runs the offline engine on it (``python -m deeprepo analyze
TREE --no-cache``, no API key: the scripted expert root and the static worker) with
``--max-sub-calls`` (default 20: the expert still builds every worker prompt in its kernel,
then the budget ends the run early; the run log goes to a temporary ``DEEPREPO_HOME``). While it runs, the process tree is read every 20 ms:

- the parent's peak: ``VmHWM`` of the analyze process;
- the kernel's peak: the largest ``VmHWM`` of the sandbox children (processes whose command
  line runs ``deeprepo.sandbox.child``, or ``sandbox/child.py`` as older revisions did; in
  bwrap mode, inside bwrap's own processes).

``VmHWM`` only grows, so the last reading before a process exits is its peak. Each figure is
the median over ``--runs`` runs, printed as ``FIGURE`` lines for ``benchmarks/ab.py``.

The script imports nothing of deeprepo (the run is a subprocess of ``python -m deeprepo``
with this process's ``PYTHONPATH``), so ab.py can run this copy against an old revision's
sources, which had no such benchmark:

    python benchmarks/bench_memory.py [--files 10000] [--mb 41] [--runs 1]
    python benchmarks/ab.py 77af229 "bench_memory --runs 1"
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_LINE = "    result = compute_value(alpha, beta, gamma)  # a typical line of source code\n"
_CHILD = (b"deeprepo.sandbox.child", b"sandbox/child.py")


def generate(root: Path, files: int, total_bytes: int) -> None:
    """``files`` Python files of about ``total_bytes`` in all, 100 to a directory, each with a
    function and a distinct first line (bench_loader's tree, less its junk)."""
    per_file = max(1, total_bytes // files)
    body = (_LINE * (per_file // len(_LINE) + 1))[:per_file]
    for i in range(files):
        d = root / f"pkg{i // 1000:02d}" / f"mod{(i // 100) % 10}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        header = f"# file {i}\ndef handler_{i}(request):\n"
        (d / f"f{i:05d}.py").write_text(header + body[len(header) :])


def _descendants(pid: int) -> list[int]:
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out += [child, *_descendants(child)]
    return out


def _hwm_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _is_kernel(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return any(marker in cmdline for marker in _CHILD)


def one_run(tree: Path, out: Path, max_sub_calls: int) -> dict[str, float]:
    """One analyze run: its wall time and the parent's and the kernel's peak RSS (MB)."""
    keep = ("PATH", "HOME", "LANG", "PYTHONPATH", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["DEEPREPO_HOME"] = str(out / "home")
    command = [
        sys.executable, "-m", "deeprepo", "analyze", str(tree), "--out", str(out / "run"),
        "--no-cache", "--max-sub-calls", str(max_sub_calls),
    ]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    parent = kernel = 0.0
    kernels: set[int] = set()
    while proc.poll() is None:
        parent = max(parent, _hwm_mb(proc.pid) or 0.0)
        for pid in _descendants(proc.pid):
            if pid in kernels or _is_kernel(pid):
                kernels.add(pid)
                kernel = max(kernel, _hwm_mb(pid) or 0.0)
        time.sleep(0.02)
    wall = time.perf_counter() - started
    _, err = proc.communicate()
    # 0: complete; 3: incomplete (the budget ended the run, as meant here).
    if proc.returncode not in (0, 3) or not kernel:
        raise SystemExit(f"analyze failed (exit {proc.returncode}): {err[-1500:]}")
    return {"parent": parent, "kernel": kernel, "wall": wall}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--mb", type=float, default=41.0)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--max-sub-calls", type=int, default=20)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="deeprepo-bench-mem-") as tmp:
        tree = Path(tmp) / "tree"
        generate(tree, args.files, int(args.mb * 1_000_000))
        rows = []
        for i in range(args.runs):
            row = one_run(tree, Path(tmp) / f"out{i}", args.max_sub_calls)
            rows.append(row)
            print(
                f"run {i + 1}: {args.files:,} files / {args.mb:g} MB: parent peak RSS "
                f"{row['parent']:.1f} MB, kernel child peak RSS {row['kernel']:.1f} MB "
                f"({row['wall']:.1f} s)"
            )
    for key, name in (("kernel", "kernel_peak_rss_mb"), ("parent", "parent_peak_rss_mb")):
        print(f"FIGURE {name}={statistics.median(r[key] for r in rows):.1f} MB lower")
    print(f"FIGURE run_wall_s={statistics.median(r['wall'] for r in rows):.2f} s lower")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
