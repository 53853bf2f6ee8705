"""Hostile cells run straight through ``Kernel.exec``: each is contained, and the
kernel (and this process) is usable afterwards.

The kernel runs in the default "auto" mode. Assertions that only the bubblewrap
layer can make true (no network, no view of the parent, of $HOME or of the
repository) are skipped, with the reason, where bwrap cannot run.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import attack_cells as cells
import pytest

from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import bwrap_problem
from deeprepo.sandbox.kernel import Kernel
from deeprepo.sandbox.pool import KernelPool

pytestmark = pytest.mark.e2e

SECRET = "sk-or-v1-attack-test-secret-7f3a"
FILES = {"src/app.py": "print('hello')\n", "src/db.py": "QUERY = 'select 1'\n"}
PAYLOAD: dict[str, Any] = {
    "codebase": FILES,
    "file_tree": "src/\n  app.py\n  db.py",
    "metadata": {"files": 2},
}
# A cell limit no loaded machine reaches: what stops each attack is the limit it is aimed at
# (memory, output, processes), never the clock; short_kernel's cells stop after SHORT_TIMEOUT_S.
CONFIG = SandboxConfig(
    cell_timeout_s=120, memory_limit_mb=512, max_file_size_mb=1, max_open_files=64
)
SHORT_TIMEOUT_S = 1.5
_PROBLEM = bwrap_problem()
needs_bwrap = pytest.mark.skipif(
    _PROBLEM is not None, reason=f"needs the bwrap sandbox: {_PROBLEM}"
)


class Handler:
    def __init__(self) -> None:
        self.prompts = 0
        self.batches: list[int] = []

    async def __call__(self, batch: list[str], system: str | None) -> list[str]:
        self.prompts += len(batch)
        self.batches.append(len(batch))
        return ["ok"] * len(batch)


@pytest.fixture(scope="module")
def pool() -> Iterator[KernelPool]:
    with KernelPool(SandboxConfig(), size=2) as p:
        yield p


@pytest.fixture
def handler() -> Handler:
    return Handler()


@pytest.fixture
async def kernel(
    handler: Handler, pool: KernelPool, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Kernel]:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    async with await Kernel.start(PAYLOAD, handler, CONFIG, pool=pool) as k:
        yield k


@pytest.fixture
async def short_kernel(handler: Handler, pool: KernelPool) -> AsyncIterator[Kernel]:
    """For the cells only the clock can stop."""
    config = replace(CONFIG, cell_timeout_s=SHORT_TIMEOUT_S)
    async with await Kernel.start(PAYLOAD, handler, config, pool=pool) as k:
        yield k


async def usable(k: Kernel) -> None:
    """The kernel still answers, with the codebase loaded and the scaffold working."""
    r = await k.exec("print(len(codebase), sorted(codebase)[0], llm_query('ping'))")
    assert (r.error, r.output) == (None, "2 src/app.py ok\n"), r.output


def descendants(pid: int) -> set[int]:
    """All live processes below ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def gone(pids: set[int], wait_s: float = 30.0) -> bool:
    """Whether all of ``pids`` are dead (zombies count as dead), waiting up to ``wait_s`` (a bound
    only a hang reaches: they are killed when the cell ends, and reaped soon after)."""
    deadline = time.monotonic() + wait_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not alive(pids)


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


# ---------------------------------------------------------------- secrets and files


async def test_01_env_holds_no_parent_keys(kernel: Kernel) -> None:
    r = await kernel.exec(cells.env_keys("sk-or"))
    assert r.output == "False False\n0\n"
    await usable(kernel)


@needs_bwrap
async def test_02_parent_environ_via_proc_is_out_of_reach(kernel: Kernel) -> None:
    r = await kernel.exec(cells.parent_environ("sk-or", os.getpid()))
    assert r.output == "False 1\n"  # the parent is bwrap's init in a pid namespace
    await usable(kernel)


@needs_bwrap
async def test_03_real_home_files_are_invisible(kernel: Kernel, tmp_path: Path) -> None:
    secret = tmp_path / "home" / ".config" / "keys.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    real_home = Path.home()
    r = await kernel.exec(cells.home_files(str(secret), str(real_home)))
    assert SECRET not in r.output
    lines = r.output.splitlines()
    assert lines[0] == "FileNotFoundError"
    assert lines[1].startswith("/tmp ")
    visible = lines[1].split(" ", 1)[1]
    # At most the directory holding the interpreter (e.g. pyenv under /root) is mounted.
    assert visible == "absent" or set(eval(visible)) <= set(
        Path(os.path.realpath(sys.executable)).parts
    )
    await usable(kernel)


