"""The kernel's process isolation, attacked through ``Kernel.exec`` (issue 7 items 1, 4, 5, 6,
12): never host root, read-only sysctls, / and /dev, capped tmpfs, the seccomp filter,
leftover processes, the process tree's memory, and what process mode still guards.
Checks that need bwrap, a cgroup, libseccomp or Landlock skip with the reason where the
machine lacks them.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import isolation_cells as iso
import pytest

from deeprepo.sandbox import cgroup, seccomp
from deeprepo.sandbox.config import SandboxConfig
from deeprepo.sandbox.harden import landlock_abi
from deeprepo.sandbox.isolation import bwrap_argv, bwrap_problem, child_command
from deeprepo.sandbox.kernel import Kernel

SECRET = "sk-or-v1-isolation-canary-51c9"
PAYLOAD: dict[str, Any] = {"codebase": {"a.py": "x = 1\n"}, "file_tree": "a.py", "metadata": {}}
BWRAP = bwrap_problem()
CGROUP = cgroup.problem()
try:
    seccomp.filter_bpf()
    SECCOMP: str | None = None
except seccomp.SeccompUnavailable as exc:
    SECCOMP = str(exc)
ROOT = os.geteuid() == 0

needs_bwrap = pytest.mark.skipif(BWRAP is not None, reason=f"needs bwrap: {BWRAP}")
needs_cgroup = pytest.mark.skipif(CGROUP is not None, reason=f"needs a cgroup: {CGROUP}")
needs_seccomp = pytest.mark.skipif(SECCOMP is not None, reason=f"needs libseccomp: {SECCOMP}")
x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 syscall numbers")


async def answer(batch: list[str], system: str | None) -> list[str]:
    return ["ok"] * len(batch)


@pytest.fixture
async def kernel(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Kernel]:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    config = SandboxConfig(cell_timeout_s=20, tmp_size_mb=32, memory_limit_mb=768)
    async with await Kernel.start(PAYLOAD, answer, config) as k:
        yield k


async def usable(k: Kernel) -> None:
    r = await k.exec("print(len(codebase), llm_query('ping'))")
    assert (r.error, r.output) == (None, "1 ok\n"), r.output


# ---------------------------------------------------------------- unit: the command lines


def test_bwrap_as_root_has_no_user_namespace_and_a_read_only_root() -> None:
    argv = bwrap_argv(
        "bwrap", "/usr/bin/python3", 8, ["/usr/bin/python3"], as_root=True, seccomp_fd=9
    )
    assert "--unshare-all" not in argv and "--unshare-user" not in argv
    assert {"--unshare-pid", "--unshare-net", "--unshare-ipc"} <= set(argv)
    adds = [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"]
    assert adds == ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]  # dropped by the child at once
    i = argv.index("--remount-ro")
    assert argv[i : i + 6] == ["--remount-ro", "/proc", "--remount-ro", "/dev", "--remount-ro", "/"]
    assert argv[argv.index("--seccomp") + 1] == "9"
    for mount, size in (("/tmp", 8), ("/dev/shm", 8)):
        j = argv.index(mount)
        assert argv[j - 1] == "--tmpfs" and argv[j - 2] == str(size * 2**20)
        assert argv[j - 5 : j - 3] == ["--perms", "1777"]
    user = bwrap_argv("bwrap", "/usr/bin/python3", 8, ["/usr/bin/python3"], as_root=False)
    assert "--unshare-all" in user and "--cap-add" not in user and "--seccomp" not in user


def test_child_command_asks_the_child_to_give_up_root() -> None:
    cmd = child_command("bwrap", 5, 6, 8, seccomp_fd=7, cgroup_fds=(8, 9))
    child = cmd[cmd.index("--") + 1 :]
    assert child[-4:-2] == ["--cgroup-fds", "8,9"] or "--cgroup-fds" in child
    assert ("--drop-to" in child) == ROOT
    proc = child_command("process", 5, 6, 8, seccomp_fd=7, tmpdir="/tmp/x")
    assert proc[proc.index("--seccomp-fd") + 1] == "7"
    assert ("--landlock" in proc) == bool(landlock_abi())
    assert ("--drop-to" in proc or "--drop-caps" in proc) == ROOT


@needs_seccomp
def test_the_seccomp_program_is_built_once_and_is_bpf() -> None:
    program = seccomp.filter_bpf()
    assert program is seccomp.filter_bpf() and len(program) % 8 == 0 and len(program) > 100


def test_config_limits_for_the_cgroup() -> None:
    limits = SandboxConfig(memory_limit_mb=1000, max_processes=10, cpus=0.5).cgroup_limits()
    assert (limits.memory_mb, limits.processes, limits.cpus) == (1000, 10, 0.5)
    with pytest.raises(ValueError):
        SandboxConfig(cpus=-1)


# ---------------------------------------------------------------- item 1: never host root


@pytest.mark.e2e
@needs_bwrap
async def test_cells_never_run_as_host_root_or_with_capabilities(kernel: Kernel) -> None:
    r = await kernel.exec(iso.IDENTITY)
    lines = r.output.splitlines()
    ids = lines[0].split()
    assert ids[0] == "uid" and "0" not in ids[1:4] and "0" not in ids[5:8], r.output
    assert lines[1] == "caps " + " ".join(["0000000000000000"] * 3 + ["0000000000000000"]) or (
        not ROOT and lines[1].split()[1] == "0000000000000000"
    ), r.output
    if SECCOMP is None:
        assert lines[2] == "seccomp 2 nnp 1"
    await usable(kernel)


@pytest.mark.e2e
@needs_bwrap
async def test_host_sysctls_cannot_be_written(kernel: Kernel) -> None:
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    r = await kernel.exec(iso.sysctl_write())
    results = r.output.split()
    assert len(results) == 3 and "wrote" not in results, r.output
    r = await kernel.exec(
        "print([l.split()[5].split(',')[0] for l in open('/proc/self/mountinfo')"
        " if l.split()[4] == '/proc'])"
    )
    assert r.output == "['ro']\n"  # read-only whatever the uid: /proc/sys with it
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before
    await usable(kernel)


# ---------------------------------------------------------------- item 5: the disk caps


@pytest.mark.e2e
@needs_bwrap
async def test_root_and_dev_are_read_only_and_tmp_and_shm_are_capped(kernel: Kernel) -> None:
    # 100 MB against a 32 MB /tmp, a 32 MB /dev/shm (min(tmp, 64)), and nothing at / or /dev.
    r = await kernel.exec(iso.fill(("/", "/dev", "/dev/shm", "/tmp"), 100))
    got = {
        line.split()[0]: (int(line.split()[1]), line.split()[2]) for line in r.output.splitlines()
    }
    assert got["/"][0] == 0 and got["/"][1] in ("OSError", "PermissionError"), r.output
    assert got["/dev"][0] == 0 and got["/dev"][1] in ("OSError", "PermissionError"), r.output
    assert 0 < got["/dev/shm"][0] <= 32 and got["/dev/shm"][1] == "OSError", r.output
    assert 0 < got["/tmp"][0] <= 32 and got["/tmp"][1] == "OSError", r.output
    await usable(kernel)


# ---------------------------------------------------------------- item 4: seccomp


@pytest.mark.e2e
@needs_bwrap
@needs_seccomp
@x86_64
async def test_seccomp_refuses_ptrace_namespaces_keyring_bpf_io_uring(kernel: Kernel) -> None:
    r = await kernel.exec(iso.SYSCALLS)
    res = dict(kv.split("=") for kv in r.output.split())
    for name, value in res.items():
        if name == "proc1_mem":
            assert value in ("PermissionError", "FileNotFoundError"), res
        elif name == "raise_rlimit_as":
            assert value in ("ValueError", "PermissionError"), res
        else:
            assert value == "EPERM", (name, res)
    r = await kernel.exec(iso.STILL_WORKS)
    assert r.output.splitlines()[0] == "thread sub [2, 3]", r.output
    await usable(kernel)


@pytest.mark.e2e
@needs_bwrap
async def test_cells_cannot_signal_the_sandbox_init(kernel: Kernel) -> None:
    r = await kernel.exec(iso.SIGNAL_PARENT)
    assert r.output == ("PermissionError PermissionError\n" if ROOT else r.output)
    await usable(kernel)


# ---------------------------------------------------------------- item 6: leftovers, memory


@pytest.mark.e2e
@needs_bwrap
async def test_a_daemon_a_cell_leaves_is_stopped_when_the_cell_ends(kernel: Kernel) -> None:
    marker = "drdaemon51c9"
    r = await kernel.exec(iso.daemon(marker))
    assert r.output.startswith("daemonized\n"), r.output
    assert "[deeprepo] stopped 2 process(es) this cell left running" in r.output
    deadline = time.monotonic() + 30  # killed when the cell ended; gone soon after, however loaded
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _marked(marker)
    await usable(kernel)


@pytest.mark.e2e
@needs_bwrap
async def test_per_cell_cleanup_stops_nothing_when_nothing_was_left(kernel: Kernel) -> None:
    # Its cost per cell is benchmarks/bench_speed_targets.py's to measure.
    child = kernel._conn.child if kernel._conn else None
    assert child is not None and child.kernel_pid is not None
    for _ in range(200):
        assert child.stop_leftovers() == 0


MODES = ["process"] if BWRAP is not None else ["process", "bwrap"]
_LATE_PROCESS = (
    "import subprocess, threading, time\n"
    "def later():\n"
    "    time.sleep(0.3)\n"
    "    subprocess.Popen(['sleep', '30'])\n"
    "threading.Thread(target=later).start()\n"
    "print('armed')"
)


@pytest.mark.e2e
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("mode", MODES)
async def test_a_process_a_thread_starts_after_its_cell_is_stopped_after_the_next(
    mode: str,
) -> None:
    # The leftover check skips listing the cgroup when its task count is the kernel's own:
    # a thread that outlives its cell and starts a process, then ends, must not hide it.
    config = SandboxConfig(mode=mode, cell_timeout_s=20)  # type: ignore[arg-type]
    async with await Kernel.start(PAYLOAD, answer, config) as k:
        r = await k.exec(_LATE_PROCESS)
        assert r.output == "armed\n", r.output
        time.sleep(1.0)  # the thread has started its process and ended
        r = await k.exec("x = 1")
        assert "[deeprepo] stopped 1 process(es) this cell left running" in r.output, r.output
        r = await k.exec(
            "import threading, time, subprocess\n"
            "threading.Thread(target=time.sleep, args=(2,)).start()\n"
            "p = subprocess.Popen(['sleep', '30'])"
        )
        assert "[deeprepo] stopped 1 process(es) this cell left running" in r.output, r.output
        child = k._conn.child if k._conn else None
        assert child is not None
        if CGROUP is None:  # the count is what is compared: the kernel's threads alone
            assert child.group is not None and child.kernel_tasks is not None
        child.kernel_tasks = None  # no count to compare (no pids controller): the full list
        r = await k.exec("import subprocess\np = subprocess.Popen(['sleep', '30'])")
        assert "[deeprepo] stopped 1 process(es) this cell left running" in r.output, r.output
        await usable(k)


@pytest.mark.e2e
@needs_cgroup
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("mode", MODES)
async def test_the_task_count_is_read_afresh_and_the_list_only_when_it_differs(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = SandboxConfig(mode=mode, cell_timeout_s=20)  # type: ignore[arg-type]
    async with await Kernel.start(PAYLOAD, answer, config) as k:
        child = k._conn.child if k._conn else None
        assert child is not None and child.group is not None
        assert child.kernel_tasks == child.group.tasks() == 2  # the main and the loop thread
        listed: list[int] = []
        pids = child.group.pids
        monkeypatch.setattr(child.group, "pids", lambda: listed.append(1) or pids())
        await k.exec("x = 1")
        assert listed == []  # nothing left: the count alone was read
        await k.exec(
            "import threading, time\nthreading.Thread(target=time.sleep, args=(1,)).start()"
        )
        assert listed and child.group.tasks() == 3  # a thread left: the list was read
        await usable(k)


@pytest.mark.e2e
@needs_bwrap
@needs_cgroup
async def test_memory_is_limited_for_the_whole_tree(kernel: Kernel) -> None:
    # 4 x 300 MB against a 768 MB tree: each alone would fit its own RLIMIT_AS.
    r = await kernel.exec(iso.tree_memory(4, 300))
    lines = r.output.splitlines()
    assert lines[-1] == "done" or r.restarted, r.output
    if not r.restarted:
        assert int(lines[0]) < 4, r.output
    await usable(kernel)


@pytest.mark.e2e
@needs_bwrap
@needs_cgroup
async def test_the_kernel_gets_its_own_cgroup_and_it_goes_at_close(kernel: Kernel) -> None:
    child = kernel._conn.child if kernel._conn else None
    assert child is not None and child.group is not None
    dirs = list(child.group.dirs.values())
    assert all(os.path.isdir(d) for d in dirs)
    assert child.kernel_pid in child.group.pids()
    await kernel.close()
    assert not any(os.path.isdir(d) for d in dirs)


# ---------------------------------------------------------------- item 12: process mode


@pytest.mark.e2e
async def test_process_mode_keeps_the_parent_and_its_environment_out_of_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    config = SandboxConfig(mode="process", cell_timeout_s=20)
    with pytest.warns(RuntimeWarning, match="--sandbox process"):
        import deeprepo.sandbox.isolation as isolation

        monkeypatch.setattr(isolation, "_warned", set())
        k = await Kernel.start(PAYLOAD, answer, config)
    async with k:
        r = await k.exec(iso.parent_environ_process(SECRET))
        assert r.output.split()[0] == "False" and "read" not in r.output.split()[1:3], r.output
        assert SECRET not in r.output
        r = await k.exec(
            "import os\nprint(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid())"
        )
        assert r.output == "True True\n"  # its own session
        if landlock_abi() >= 6:
            r = await k.exec(iso.SIGNAL_PARENT)
            assert r.output.split()[0] == "PermissionError", r.output
        if landlock_abi() >= 4:
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            port = server.getsockname()[1]
            r = await k.exec(
                f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n"
                "    print('connected')\nexcept OSError as e:\n    print(type(e).__name__)"
            )
            server.close()
            assert r.output == "PermissionError\n"  # Landlock: no TCP at all
        if landlock_abi():
            home = os.path.expanduser("~")
            r = await k.exec(f"open({os.path.join(home, 'dr-landlock-probe')!r}, 'w')")
            assert r.error == "exception" and "PermissionError" in r.output
            assert not os.path.exists(os.path.join(home, "dr-landlock-probe"))
        r = await k.exec(
            "import tempfile, os\np = os.path.join(tempfile.gettempdir(), 'ok')\nopen(p, 'w').write('1')\nprint(open(p).read())"
        )
        assert r.output == "1\n"  # its private dir works
        await usable(k)


def _marked(marker: str) -> list[int]:
    """Live processes whose name, command line or environment carries ``marker``."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z":
                continue
            blobs = [
                Path(f"/proc/{entry}/{f}").read_bytes() for f in ("comm", "cmdline", "environ")
            ]
        except OSError:
            continue
        if any(needle in b for b in blobs):
            found.append(int(entry))
    return found


