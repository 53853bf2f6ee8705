"""Benchmark: trajectory.html of a run with 2,000 sub-calls: file size, time to write it, and
time for headless Chromium to load and lay it out (closed, then with every <details> open);
and the share of a packed expert run's wall time spent writing its outputs at the end.

Three runs:

- ``real``: the real analyze path (a root on the loopback server's Anthropic route that sends
  one audit prompt per file in one ``llm_batch``, every sub-call on its OpenAI-compatible
  route) over a repository of ``--files`` modules, so calls.jsonl and trajectory.jsonl are
  what deeprepo writes;
- ``worst``: a synthetic folder (``deeprepo.testing.runfolder``) with 2,000 sub-calls whose
  prompts are 30,000 characters (calls.jsonl keeps up to 32 KiB) and replies 4,000;
- ``packed``: ``--packed-runs`` offline ``analyze`` runs (the scripted expert root, which packs
  several files into each worker prompt, and the static worker; run log on, in a temporary
  ``DEEPREPO_HOME``) over ``--packed-tasks`` generated ``large`` repositories put side by
  side. End-of-run writing is everything after the episode: report.md, findings.json,
  findings.sarif and metrics.json (``write_outputs``), the run log's copy
  (``RunRecorder.finish``) and, last, trajectory.html (``write_viewer_quietly``). Prints, as medians, ``FIGURE end_write_share`` (% of the run's
  wall time; target ≤ 3), ``end_write_s``, ``viewer_s`` and ``run_wall_s``.

The browser timing runs on a copy of the page with its Content-Security-Policy removed and a
timing script added (the page itself carries no script): ``load`` is the navigation's
loadEventStart, ``layout`` a forced layout after load, ``expand all`` opening every
<details> and laying out again.

    python benchmarks/bench_viewer.py [--files 2000] [--skip-real]
    python benchmarks/bench_viewer.py --only packed [--packed-tasks 3] [--packed-runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_critical_path import write_repo

from deeprepo import AnalyzeOptions, RunLimits, analyze, write_viewer
from deeprepo.rl import generate_task
from deeprepo.testing.loopback import spawn
from deeprepo.testing.runfolder import RunSpec, write_run_folder

TIMING = (
    "<script>addEventListener('load',()=>{const t0=performance.now();"
    "const h1=document.body.scrollHeight;const t1=performance.now();"
    "for(const d of document.querySelectorAll('details'))d.open=true;"
    "const h2=document.body.scrollHeight;const t2=performance.now();"
    "const nav=performance.getEntriesByType('navigation')[0];"
    "document.title=JSON.stringify({load_ms:Math.round(nav.loadEventStart),"
    "layout_ms:Math.round(t1-t0),expand_all_ms:Math.round(t2-t1),"
    "details:document.querySelectorAll('details').length,height_open:h2})})</script>"
)


def browser_timing(page: Path, work: Path) -> dict[str, float]:
    chromium = shutil.which("chromium") or shutil.which("google-chrome")
    if chromium is None:
        return {}
    html = page.read_text(encoding="utf-8")
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html, count=1)
    timed = work / "timed.html"
    timed.write_text(html.replace("</body>", TIMING + "</body>", 1), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        started = time.perf_counter()
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1200,1600", "--dump-dom",
             timed.resolve().as_uri()],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        wall = time.perf_counter() - started
    title = re.search(r"<title>(.*?)</title>", proc.stdout, re.S)
    out: dict[str, float] = {"browser_wall_s": round(wall, 2)}
    if title:
        out.update(json.loads(title.group(1).replace("&quot;", '"')))
    return out


def real_run(files: int, work: Path) -> Path:
    repo = work / "repo"
    write_repo(repo, files)
    script = work / "script.json"
    # One audit prompt per file, in one llm_batch, then the answer: 2,000 files give 2,000
    # sub-calls, each answered with a worker's JSON finding.
    dispatch = (
        "```python\nreplies = llm_batch([file_audit_prompt(p) for p in sorted(codebase)])\n"
        "print(len(replies), sum(r.startswith('[llm error]') for r in replies))\n```"
    )
    answer = "```python\nset_answer('# Report\\nAll files audited.')\n```"
    finding = json.dumps({"findings": [{
        "line": 4, "kind": "input-validation", "cwe": "CWE-20", "severity": "low",
        "title": "payload values are converted without a check",
        "detail": "int() on request data raises on bad input; validate before summing.",
    }]})  # fmt: skip
    script.write_text(
        json.dumps({
            "anthropic": [{"text": dispatch}, {"text": answer}],
            "rules": [{"contains": "Audit the file", "route": "openai",
                       "reply": {"text": finding}}],
        })
    )  # fmt: skip
    proc, port = spawn(latency_s=0.0, script=script, ttl_s=900)
    try:
        import asyncio

        options = AnalyzeOptions(
            path=str(repo),
            root="anthropic/bench-root",
            root_base_url=f"http://127.0.0.1:{port}",
            sub="openrouter/bench/sub",
            sub_base_url=f"http://127.0.0.1:{port}/v1",
            limits=RunLimits(sub_concurrency=32, max_sub_calls=files * 2),
            cache=False,
            out_dir=work / "run",
            env={"ANTHROPIC_API_KEY": "bench", "OPENROUTER_API_KEY": "bench"},
        )
        asyncio.run(analyze(options))
    finally:
        proc.kill()
        proc.wait()
    return work / "run"


def measure(label: str, run_dir: Path, work: Path) -> None:
    started = time.perf_counter()
    page = write_viewer(run_dir)
    write_s = time.perf_counter() - started
    size = page.path.stat().st_size
    calls_mb = (run_dir / "calls.jsonl").stat().st_size / 1e6
    print(
        f"{label}: {page.sub_calls:,} sub-calls, {page.turns} turns; calls.jsonl {calls_mb:.1f} MB"
        f" -> trajectory.html {size / 1e6:.2f} MB written in {write_s:.2f} s"
    )
    for line in page.cut:
        print(f"  cut: {line}")
    timing = browser_timing(page.path, work)
    print(f"  chromium: {timing or 'not installed'}")


@contextmanager
def _timed(owner: Any, name: str, spent: list[float]) -> Iterator[None]:
    """``owner.name`` replaced by a wrapper that adds each call's seconds to ``spent``."""
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        setattr(owner, name, original)


