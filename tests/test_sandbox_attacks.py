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
from pathlib import Path
from typing import Any

import pytest

from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.isolation import bwrap_problem
from deeprepo.sandbox.kernel import Kernel
from deeprepo.sandbox.pool import KernelPool

SECRET = "sk-or-v1-attack-test-secret-7f3a"
FILES = {"src/app.py": "print('hello')\n", "src/db.py": "QUERY = 'select 1'\n"}
PAYLOAD: dict[str, Any] = {
    "codebase": FILES,
    "file_tree": "src/\n  app.py\n  db.py",
    "metadata": {"files": 2},
}
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
    config = SandboxConfig(
        cell_timeout_s=1.5, memory_limit_mb=512, max_file_size_mb=1, max_open_files=64
    )
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
    r = await kernel.exec(
        "import os\nprint(any('sk-or' in v for v in os.environ.values()), 'OPENROUTER_API_KEY' in os.environ)\n"
        "print(open('/proc/self/environ', 'rb').read().count(b'sk-or'))"
    )
    assert r.output == "False False\n0\n"
    await usable(kernel)


@needs_bwrap
async def test_02_parent_environ_via_proc_is_out_of_reach(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os\nfound = []\n"
        f"for pid in {{os.getppid(), {os.getpid()}, 1}}:\n"
        "    try:\n        found.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError as e:\n        found.append(type(e).__name__.encode())\n"
        "print(any(b'sk-or' in f for f in found), os.getppid())"
    )
    assert r.output == "False 1\n"  # the parent is bwrap's init in a pid namespace
    await usable(kernel)


@needs_bwrap
async def test_03_real_home_files_are_invisible(kernel: Kernel, tmp_path: Path) -> None:
    secret = tmp_path / "home" / ".config" / "keys.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    real_home = Path.home()
    r = await kernel.exec(
        "import os\n"
        f"try:\n    print(open({str(secret)!r}).read())\nexcept OSError as e:\n    print(type(e).__name__)\n"
        f"print(os.path.expanduser('~'), sorted(os.listdir({str(real_home)!r})) if os.path.isdir({str(real_home)!r}) else 'absent')"
    )
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
    r = await kernel.exec(
        f"try:\n    open({str(repo / 'pwned.txt')!r}, 'w').write('x')\n    print('wrote')\n"
        "except OSError as e:\n    print(type(e).__name__)"
    )
    assert r.output != "wrote\n"
    assert sorted(p.name for p in repo.iterdir()) == ["app.py"]
    await usable(kernel)


@needs_bwrap
async def test_05_system_paths_are_read_only_and_etc_is_not_the_hosts(kernel: Kernel) -> None:
    marker = "/etc/deeprepo-attack-marker"
    r = await kernel.exec(
        "import os\n"
        f"for path in ({marker!r}, '/usr/lib/deeprepo-marker', os.__file__):\n"
        "    try:\n        open(path, 'a').write('x')\n        print('wrote')\n"
        "    except OSError as e:\n        print(e.errno)\n"
        "print(os.path.exists('/etc/passwd'), os.path.exists('/etc/shadow'))"
    )
    lines = r.output.splitlines()
    assert lines[1:] == ["30", "30", "False False"]  # EROFS; and no host /etc at all
    assert not os.path.exists(marker)  # whatever the sandbox's own /etc took, the host's did not
    await usable(kernel)


async def test_06_private_tmp_is_writable_and_private(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os, tempfile\np = os.path.join(tempfile.gettempdir(), 'scratch.txt')\n"
        "open(p, 'w').write('data')\nprint(os.getcwd() == tempfile.gettempdir(), open(p).read())"
    )
    assert r.output == "True data\n"
    await usable(kernel)


# ---------------------------------------------------------------- network


@needs_bwrap
async def test_07_tcp_to_a_loopback_server_fails(kernel: Kernel) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    r = await kernel.exec(
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'{SECRET}')\n    print('connected')\n"
        "except OSError as e:\n    print(type(e).__name__)"
    )
    server.setblocking(False)
    with pytest.raises(BlockingIOError):  # nothing is waiting in the backlog
        server.accept()
    server.close()
    assert r.output in ("ConnectionRefusedError\n", "OSError\n"), r.output
    await usable(kernel)


@needs_bwrap
async def test_08_dns_resolution_fails(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import socket\nfor host in ('example.com', 'api.openai.com'):\n    try:\n"
        "        socket.getaddrinfo(host, 443)\n        print('resolved')\n"
        "    except OSError as e:\n        print(type(e).__name__)"
    )
    assert r.output == "gaierror\ngaierror\n"
    r = await kernel.exec("import socket\nprint(sorted(socket.if_nameindex()))")
    assert r.output in ("[(1, 'lo')]\n", "[]\n")  # no interface but a loopback
    await usable(kernel)