def test_process_mode_as_root_refuses_without_nobody_or_landlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import deeprepo.sandbox.isolation as isolation
    from deeprepo.base.errors import SandboxRefused

    monkeypatch.setattr(isolation, "process_drop_args", lambda python: ["--drop-caps"])
    monkeypatch.setattr(isolation, "landlock_abi", lambda: 0)
    with pytest.raises(SandboxRefused, match="Install bubblewrap"):
        isolation.resolve_mode("process")


def test_cgroup_knobs_v2_and_v1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Plain directories stand in for cgroupfs: the knobs written are what the kernel reads.
    limits = cgroup.CgroupLimits(memory_mb=2048, processes=64, cpus=1.5)
    monkeypatch.setattr(cgroup, "_layout", lambda: cgroup._Layout(2, {"unified": str(tmp_path)}))
    monkeypatch.setattr(cgroup, "_ensure_watchdog", lambda parents: None)
    group = cgroup.create(limits)
    path = Path(group.dirs["unified"])
    assert path.parent == tmp_path and path.name.startswith(f"deeprepo-{os.getpid()}-")
    knobs = {
        f: (path / f).read_text() for f in ("memory.max", "memory.swap.max", "pids.max", "cpu.max")
    }
    assert knobs == {
        "memory.max": str(2048 * 2**20),
        "memory.swap.max": "0",
        "pids.max": "64",
        "cpu.max": "150000 100000",
    }
    (path / "cgroup.procs").write_text("101\n102\n")
    assert group.pids() == [101, 102]
    (path / "cgroup.kill").write_text("")
    group.kill()
    assert (path / "cgroup.kill").read_text() == "1"

    v1 = {c: tmp_path / "v1" / c for c in ("memory", "pids", "cpu")}
    for d in v1.values():
        d.mkdir(parents=True)
    monkeypatch.setattr(
        cgroup, "_layout", lambda: cgroup._Layout(1, {c: str(d) for c, d in v1.items()})
    )
    group = cgroup.create(limits)
    mem, pids, cpu = (Path(group.dirs[c]) for c in ("memory", "pids", "cpu"))
    assert (mem / "memory.limit_in_bytes").read_text() == str(2048 * 2**20)
    assert (mem / "memory.memsw.limit_in_bytes").read_text() == str(2048 * 2**20)
    assert (pids / "pids.max").read_text() == "64"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "150000"
    assert (cpu / "cpu.cfs_period_us").read_text() == "100000"


