"""Benchmark the import-graph analysis: 5,000 source files in ≤ 3 s (issue 8, item 7).

Generates, in memory, ``--files`` Python modules in 50 packages under ``src/app/`` (each with
a dozen imports, relative and absolute, a docstring and ~200 lines) plus as many
TypeScript modules under ``web/src/`` (imports, re-exports, ``require``), then runs
``analyze_architecture`` ``--runs`` times and prints the median wall time per language and
its ratio to the 3 s target. ``PATH`` arguments measure real repositories instead.

Run: ``.venv/bin/python benchmarks/bench_architecture.py [--files 5000] [--runs 3] [PATH ...]``
"""

from __future__ import annotations

import argparse
import statistics
import time

from deeprepo import analyze_architecture, classify_scope

TARGET_S = 3.0
_BODY = "def handler(request, value):\n    result = compute(value)  # typical source\n" * 100


def python_repo(n: int) -> dict[str, str]:
    files: dict[str, str] = {}
    for i in range(n):
        pkg, mod = i % 50, i // 50
        files.setdefault(f"src/app/p{pkg}/__init__.py", "from .m0 import handler\n")
        imports = "".join(
            f"from app.p{(pkg + k) % 50}.m{(mod + k) % (n // 50)} import handler as h{k}\n"
            for k in range(1, 7)
        )
        files[f"src/app/p{pkg}/m{mod}.py"] = (
            '"""Module docstring.\n\n    import not_a_dependency\n"""\n'
            "import os\nimport json\nimport requests\nfrom . import m0\n"
            f"from ..p{(pkg + 1) % 50} import m1\n" + imports + _BODY
        )
    return files


def typescript_repo(n: int) -> dict[str, str]:
    files: dict[str, str] = {"web/package.json": '{"name": "web", "main": "src/index.ts"}'}
    for i in range(n):
        folder, mod = i % 50, i // 50
        imports = "".join(
            f"import {{ h{k} }} from '../f{(folder + k) % 50}/m{(mod + k) % (n // 50)}'\n"
            for k in range(1, 7)
        )
        files[f"web/src/f{folder}/m{mod}.ts"] = (
            "import React from 'react'\nimport { z } from 'zod'\n"
            "export * from './index'\nconst fs = require('node:fs')\n// import x from 'ghost'\n"
            + imports
            + "export function handler(value: number): number {\n  return value + 1\n}\n" * 60
        )
        files.setdefault(f"web/src/f{folder}/index.ts", "export const x = 1\n")
    return files


def measure(files: dict[str, str], runs: int) -> tuple[float, float, int]:
    """Median wall and CPU seconds (CPU: what a busy, shared machine cannot inflate)."""
    scopes = {p: classify_scope(p, t) for p, t in files.items()}  # the loader's work, not ours
    walls, cpus = [], []
    modules = 0
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        arch = analyze_architecture(files, scopes)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        modules = arch.modules
    return statistics.median(walls), statistics.median(cpus), modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="repositories to measure instead")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.paths:
        from deeprepo import load_codebase

        for path in args.paths:
            codebase = load_codebase(path)
            seconds, cpu, modules = measure(codebase.files, args.runs)
            print(
                f"{path}: {len(codebase.files):,} files, {modules:,} source modules: "
                f"{seconds:.3f} s wall, {cpu:.3f} s CPU (ratio to {TARGET_S:g} s: "
                f"{seconds / TARGET_S:.2f})"
            )
        return
    for name, files in (
        ("python", python_repo(args.files)),
        ("typescript", typescript_repo(args.files)),
    ):
        chars = sum(map(len, files.values()))
        seconds, cpu, modules = measure(files, args.runs)
        print(
            f"{name}: {modules:,} modules, {chars / 1e6:.1f} MB: {seconds:.3f} s wall, "
            f"{cpu:.3f} s CPU (ratio to {TARGET_S:g} s: {seconds / TARGET_S:.2f}, target ≤ 1.00)"
        )


if __name__ == "__main__":
    main()