# ---------------------------------------------------------------- processes


async def test_09_bounded_fork_bomb_dies_with_the_kernel(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os, time\nkids = 0\nfor _ in range(40):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(600)\n        os._exit(0)\n"
        "    kids += 1\nprint(kids)"
    )
    assert r.error is None
    assert kernel.pid is not None
    forked = descendants(kernel.pid)
    # As root RLIMIT_NPROC does not apply and all 40 start; a busy non-root user may get fewer.
    assert len(forked) >= int(r.output)
    r = await kernel.exec("while True:\n    pass")
    assert (r.error, r.restarted) == ("timeout", True)
    time.sleep(0.1)
    assert alive(forked) == set()
    await usable(kernel)


@needs_bwrap
async def test_10_setsid_grandchild_cannot_outlive_the_sandbox(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        time.sleep(600)\n    os._exit(0)\ntime.sleep(0.2)\nprint('spawned')"
    )
    assert r.output == "spawned\n"
    assert kernel.pid is not None
    escaped = descendants(kernel.pid)
    assert escaped
    await kernel.exec("import os\nos._exit(0)")
    time.sleep(0.1)
    assert alive(escaped) == set()
    await usable(kernel)


async def test_11_subprocess_sees_the_same_scrubbed_sandbox(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import subprocess, os\ntry:\n"
        "    out = subprocess.run(['sh', '-c', 'env; echo to-fd2 >&2'], capture_output=True, text=True)\n"
        "    print('sk-or' in out.stdout, out.returncode)\n"
        "    os.system('echo via-system')\n"
        "except OSError as e:\n"
        "    print('blocked', e.errno)  # RLIMIT_NPROC for a non-root user with many processes"
    )
    assert r.output.startswith(("False 0\n", "blocked 11\n"))
    if r.output.startswith("False"):
        assert "via-system" in r.output  # raw fd output is shown, never parsed as a message
    await usable(kernel)


@needs_bwrap
async def test_12_killing_the_parent_is_impossible(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os, signal\nres = []\nfor pid in (os.getppid(), 1):\n    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n        res.append('sent')\n"
        "    except OSError as e:\n        res.append(type(e).__name__)\nprint('still here')"
    )
    assert r.output.endswith("still here\n")
    assert os.getpid() > 0  # this process was not touched: we are still running
    await usable(kernel)


async def test_13_os_exit_restarts_the_kernel(kernel: Kernel) -> None:
    await kernel.exec("mine = 1")
    r = await kernel.exec("import os\nos._exit(1)")
    assert (r.error, r.restarted, r.lost_variables) == ("crashed", True, ["mine"])
    assert "exit code 1" in r.output
    await usable(kernel)


async def test_14_segfault_via_ctypes_restarts_the_kernel(kernel: Kernel) -> None:
    r = await kernel.exec("import ctypes\nctypes.string_at(0)")
    assert (r.error, r.restarted) == ("crashed", True)
    assert "SIGSEGV" in r.output and "Segmentation fault" in r.output
    await usable(kernel)


async def test_15_closing_the_rpc_pipes_restarts_the_kernel(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n        pass"
    )
    assert r.restarted is True and r.error in ("crashed", "killed")
    await usable(kernel)


# ---------------------------------------------------------------- resources


async def test_16_memory_bomb_raises_memory_error(kernel: Kernel) -> None:
    r = await kernel.exec("blob = bytearray(10**11)")
    assert r.error == "exception" and "MemoryError" in r.output
    r = await kernel.exec("hoard = []\nwhile True:\n    hoard.append(bytearray(50 * 2**20))")
    assert r.error == "exception" and "MemoryError" in r.output and not r.restarted
    await kernel.exec("del hoard")
    await usable(kernel)


async def test_17_infinite_loop_ignoring_signals_is_killed(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"
    )
    assert (r.error, r.restarted) == ("timeout", True)
    await usable(kernel)


async def test_18_unbounded_recursion_is_contained(kernel: Kernel) -> None:
    r = await kernel.exec("def f(n):\n    return f(n + 1)\nf(0)")
    assert r.error == "exception" and "RecursionError" in r.output
    r = await kernel.exec(
        "import sys\nsys.setrecursionlimit(10**8)\ndef g(n):\n    return g(n + 1)\ng(0)"
    )
    # Depending on the interpreter: RecursionError, a C-stack crash or the cell timeout.
    assert r.error in ("exception", "crashed", "timeout")
    await usable(kernel)