def test_cgroup_v2_parent_needs_memory_and_pids(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("io\n")
    assert cgroup._v2_parent(str(tmp_path), "/") == str(tmp_path) + "/"
    (tmp_path / "cgroup.controllers").write_text("cpu io hugetlb\n")
    with pytest.raises(cgroup.CgroupUnavailable, match="no memory/pids"):
        cgroup._v2_parent(str(tmp_path), "/")


def _make_group_then_report(out: Any, go: Any, hold: Any) -> None:
    """In a forked worker: make a kernel cgroup, say where, then wait until told to go."""
    limits = SandboxConfig().cgroup_limits()
    assert limits is not None
    group = cgroup.create(limits)
    out.put(sorted(group.dirs.values()))
    go.wait(30)
    if hold:
        group.remove()


@pytest.mark.e2e  # forks two workers that make cgroups and start watchdogs
@needs_cgroup
def test_forked_workers_never_share_or_sweep_each_others_cgroups() -> None:
    """Two forked workers (an eval's, a benchmark's) each make a cgroup: the names differ,
    and when the first exits, its watchdog leaves the second's live cgroup alone (it once
    removed it, and the second's kernel failed joining it with ENODEV)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    out, go_a, go_b = ctx.Queue(), ctx.Event(), ctx.Event()
    a = ctx.Process(target=_make_group_then_report, args=(out, go_a, False))
    b = ctx.Process(target=_make_group_then_report, args=(out, go_b, True))
    a.start()
    dirs_a = out.get(timeout=30)
    b.start()
    dirs_b = out.get(timeout=30)
    assert set(dirs_a).isdisjoint(dirs_b)
    go_a.set()
    a.join(30)
    time.sleep(1.5)  # the first worker's watchdog has swept what it owns by now
    try:
        assert all(os.path.isdir(d) for d in dirs_b), "a worker's watchdog removed another's cgroup"
    finally:
        go_b.set()
        b.join(30)
