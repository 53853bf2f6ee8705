"""Hostile cells aimed at the kernel's process isolation (issue 7: uid, sysctls, read-only
/ and /dev, capped tmpfs, seccomp, leftover processes, the tree's memory, kill -9).

Each is a string of Python run as one cell, printing a short, checkable result. Shared by
``test_sandbox_isolation.py`` (through ``Kernel.exec``) and ``test_isolation_e2e.py``
(through the real CLI).
"""

from __future__ import annotations

IDENTITY = (
    "import os\nst = {l.split(':')[0]: l.split(':', 1)[1].split() for l in open('/proc/self/status')}\n"
    "print('uid', *os.getresuid(), 'gid', *os.getresgid())\n"
    "print('caps', st['CapEff'][0], st['CapPrm'][0], st['CapBnd'][0], st['CapInh'][0])\n"
    "print('seccomp', st['Seccomp'][0], 'nnp', st['NoNewPrivs'][0])"
)
"""Prints the cell's uids/gids, capability sets, seccomp mode and no_new_privs."""


def sysctl_write(
    paths: tuple[str, ...] = ("kernel/core_pattern", "vm/drop_caches", "kernel/domainname"),
) -> str:
    """Try to write host sysctls. Prints one error name (or ``wrote``) per path."""
    return (
        "res = []\n"
        f"for p in {paths!r}:\n"
        "    try:\n        open('/proc/sys/' + p, 'w').write('|/tmp/pwn %p' if 'core' in p else '3')\n"
        "        res.append('wrote')\n"
        "    except OSError as e:\n        res.append(type(e).__name__)\nprint(*res)"
    )


def fill(paths: tuple[str, ...], total_mb: int, file_mb: int = 1) -> str:
    """Write up to ``total_mb`` into each directory in files of ``file_mb`` (under
    RLIMIT_FSIZE) until an error. Prints ``<dir> <MB written> <error or ok>`` per directory,
    then removes what it wrote."""
    return (
        "import os\nchunk = b'x' * (2**20)\n"
        f"for d in {paths!r}:\n"
        "    done, err, n = 0, 'ok', 0\n"
        f"    while done < {total_mb}:\n"
        "        try:\n"
        "            with open(os.path.join(d, f'fill-{n}'), 'wb') as f:\n"
        f"                for _ in range({file_mb}):\n"
        "                    f.write(chunk)\n                    done += 1\n"
        "        except OSError as e:\n            err = type(e).__name__\n            break\n"
        "        n += 1\n"
        "    print(d, done, err)\n"
        "    for i in range(n + 1):\n"
        "        try:\n            os.remove(os.path.join(d, f'fill-{i}'))\n"
        "        except OSError:\n            pass"
    )


SYSCALLS = (
    "import ctypes, os, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "def sc(*a):\n    r = libc.syscall(*[ctypes.c_long(x) for x in a])\n"
    "    return 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')\n"
    "res = {}\n"
    "res['ptrace_attach_init'] = sc(101, 16, 1, 0, 0)\n"  # ptrace(PTRACE_ATTACH, 1)
    "res['ptrace_traceme'] = sc(101, 0, 0, 0, 0)\n"
    "res['process_vm_readv'] = sc(310, 1, 0, 0, 0, 0, 0)\n"
    "res['unshare_user'] = sc(272, 0x10000000)\n"
    "res['unshare_mount'] = sc(272, 0x00020000)\n"
    "res['clone_newuser'] = sc(56, 0x10000000 | 17, 0, 0, 0, 0)\n"
    "res['setns'] = sc(308, 0, 0)\n"
    "res['mount'] = sc(165, 0, 0, 0, 0, 0)\n"
    "res['keyctl'] = sc(250, 0, 0, 0, 0, 0)\n"
    "res['add_key'] = sc(248, 0, 0, 0, 0, 0)\n"
    "res['bpf'] = sc(321, 0, 0, 0)\n"
    "res['perf_event_open'] = sc(298, 0, 0, 0, 0, 0)\n"
    "res['io_uring_setup'] = sc(425, 1, 0)\n"
    "res['userfaultfd'] = sc(323, 0)\n"
    "res['personality'] = sc(135, 0x0040000)\n"  # ADDR_NO_RANDOMIZE
    "res['memfd_create'] = sc(319, 0, 0)\n"
    "res['kexec_load'] = sc(246, 0, 0, 0, 0)\n"
    "res['init_module'] = sc(175, 0, 0, 0)\n"
    "res['setuid0'] = sc(105, 0)\n"
    "try:\n    open('/proc/1/mem', 'rb').read(1)\n    res['proc1_mem'] = 'ok'\n"
    "except OSError as e:\n    res['proc1_mem'] = type(e).__name__\n"
    "import resource\ntry:\n    s, h = resource.getrlimit(resource.RLIMIT_AS)\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
    "    res['raise_rlimit_as'] = 'ok'\nexcept (ValueError, OSError) as e:\n"
    "    res['raise_rlimit_as'] = type(e).__name__\n"
    "print(' '.join(f'{k}={v}' for k, v in sorted(res.items())))"
)
"""Prints ``name=result`` for each refused system call (``EPERM`` expected, ``ok`` = allowed)."""

