"""The speed targets the test suite used to assert, measured where a wall clock belongs.

A test that fails when the machine is busy says nothing about deeprepo, so the tests assert
what happened (counts, order, which limit stopped what) and the wall-clock targets they
carried live here. Each figure is the median of ``--runs`` runs, printed with its target,
the ratio to it and the test that states the behaviour. Other targets have benchmarks of
their own: the loader (``bench_loader.py``), the import graph (``bench_architecture.py``),
the viewer page (``bench_viewer.py``), the kernel (``bench_kernel.py``).

Run: ``.venv/bin/python benchmarks/bench_speed_targets.py [--runs 3] [--only NAME ...]``
(``--list`` names them; the ``cli-*`` ones start ``deeprepo`` and take a few seconds each).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from deeprepo import (
    Budget,
    ChatRequest,
    Completion,
    IgnoreRules,
    Kernel,
    Ledger,
    Message,
    MeteredModel,
    OpenAICompatModel,
    PriceTable,
    SandboxConfig,
    StaticWorker,
    SubDispatcher,
    Usage,
    bwrap_problem,
    covered_files,
    file_audit_prompt,
    load_codebase,
    parse_model_spec,
)
from deeprepo.rl import generate_task
from deeprepo.testing.loopback import LoopbackServer, Reply

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "vulnapi"
PATHOLOGICAL = [
    "*a*a*a*a*a*a*a*a*a*a*b",
    "**/a*a*a*a*a*a*a*a*a*a*b/**",
    "a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/b",
    "/a**a**a**a**a**a**a**a**/b",
    "[a][a]*[a]*[!b]*[a]*[a]*[a]*[a]*[a]*[a]*b",
    "?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*b",
]
PAYLOAD = {"codebase": {"app.py": "x = 1\n"}, "file_tree": "app.py", "metadata": {"files": 1}}


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def static_worker(tmp: Path) -> float:
    rel = "vulnapi/models.py"  # the file tests/test_static_worker.py batches
    prompt = file_audit_prompt(rel, (EXAMPLE / rel).read_text())
    worker = StaticWorker()
    request = ChatRequest(messages=(Message("user", prompt),))

    async def go() -> float:
        await worker.complete(request)  # warm the analyzers
        t0 = time.perf_counter()
        await asyncio.gather(*(worker.complete(request) for _ in range(20)))
        return (time.perf_counter() - t0) / 20

    return asyncio.run(go())


def task_generation(tmp: Path) -> float:
    generate_task(0, "small", "python")  # warm the imports
    langs = ("python", "js", "mixed")
    return _timed(lambda: [generate_task(s, "small", langs[s % 3]) for s in range(30)]) / 30


def coverage(tmp: Path) -> float:
    rng = random.Random(0)
    words = ["value", "self.items", "return", "config", "=", "(", ")", "request.args", "if", "None"]
    codebase = {
        f"pkg/mod{i}.py": "\n".join(
            "    " + " ".join(rng.choice(words) for _ in range(6)) for _ in range(200)
        )
        for i in range(300)
    }
    prompts = [file_audit_prompt(p, t) for p, t in codebase.items()]
    return _timed(lambda: covered_files(codebase, prompts))


def ignore_patterns(tmp: Path) -> float:
    (tmp / ".gitignore").write_text("\n".join(PATHOLOGICAL) + "\n")
    (tmp / "ok.py").write_text("ok = 1\n")
    deep = tmp
    while len(str(deep)) < 3700:
        deep = deep / ("a" * 250)
    deep.mkdir(parents=True)
    (deep / ("a" * 250)).write_text("deep = 1\n")
    return _timed(lambda: load_codebase(tmp))


def ignore_match(tmp: Path) -> float:
    rules = IgnoreRules(PATHOLOGICAL)
    names = [("a" * 4000, False), ("a" * 4000 + "b", False), ("/".join(["a"] * 2000), True)]
    return _timed(lambda: [rules.match(name, is_dir) for name, is_dir in names])


def loader_50mb(tmp: Path) -> float:
    (tmp / "small.py").write_text("x = 1\n")
    with open(tmp / "huge.sql", "wb") as fh:
        fh.truncate(50_000_000)
    return _timed(lambda: load_codebase(tmp))


def loader_symlink_loops(tmp: Path) -> float:
    (tmp / "main.py").write_text("pass\n")
    for name, target in (("a", "b"), ("b", "a"), ("self", "self"), ("here", ".")):
        os.symlink(target, tmp / name)
    (tmp / "pkg").mkdir()
    os.symlink("..", tmp / "pkg" / "up")
    return _timed(lambda: load_codebase(tmp))


def ignore_fifo(tmp: Path) -> float:
    (tmp / ".git" / "info").mkdir(parents=True)
    os.mkfifo(tmp / ".git" / "info" / "exclude")
    rules = tmp.parent / f"{tmp.name}-rules"
    rules.write_text("*.py\n")
    os.symlink(rules, tmp / ".gitignore")
    (tmp / "a.py").write_text("a = 1\n")
    return _timed(lambda: load_codebase(tmp))


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}
    done = subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def git_bomb(tmp: Path) -> float:
    repo = tmp / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "blob.txt").write_text("boom = 1\n")
    oid, kind, mode, prefix = _git(repo, "hash-object", "-w", "blob.txt"), "blob", "100644", "f"
    for _ in range(7):  # ten million paths from a few hundred bytes
        listing = "".join(f"{mode} {kind} {oid}\t{prefix}{i}\n" for i in range(10))
        oid, kind, mode, prefix = _git(repo, "mktree", stdin=listing), "tree", "040000", "d"
    _git(repo, "update-ref", "refs/heads/bomb", _git(repo, "commit-tree", oid, "-m", "bomb"))
    t0 = time.perf_counter()
    try:
        load_codebase(repo, rev="bomb")
    except Exception as exc:  # refused at the loader's cap, as tests/test_codebase_git.py asserts
        if "lists more than" not in str(exc):
            raise
    return time.perf_counter() - t0


class _Answering:
    name = "bench/answering"

    async def complete(self, request: ChatRequest) -> Completion:
        return Completion("ok", Usage(10, 1))

    async def aclose(self) -> None:
        pass


def dispatcher_refusals(tmp: Path) -> float:
    async def go() -> float:
        ledger = Ledger()
        budget = Budget(max_sub_calls=5, ledger=ledger)
        model = MeteredModel(_Answering(), "sub", ledger, PriceTable.load(None), budget)
        dispatcher = SubDispatcher(model)
        t0 = time.perf_counter()
        await dispatcher.batch(["p"] * 100_000)
        return time.perf_counter() - t0

    return asyncio.run(go())


async def _no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


def hung_call(tmp: Path) -> float:
    async def go(server: LoopbackServer) -> float:
        spec = parse_model_spec("openai/gpt-4o-mini")
        inner = OpenAICompatModel(spec, "k", server.openai_base_url, timeout_s=30)
        model = MeteredModel(
            inner, "sub", Ledger(), PriceTable.load(None), call_timeout_s=0.3, sleep=_no_wait
        )  # the retry's back-off is not what is timed, as in the test
        server.enqueue_openai(fault="timeout")
        request = ChatRequest((Message("user", "audit this"),), max_tokens=100)
        t0 = time.perf_counter()
        await model.complete(request)
        seconds = time.perf_counter() - t0
        await model.aclose()
        return seconds

    with LoopbackServer(default=Reply("after the hang"), timeout_fault_s=30) as server:
        return asyncio.run(go(server))


async def _answer(batch: list[str], system: str | None) -> list[str]:
    return ["ok"] * len(batch)


def sandbox_cleanup(tmp: Path) -> float:
    async def go() -> float:
        async with await Kernel.start(PAYLOAD, _answer, SandboxConfig(mode="bwrap")) as kernel:
            child = kernel._conn.child if kernel._conn else None
            assert child is not None
            return _timed(lambda: [child.stop_leftovers() for _ in range(200)]) / 200

    return asyncio.run(go())


def sandbox_print_flood(tmp: Path) -> float:
    async def go() -> float:
        async with await Kernel.start(PAYLOAD, _answer, SandboxConfig(cell_timeout_s=60)) as k:
            t0 = time.perf_counter()
            await k.exec("import sys\nsys.stdout.write('A' * 10**8)\nprint('END')")
            return time.perf_counter() - t0

    return asyncio.run(go())


def sandbox_timeout(tmp: Path) -> float:
    async def go() -> float:
        async with await Kernel.start(PAYLOAD, _answer, SandboxConfig(cell_timeout_s=1.0)) as k:
            return (await k.exec("while True:\n    pass")).seconds

    return asyncio.run(go())


def _deeprepo(*args: str) -> float:
    env = dict(os.environ, OPENAI_API_KEY="bench-key", COLUMNS="200")
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "deeprepo", *args], capture_output=True, env=env, cwd=ROOT
    )
    return time.perf_counter() - t0


def cli_refused(tmp: Path) -> float:
    return _deeprepo(
        "analyze", str(EXAMPLE), "--out", str(tmp / "run"), "--root", "openai/x",
        "--root-base-url", "http://127.0.0.1:9/v1", "--sub", "static",
    )  # fmt: skip


def cli_eval_refused(tmp: Path) -> float:
    return _deeprepo(
        "eval", "--model", "openai/x", "--base-url", "http://127.0.0.1:9/v1",
        "--generate", "small:seed=1", "-n", "2", "-r", "1", "-q", "--out", str(tmp / "ev"),
    )  # fmt: skip


def cli_sigint(tmp: Path) -> float:
    """From Ctrl-C during the audit of 2,600 files to the exit with partial outputs."""
    for i in range(2600):
        d = tmp / "repo" / f"pkg{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"import os\n\n\ndef f{i}(x):\n    return os.path.join(x)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "deeprepo", "analyze", str(tmp / "repo"), "--out",
         str(tmp / "run"), "--no-cache"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, COLUMNS="200"), start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    while (line := proc.stderr.readline()) and "turn 1/" not in line:
        pass
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.perf_counter()
    proc.communicate()
    return time.perf_counter() - t0


#: name: (what is timed, target in seconds, the test that states the behaviour, measure)
TARGETS: dict[str, tuple[str, float, str, Callable[[Path], float]]] = {
    "static-worker": ("per file, 20 audits of one file at once", 0.25, "test_static_worker", static_worker),
    "task-generation": ("per small generated task", 0.05, "test_tasks_generator", task_generation),
    "coverage": ("covered_files, 300 files in 300 prompts", 0.5, "test_coverage", coverage),
    "ignore-patterns": ("load: pathological .gitignore, 4,000-char path", 0.5, "test_codebase_ignore", ignore_patterns),
    "ignore-match": ("three 4,000-char names against those rules", 0.5, "test_codebase_ignore", ignore_match),
    "ignore-fifo": ("load: a FIFO as .git/info/exclude", 2.0, "test_codebase_ignore", ignore_fifo),
    "loader-50mb": ("load: a sparse 50 MB file beside a small one", 1.0, "test_codebase_bad_repos", loader_50mb),
    "loader-symlink-loops": ("load: symlink loops", 2.0, "test_codebase_bad_repos", loader_symlink_loops),
    "git-bomb": ("refuse 10**7 paths at the loader's entry cap", 10.0, "test_codebase_git", git_bomb),
    "dispatcher-refusals": ("100,000 prompts past --max-sub-calls", 3.0, "test_faults_e2e", dispatcher_refusals),
    "hung-call": ("a hung call: 0.3 s call timeout, then the retry", 3.0, "test_metered", hung_call),
    "sandbox-cleanup": ("per-cell cleanup with nothing left (bwrap)", 0.002, "test_sandbox_isolation", sandbox_cleanup),
    "sandbox-print-flood": ("a cell printing 100 million chars", 5.0, "test_sandbox_attacks", sandbox_print_flood),
    "sandbox-timeout": ("an endless cell's time at a 1 s limit", 5.0, "test_sandbox", sandbox_timeout),
    "cli-refused": ("analyze against a refused connection", 20.0, "test_honest_runs", cli_refused),
    "cli-eval-refused": ("eval against a refused connection", 30.0, "test_honest_runs", cli_eval_refused),
    "cli-sigint": ("Ctrl-C to exit, 2,600-file audit", 15.0, "test_honest_runs", cli_sigint),
}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=sorted(TARGETS), metavar="NAME")
    parser.add_argument("--list", action="store_true", help="name the measurements and stop")
    args = parser.parse_args()
    if args.list:
        for name, (what, target, test, _) in TARGETS.items():
            print(f"{name:22} {what} (≤ {target:g} s; tests/{test}.py)")
        return 0
    problem = bwrap_problem()
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.2f}; median of {args.runs} run(s)")
    for name in args.only or list(TARGETS):
        what, target, test, measure = TARGETS[name]
        if name == "sandbox-cleanup" and problem is not None:
            print(f"{name:22} skipped: needs bwrap ({problem})")
            continue
        samples = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="deeprepo-bench-") as tmp:
                samples.append(measure(Path(tmp)))
        median = statistics.median(samples)
        verdict = "OK" if median <= target else "OVER"
        print(
            f"{name:22} {median:9.4f} s  target ≤ {target:g} s  ratio {median / target:5.2f} "
            f"({verdict})  {what}; tests/{test}.py"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