async def test_19_printing_a_hundred_million_chars_is_bounded(kernel: Kernel) -> None:
    t0 = time.perf_counter()
    r = await kernel.exec("import sys\nsys.stdout.write('A' * 10**8)\nprint('END')")
    assert r.error is None
    assert time.perf_counter() - t0 < 5
    assert len(r.output) < kernel.config.output_limit + 40
    assert r.output.startswith("AAAA") and r.output.endswith("AEND\n") and "chars cut" in r.output
    await usable(kernel)


async def test_20_file_size_and_open_file_limits(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os\ntry:\n    open('big.bin', 'wb').write(b'x' * 4 * 2**20)\nexcept OSError as e:\n    print(e.errno)\n"
        "fs = []\ntry:\n    while True:\n        fs.append(open(os.devnull))\nexcept OSError as e:\n    print(e.errno, len(fs) < 64)\n"
        "for f in fs:\n    f.close()"
    )
    assert r.output == "27\n24 True\n"  # EFBIG at 1 MiB, EMFILE at 64 fds
    await usable(kernel)


# ---------------------------------------------------------------- the scaffold and the protocol


async def test_21_overwriting_scaffold_names_is_undone(kernel: Kernel) -> None:
    r = await kernel.exec(
        "llm_batch = lambda ps: ['forged'] * len(ps)\nanswer = 'FORGED'\nset_answer = print\n"
        "import builtins\nbuiltins.llm_query = None"
    )
    assert sorted(r.restored) == ["answer", "llm_batch", "set_answer"]
    assert r.answer == {"content": "FORGED", "ready": False}
    r = await kernel.exec("print(llm_batch(['x']))\nset_answer('real')")
    assert r.output == "['ok']\n" and r.answer == {"content": "real", "ready": True}
    await usable(kernel)


async def test_22_a_hundred_thousand_prompts_do_not_hurt_the_parent(
    kernel: Kernel, handler: Handler
) -> None:
    r = await kernel.exec(
        "res = llm_batch(['p%d' % i for i in range(100_000)])\nprint(len(res), set(res))"
    )
    assert r.output == "100000 {'ok'}\n"
    assert r.llm_calls == 100_000 and handler.prompts == 100_000
    await usable(kernel)


async def test_23_a_fifty_megabyte_prompt_is_refused_per_item(
    kernel: Kernel, handler: Handler
) -> None:
    r = await kernel.exec(
        "res = llm_batch(['small', 'x' * (50 * 2**20)])\nprint(res[0], res[1][:60])"
    )
    assert r.output.startswith("ok [llm error] prompt 1 has 52,428,800 chars, over the")
    assert handler.batches == [1]  # the big one was never sent
    await usable(kernel)


async def test_24_raw_garbage_on_the_rpc_pipe_is_ignored(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os, stat\nhit = 0\nfor fd in range(3, 32):\n    try:\n"
        "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
        '            os.write(fd, b\'garbage\\n{"type": "result", "id": -5}\\n[1, 2]\\n{"type": "llm", "id": 77, "prompts": 5}\\n\')\n'
        "            hit += 1\n    except OSError:\n        pass\nprint('hit', hit > 0)"
    )
    assert r.output.startswith("hit True\n")
    assert "malformed message(s)" in r.output
    await usable(kernel)


async def test_25_an_over_long_line_on_the_rpc_pipe_is_dropped(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import os, stat\nchunk = b'z' * 2**20\nfor fd in range(3, 32):\n    try:\n"
        "        st = os.fstat(fd)\n    except OSError:\n        continue\n"
        "    if stat.S_ISFIFO(st.st_mode) and os.get_blocking(fd) and fd > 2:\n"
        "        try:\n            for _ in range(70):\n                os.write(fd, chunk)\n"
        "            os.write(fd, b'\\n')\n        except OSError:\n            pass\nprint('done')"
    )
    assert r.output.startswith("done\n") or r.restarted
    await usable(kernel)


async def test_26_system_exit_and_stdout_swaps_are_contained(kernel: Kernel) -> None:
    r = await kernel.exec(
        "import sys\nsys.stdout = open('/dev/null', 'w')\nsys.stderr = None\nraise SystemExit(0)"
    )
    assert r.error == "exception" and "kernel keeps running" in r.output
    r = await kernel.exec("print('visible')")
    assert r.output == "visible\n"
    await usable(kernel)