@needs_bwrap
async def test_04_repository_dir_cannot_be_written(kernel: Kernel, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("print('hello')\n")
    r = await kernel.exec(cells.write_file(str(repo / "pwned.txt")))
    assert r.output != "wrote\n"
    assert sorted(p.name for p in repo.iterdir()) == ["app.py"]
    await usable(kernel)


@needs_bwrap
async def test_05_system_paths_are_read_only_and_etc_is_not_the_hosts(kernel: Kernel) -> None:
    marker = "/etc/deeprepo-attack-marker"
    r = await kernel.exec(cells.system_paths(marker))
    lines = r.output.splitlines()
    # EROFS, or EACCES where the kernel runs as nobody (deeprepo as root); and no host /etc at all
    assert lines[1] in ("13", "30") and lines[2] in ("13", "30") and lines[3] == "False False"
    assert not os.path.exists(marker)  # whatever the sandbox's own /etc took, the host's did not
    await usable(kernel)


async def test_06_private_tmp_is_writable_and_private(kernel: Kernel) -> None:
    r = await kernel.exec(cells.private_tmp())
    assert r.output == "True data\n"
    await usable(kernel)


# ---------------------------------------------------------------- network


@needs_bwrap
async def test_07_tcp_to_a_loopback_server_fails(kernel: Kernel) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    r = await kernel.exec(cells.tcp_connect(port, SECRET))
    server.setblocking(False)
    with pytest.raises(BlockingIOError):  # nothing is waiting in the backlog
        server.accept()
    server.close()
    assert r.output in ("ConnectionRefusedError\n", "OSError\n"), r.output
    await usable(kernel)


@needs_bwrap
async def test_08_dns_resolution_fails(kernel: Kernel) -> None:
    r = await kernel.exec(cells.dns())
    assert r.output == "gaierror\ngaierror\n"
    r = await kernel.exec(cells.INTERFACES)
    # no interface but a loopback, or (seccomp refuses netlink) no answer at all
    assert r.output in ("[(1, 'lo')]\n", "[]\n", "EAFNOSUPPORT\n"), r.output
    await usable(kernel)


# ---------------------------------------------------------------- processes


async def test_09_bounded_fork_bomb_dies_with_the_cell(kernel: Kernel) -> None:
    r = await kernel.exec(cells.bounded_fork(40, comm="dr-fork09"))
    assert r.error is None
    started = int(r.output.splitlines()[0])
    assert started > 0  # RLIMIT_NPROC or pids.max may stop a busy machine short of 40
    assert f"stopped {started} process(es) this cell left running" in r.output
    assert kernel.pid is not None
    kernel_pid = kernel._conn.child.kernel_pid if kernel._conn else None  # named so too
    assert gone({p for p in descendants(kernel.pid) if comm(p) == "dr-fork09"} - {kernel_pid})
    r = await kernel.exec(cells.bounded_fork(40))  # the zombies were reaped: all 40 again
    assert int(r.output.splitlines()[0]) == started
    await usable(kernel)


@needs_bwrap
async def test_10_setsid_grandchild_cannot_outlive_the_sandbox(kernel: Kernel) -> None:
    r = await kernel.exec(cells.setsid_escape())
    assert r.output.startswith("spawned\n")
    assert "stopped 1 process(es) this cell left running" in r.output
    assert kernel.pid is not None
    assert len(alive(descendants(kernel.pid))) == 2  # bwrap's init and the kernel: no other
    await usable(kernel)


async def test_11_subprocess_sees_the_same_scrubbed_sandbox(kernel: Kernel) -> None:
    r = await kernel.exec(cells.SUBPROCESS_ENV)
    assert r.output.startswith(("False 0\n", "blocked 11\n"))
    if r.output.startswith("False"):
        assert "via-system" in r.output  # raw fd output is shown, never parsed as a message
    await usable(kernel)


@needs_bwrap
async def test_12_killing_the_parent_is_impossible(kernel: Kernel) -> None:
    r = await kernel.exec(cells.KILL_PARENT)
    assert r.output.endswith("still here\n")
    assert os.getpid() > 0  # this process was not touched: we are still running
    await usable(kernel)


async def test_13_os_exit_restarts_the_kernel(kernel: Kernel) -> None:
    await kernel.exec("mine = 1")
    r = await kernel.exec(cells.os_exit(1))
    assert (r.error, r.restarted, r.lost_variables) == ("crashed", True, ["mine"])
    assert "exit code 1" in r.output
    await usable(kernel)


async def test_14_segfault_via_ctypes_restarts_the_kernel(kernel: Kernel) -> None:
    r = await kernel.exec(cells.SEGFAULT)
    assert (r.error, r.restarted) == ("crashed", True)
    assert "SIGSEGV" in r.output and "Segmentation fault" in r.output
    await usable(kernel)


async def test_15_closing_the_rpc_pipes_restarts_the_kernel(kernel: Kernel) -> None:
    r = await kernel.exec(cells.CLOSE_RPC_PIPES)
    assert r.restarted is True and r.error in ("crashed", "killed")
    await usable(kernel)


# ---------------------------------------------------------------- resources


async def test_16_memory_bomb_raises_memory_error(kernel: Kernel) -> None:
    r = await kernel.exec(cells.MEMORY_BOMB)
    assert r.error == "exception" and "MemoryError" in r.output
    r = await kernel.exec(cells.MEMORY_HOARD)
    assert r.error == "exception" and "MemoryError" in r.output and not r.restarted
    await kernel.exec("del hoard")
    await usable(kernel)


async def test_17_infinite_loop_ignoring_signals_is_killed(short_kernel: Kernel) -> None:
    r = await short_kernel.exec(cells.INFINITE_LOOP_IGNORING_SIGNALS)
    assert (r.error, r.restarted) == ("timeout", True)
    await usable(short_kernel)


async def test_18_unbounded_recursion_is_contained(short_kernel: Kernel) -> None:
    r = await short_kernel.exec(cells.RECURSION)
    assert r.error == "exception" and "RecursionError" in r.output
    r = await short_kernel.exec(cells.DEEP_RECURSION)
    # Depending on the interpreter: RecursionError, a C-stack crash or the cell timeout.
    assert r.error in ("exception", "crashed", "timeout")
    await usable(short_kernel)


async def test_19_printing_a_hundred_million_chars_is_bounded(kernel: Kernel) -> None:
    r = await kernel.exec(cells.PRINT_FLOOD)  # how long it takes: benchmarks/bench_speed_targets.py
    assert r.error is None
    assert len(r.output) < kernel.config.output_limit + 40
    assert r.output.startswith("AAAA") and r.output.endswith("AEND\n") and "chars cut" in r.output
    await usable(kernel)


async def test_20_file_size_and_open_file_limits(kernel: Kernel) -> None:
    r = await kernel.exec(cells.file_limits(4 * 2**20, 64))
    assert r.output == "27\n24 True\n"  # EFBIG at 1 MiB, EMFILE at 64 fds
    await usable(kernel)


# ---------------------------------------------------------------- the scaffold and the protocol


async def test_21_overwriting_scaffold_names_is_undone(kernel: Kernel) -> None:
    r = await kernel.exec(cells.OVERWRITE_SCAFFOLD)
    assert sorted(r.restored) == ["answer", "llm_batch", "set_answer"]
    assert r.answer == {"content": "FORGED", "ready": False}
    r = await kernel.exec("print(llm_batch(['x']))\nset_answer('real')")
    assert r.output == "['ok']\n" and r.answer == {"content": "real", "ready": True}
    await usable(kernel)


async def test_22_a_hundred_thousand_prompts_do_not_hurt_the_parent(
    kernel: Kernel, handler: Handler
) -> None:
    r = await kernel.exec(cells.huge_batch(100_000))
    assert r.output == "100000 {'ok'}\n"
    assert r.llm_calls == 100_000 and handler.prompts == 100_000
    await usable(kernel)


async def test_23_a_fifty_megabyte_prompt_is_refused_per_item(
    kernel: Kernel, handler: Handler
) -> None:
    r = await kernel.exec(cells.FIFTY_MB_PROMPT)
    assert r.output.startswith("ok [llm error] prompt 1 has 52,428,800 chars, over the")
    assert handler.batches == [1]  # the big one was never sent
    await usable(kernel)


async def test_24_raw_garbage_on_the_rpc_pipe_is_ignored(kernel: Kernel) -> None:
    r = await kernel.exec(cells.RPC_GARBAGE)
    assert r.output.startswith("hit True\n")
    assert "malformed message(s)" in r.output
    await usable(kernel)


async def test_25_an_over_long_line_on_the_rpc_pipe_is_dropped(kernel: Kernel) -> None:
    r = await kernel.exec(cells.RPC_OVERLONG_LINE)
    assert r.output.startswith("done\n") or r.restarted
    await usable(kernel)


async def test_26_system_exit_and_stdout_swaps_are_contained(kernel: Kernel) -> None:
    r = await kernel.exec(cells.SYSTEM_EXIT)
    assert r.error == "exception" and "kernel keeps running" in r.output
    r = await kernel.exec("print('visible')")
    assert r.output == "visible\n"
    await usable(kernel)
