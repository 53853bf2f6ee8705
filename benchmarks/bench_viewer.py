"""Benchmark: trajectory.html of a run with 2,000 sub-calls: file size, time to write it, and
time for headless Chromium to load and lay it out (closed, then with every <details> open).

Two runs:

- ``real``: the real analyze path (a root on the loopback server's Anthropic route that sends
  one audit prompt per file in one ``llm_batch``, every sub-call on its OpenAI-compatible
  route) over a repository of ``--files`` modules, so calls.jsonl and trajectory.jsonl are
  what deeprepo writes;
- ``worst``: a synthetic folder (``deeprepo.testing.runfolder``) with 2,000 sub-calls whose
  prompts are 30,000 characters (calls.jsonl keeps up to 32 KiB) and replies 4,000.

The browser timing runs on a copy of the page with its Content-Security-Policy removed and a
timing script added (the page itself carries no script): ``load`` is the navigation's
loadEventStart, ``layout`` a forced layout after load, ``expand all`` opening every
<details> and laying out again.

    python benchmarks/bench_viewer.py [--files 2000] [--skip-real]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_critical_path import write_repo

from deeprepo import AnalyzeOptions, RunLimits, analyze, write_viewer
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=2000, help="modules in the real run's repository")
    p.add_argument("--skip-real", action="store_true", help="only the synthetic worst case")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.skip_real:
            started = time.perf_counter()
            run = real_run(args.files, work / "real")
            print(f"real run of {args.files} files took {time.perf_counter() - started:.1f} s")
            measure("real", run, work / "real")
        worst = work / "worst"
        write_run_folder(
            worst / "run",
            RunSpec(turns=4, subs_per_turn=500, prompt_chars=30_000, response_chars=4_000),
        )
        measure("worst", worst / "run", worst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