STILL_WORKS = (
    "import threading, subprocess, multiprocessing as mp\n"
    "t = threading.Thread(target=lambda: None)\nt.start()\nt.join()\n"
    "out = subprocess.run(['sh', '-c', 'echo sub'], capture_output=True, text=True).stdout.strip()\n"
    "from concurrent.futures import ProcessPoolExecutor\n"
    "with ProcessPoolExecutor(2) as ex:\n    squares = list(ex.map(abs, [-2, -3]))\n"
    "print('thread', out, squares)"
)
"""What a normal cell does must still work under the filter. Prints ``thread sub [2, 3]``."""


def daemon(marker: str, seconds: int = 600) -> str:
    """A double-forked, setsid'd daemon named ``marker`` (comm, argv and environment) that
    ignores SIGTERM/SIGHUP and also tries to clear the sandbox init's parent-death signal by
    ptrace. Prints ``daemonized`` once it runs."""
    return (
        "import ctypes, os, signal, time, subprocess\n"
        f"os.environ['DR_MARK'] = {marker!r}\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
        "            signal.signal(s, signal.SIG_IGN)\n"
        f"        ctypes.CDLL(None).prctl(15, {marker.encode()!r})\n"
        "        ctypes.CDLL(None).ptrace(16, 1, 0, 0)  # refused: init keeps its death signal\n"
        f"        subprocess.Popen(['sleep', '{seconds}'], env=dict(os.environ), start_new_session=True)\n"
        "        os.write(w, b'up')\n"
        f"        time.sleep({seconds})\n"
        "    os._exit(0)\n"
        "os.read(r, 2)\n"
        "print('daemonized')"
    )


def tree_memory(children: int, mb: int, wait_s: float = 30.0) -> str:
    """Fork ``children`` processes that each fill ``mb`` MB and hold it until all have
    reported or died (so they overlap, however slow the machine). Prints how many filled
    their memory (a limit on the tree stops some), then ``done``."""
    return (
        "import os, time\nr, w = os.pipe()\nhold_r, hold_w = os.pipe()\npids = []\n"
        f"for _ in range({children}):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.close(hold_w)\n"
        "        try:\n"
        f"            block = bytearray(b'\\x01') * ({mb} * 2**20)\n"
        "            os.write(w, b'1')\n"
        "            os.read(hold_r, 1)  # until the parent lets go\n"
        "        finally:\n            os._exit(0)\n"
        "    pids.append(pid)\n"
        "os.close(w)\nos.set_blocking(r, False)\n"
        f"got, live, deadline = 0, set(pids), time.monotonic() + {wait_s}\n"
        "while got + len(pids) - len(live) < len(pids) and time.monotonic() < deadline:\n"
        "    try:\n        got += len(os.read(r, 64))\n    except BlockingIOError:\n        pass\n"
        "    for pid in list(live):\n"
        "        if os.waitpid(pid, os.WNOHANG)[0]:\n            live.discard(pid)\n"
        "    time.sleep(0.01)\n"
        "os.close(hold_w)\n"
        "for pid in live:\n    os.waitpid(pid, 0)\n"
        "print(got)\nprint('done')"
    )


SIGNAL_PARENT = (
    "import os, signal\nres = []\nfor pid in (os.getppid(), 1):\n    try:\n"
    "        os.kill(pid, 0)\n        res.append('can')\n"
    "    except OSError as e:\n        res.append(type(e).__name__)\nprint(*res)"
)
"""Checks (signal 0) whether the parent and pid 1 could be signalled. Prints one result each."""


def parent_environ_process(needle: str) -> str:
    """Process mode: read the parent's /proc environ and memory maps. Prints whether
    ``needle`` was found, then an error name per file."""
    return (
        "import os\nfound, errs = False, []\n"
        "for f in ('environ', 'maps', 'cmdline'):\n"
        "    try:\n        data = open(f'/proc/{os.getppid()}/{f}', 'rb').read()\n"
        f"        found = found or {needle.encode()!r} in data\n        errs.append('read')\n"
        "    except OSError as e:\n        errs.append(type(e).__name__)\n"
        "print(found, *errs)"
    )