def write_packed_repo(root: Path, tasks: int, seed: int) -> int:
    """``tasks`` generated large Python repositories side by side under ``root``; files."""
    files = 0
    for i in range(tasks):
        task = generate_task(seed + i, "large", "python")
        for rel, body in task.files.items():
            path = root / f"svc{i}" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        files += len(task.files)
    return files


def packed_run(repo: Path, work: Path) -> dict[str, float]:
    """One offline analyze run of ``repo``: its wall time and the end-of-run writing."""
    import asyncio

    # The run wiring's own module: what it calls after the episode is timed where it looks
    # the names up.
    run = sys.modules[analyze.__module__]
    outputs: list[float] = []
    viewer: list[float] = []
    run_log: list[float] = []
    options = AnalyzeOptions(
        path=str(repo),
        cache=False,
        out_dir=work / "run",
        limits=RunLimits(max_sub_calls=100_000),
        # No API key: the offline engine. A run log of its own, so the copy is measured too.
        env={"PATH": os.environ.get("PATH", ""), "DEEPREPO_HOME": str(work / "home")},
    )
    with (
        _timed(run, "write_outputs", outputs),
        _timed(run, "write_viewer_quietly", viewer),
        _timed(run.RunRecorder, "finish", run_log),
    ):
        started = time.perf_counter()
        handle = asyncio.run(analyze(options))
        wall = time.perf_counter() - started
    end = sum(outputs) + sum(run_log) + sum(viewer)
    return {
        "run_wall_s": wall,
        "end_write_s": end,
        "viewer_s": sum(viewer),
        "run_log_s": sum(run_log),
        "end_write_share": 100 * end / wall,
        "sub_calls": float(handle.result.sub_calls),
        "html_mb": (work / "run" / "trajectory.html").stat().st_size / 1e6,
    }


def packed(tasks: int, runs: int, seed: int, work: Path) -> None:
    repo = work / "repo"
    files = write_packed_repo(repo, tasks, seed)
    rows = []
    for i in range(runs):
        row = packed_run(repo, work / f"run{i}")
        rows.append(row)
        print(
            f"packed run {i + 1}: {files} files, {row['sub_calls']:.0f} sub-calls, "
            f"wall {row['run_wall_s']:.2f} s; end-of-run writing {row['end_write_s']:.3f} s "
            f"({row['end_write_share']:.2f} %): trajectory.html {row['viewer_s']:.3f} s "
            f"({row['html_mb']:.2f} MB), run log {row['run_log_s']:.3f} s"
        )
    for key, unit in (
        ("end_write_share", "%"),
        ("end_write_s", "s"),
        ("viewer_s", "s"),
        ("run_wall_s", "s"),
    ):
        print(f"FIGURE {key}={statistics.median(r[key] for r in rows):.4f} {unit} lower")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=2000, help="modules in the real run's repository")
    p.add_argument("--skip-real", action="store_true", help="only the synthetic worst case")
    p.add_argument(
        "--only", choices=("real", "worst", "packed"), help="run this one (default: real, worst)"
    )
    p.add_argument("--packed-tasks", type=int, default=3, help="large repositories, side by side")
    p.add_argument("--packed-runs", type=int, default=3, help="packed runs (medians)")
    p.add_argument("--seed", type=int, default=11, help="the packed repositories' first seed")
    args = p.parse_args()
    chosen = {args.only} if args.only else {"worst"} if args.skip_real else {"real", "worst"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "real" in chosen:
            started = time.perf_counter()
            run = real_run(args.files, work / "real")
            print(f"real run of {args.files} files took {time.perf_counter() - started:.1f} s")
            measure("real", run, work / "real")
        if "worst" in chosen:
            worst = work / "worst"
            write_run_folder(
                worst / "run",
                RunSpec(turns=4, subs_per_turn=500, prompt_chars=30_000, response_chars=4_000),
            )
            measure("worst", worst / "run", worst)
        if "packed" in chosen:
            packed(args.packed_tasks, args.packed_runs, args.seed, work / "packed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
