"""Benchmark: how fast Ctrl-C stops ``deeprepo analyze`` on a loaded machine.

The guide promises that Ctrl-C prints ``stopping…`` at once and that the command returns
within a couple of seconds. This measures both under CPU load: it generates a repository
of ``--files`` Python files, starts ``deeprepo analyze`` on it (the offline engine, no key
in the environment) while ``--load`` busy-loop processes run (default: one per core), and
sends SIGINT at a point of the run:

- ``load``: as soon as the first line (the models line, on stdout) is out, while the
  files load;
- ``turn1``: on the load summary (``loaded N files``), as the first turn starts;
- ``audit``: on the first progress line that shows files audited (mid-audit);
- ``verify``: 2 s after the audit's last file (the offline root's long second batch:
  checking the findings, before turn 3);
- ``workers``: on the first progress line of turn 3 (recording the findings).

For each phase it prints the median (and max) time from SIGINT to the ``stopping…`` line
and to the process's exit, over ``--tries`` runs, and the exit codes seen (130 expected).

    python benchmarks/bench_interrupt.py --files 3000 --tries 3
    python benchmarks/bench_interrupt.py --load 0          # the same, on an idle machine
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent

# phase -> (the output line that, once seen, triggers the SIGINT, seconds to wait after it)
TRIGGERS: dict[str, tuple[re.Pattern[str], float]] = {
    "load": (re.compile(r"^root "), 0.0),
    "turn1": (re.compile(r"^loaded "), 0.0),
    "audit": (re.compile(r"audited [1-9][0-9]*/"), 0.0),
    "verify": (re.compile(r"turn 2/.*audited (\d+)/\1 "), 2.0),
    "workers": (re.compile(r"turn 3/"), 0.0),
}


def _busy() -> None:
    while True:
        pass


def _make_repo(where: Path, files: int) -> Path:
    repo = where / "repo"
    for i in range(files):
        sub = repo / f"pkg{i // 200}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"m{i}.py").write_text(
            f"import subprocess\n\n\ndef f{i}(cmd):\n    return subprocess.call(cmd, shell=True)\n"
        )
    return repo


def _one(repo: Path, out: Path, phase: str) -> tuple[float | None, float | None, int | None]:
    """One run: (seconds to ``stopping…``, seconds to exit, exit code); None where the
    trigger line never came (the run ended first) or the process did not exit in time."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"DEEPREPO_NO_LOG": "1", "COLUMNS": "200"})
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", "analyze", str(repo), "--out", str(out), "--no-cache"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # A child of a non-interactive shell may inherit SIGINT ignored; a terminal's is not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    for stream in (proc.stdout, proc.stderr):
        assert stream is not None
        threading.Thread(target=pump, args=(stream,), daemon=True).start()
    exited: list[float] = []  # the exit's time, not the pipes' end (a child may hold them)

    def wait() -> None:
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            return
        exited.append(time.perf_counter())

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    trigger, delay = TRIGGERS[phase]
    sent: float | None = None
    stopping: float | None = None
    ended = 0
    while ended < 2:
        line = lines.get()
        if line is None:
            ended += 1
        elif sent is None and trigger.search(line):
            time.sleep(delay)
            sent = time.perf_counter()
            proc.send_signal(signal.SIGINT)
        elif sent is not None and stopping is None and "stopping…" in line:
            stopping = time.perf_counter() - sent
    waiter.join()
    if not exited:
        proc.kill()
        proc.wait()
        return stopping, None, None
    if sent is None:
        return None, None, proc.returncode
    return stopping, exited[0] - sent, proc.returncode


def _fmt(values: list[float]) -> str:
    if not values:
        return "      -       -"
    return f"{statistics.median(values):7.2f} {max(values):7.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=3000, help="files in the generated repo")
    parser.add_argument("--tries", type=int, default=3, help="runs per phase")
    parser.add_argument(
        "--load", type=int, default=os.cpu_count() or 1, help="busy-loop processes (default: cores)"
    )
    parser.add_argument("--phases", nargs="+", default=list(TRIGGERS), choices=list(TRIGGERS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-interrupt-") as tmp:
        repo = _make_repo(Path(tmp), args.files)
        hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
        for hog in hogs:
            hog.start()
        try:
            print(f"{args.files} files · load {args.load} busy loops · {os.cpu_count()} cores")
            print("phase     to 'stopping…' (median max)   to exit (median max)   exit codes")
            for phase in args.phases:
                to_stop: list[float] = []
                to_exit: list[float] = []
                codes: list[str] = []
                for i in range(args.tries):
                    stop, done, code = _one(repo, Path(tmp) / f"run-{phase}-{i}", phase)
                    if stop is not None:
                        to_stop.append(stop)
                    if done is not None:
                        to_exit.append(done)
                    codes.append("timeout" if code is None else str(code))
                print(f"{phase:8}  {_fmt(to_stop):>28}   {_fmt(to_exit):>20}   {','.join(codes)}")
        finally:
            for hog in hogs:
                hog.terminate()


if __name__ == "__main__":
    main()
