"""Hostile cells a root model could write: the code only, shared by the kernel-level
attack tests (``test_sandbox_attacks.py``, through ``Kernel.exec``) and the end-to-end
suite (``test_attacks_e2e.py``, as root replies served by the loopback server).

Each builder returns the Python of one cell. Values that differ between the two
suites (the secret looked for, ports, paths, pids, limits) are arguments; each suite
states what it expects the cell to print.
"""

from __future__ import annotations

# ---------------------------------------------------------------- secrets and files


def env_keys(needle: str) -> str:
    """Look for a key in the kernel's environment. Prints ``found has_var\\ncount``."""
    return (
        f"import os\nprint(any({needle!r} in v for v in os.environ.values()), 'OPENROUTER_API_KEY' in os.environ)\n"
        f"print(open('/proc/self/environ', 'rb').read().count({needle.encode()!r}))"
    )


def parent_environ(needle: str, pid: int) -> str:
    """Read ``/proc/<pid>/environ`` of the parent, of deeprepo's ``pid`` and of pid 1.
    Prints ``found ppid``."""
    return (
        "import os\nfound = []\n"
        f"for pid in {{os.getppid(), {pid}, 1}}:\n"
        "    try:\n        found.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError as e:\n        found.append(type(e).__name__.encode())\n"
        f"print(any({needle.encode()!r} in f for f in found), os.getppid())"
    )


def proc_scan(needle: str) -> str:
    """Read the environ and cmdline of every process the kernel can see. Prints
    ``scanned=<visible pids> hits=<files holding the needle>``."""
    return (
        "import os\nhits = scanned = 0\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    scanned += 1\n"
        "    for name in ('environ', 'cmdline'):\n"
        "        try:\n"
        f"            hits += {needle.encode()!r} in open(f'/proc/{{pid}}/{{name}}', 'rb').read()\n"
        "        except OSError:\n            pass\n"
        "print(f'scanned={scanned} hits={hits}')"
    )


def home_files(secret_path: str, real_home: str) -> str:
    """Read a key file under the real ``$HOME`` and list it. Prints the error name, then
    ``~ listing``."""
    return (
        "import os\n"
        f"try:\n    print(open({secret_path!r}).read())\nexcept OSError as e:\n    print(type(e).__name__)\n"
        f"print(os.path.expanduser('~'), sorted(os.listdir({real_home!r})) if os.path.isdir({real_home!r}) else 'absent')"
    )


def read_file(path: str) -> str:
    """Read a file outside the private temp dir (e.g. the repository on disk)."""
    return (
        f"try:\n    data = open({path!r}).read()\n    print('read', len(data))\n"
        "except OSError as e:\n    print(type(e).__name__)"
    )


def write_file(path: str) -> str:
    """Write a file outside the private temp dir. Prints ``wrote`` or the error name."""
    return (
        f"try:\n    open({path!r}, 'w').write('x')\n    print('wrote')\n"
        "except OSError as e:\n    print(type(e).__name__)"
    )


def system_paths(marker: str) -> str:
    """Write into /etc, /usr and the stdlib. Prints an errno per path, then whether
    /etc/passwd and /etc/shadow exist."""
    return (
        "import os\n"
        f"for path in ({marker!r}, '/usr/lib/deeprepo-marker', os.__file__):\n"
        "    try:\n        open(path, 'a').write('x')\n        print('wrote')\n"
        "    except OSError as e:\n        print(e.errno)\n"
        "print(os.path.exists('/etc/passwd'), os.path.exists('/etc/shadow'))"
    )


def private_tmp() -> str:
    """The private temp dir works (this one is allowed). Prints ``True data``."""
    return (
        "import os, tempfile\np = os.path.join(tempfile.gettempdir(), 'scratch.txt')\n"
        "open(p, 'w').write('data')\nprint(os.getcwd() == tempfile.gettempdir(), open(p).read())"
    )


# ---------------------------------------------------------------- network


def tcp_connect(port: int, payload: str) -> str:
    """Connect to 127.0.0.1:``port`` and send ``payload``. Prints ``connected`` or the error."""
    return (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'{payload}')\n    print('connected')\n"
        "except OSError as e:\n    print(type(e).__name__)"
    )


def dns() -> str:
    """Resolve two public names. Prints one line per name."""
    return (
        "import socket\nfor host in ('example.com', 'api.openai.com'):\n    try:\n"
        "        socket.getaddrinfo(host, 443)\n        print('resolved')\n"
        "    except OSError as e:\n        print(type(e).__name__)"
    )


# if_nameindex asks netlink, which seccomp refuses (EAFNOSUPPORT): the cell learns nothing.
INTERFACES = (
    "import errno, socket\ntry:\n    print(sorted(socket.if_nameindex()))\n"
    "except OSError as e:\n    print(errno.errorcode.get(e.errno, e.errno))"
)

# ---------------------------------------------------------------- processes


def bounded_fork(children: int, comm: str | None = None) -> str:
    """Fork ``children`` sleepers (named ``comm``, so a test can look for survivors).
    Prints how many started."""
    name = (
        f"import ctypes\nctypes.CDLL(None).prctl(15, {comm.encode()!r})  # PR_SET_NAME\n"
        if comm
        else ""
    )
    return (
        f"{name}import os, time\nkids = 0\nfor _ in range({children}):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(600)\n        os._exit(0)\n"
        "    kids += 1\nprint(kids)"
    )


def fork_bomb(depth: int, comm: str) -> str:
    """Every process forks again, ``depth`` times over: 2**depth processes (a bounded bomb,
    since uid 0 is exempt from RLIMIT_NPROC), all named ``comm``. Prints ``bombed``."""
    return (
        f"import ctypes, os, time\nctypes.CDLL(None).prctl(15, {comm.encode()!r})\n"
        f"top = os.getpid()\nfor _ in range({depth}):\n    try:\n        os.fork()\n"
        "    except OSError:\n        break\n"
        "if os.getpid() != top:\n    time.sleep(600)\n    os._exit(0)\nprint('bombed')"
    )


def setsid_escape(comm: str | None = None) -> str:
    """A grandchild in a new session, trying to outlive the kernel. Prints ``spawned``."""
    name = (
        f"import ctypes\n        ctypes.CDLL(None).prctl(15, {comm.encode()!r})\n        "
        if comm
        else ""
    )
    return (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        {name}time.sleep(600)\n    os._exit(0)\ntime.sleep(0.2)\nprint('spawned')"
    )


SUBPROCESS_ENV = (
    "import subprocess, os\ntry:\n"
    "    out = subprocess.run(['sh', '-c', 'env; echo to-fd2 >&2'], capture_output=True, text=True)\n"
    "    print('sk-or' in out.stdout, out.returncode)\n"
    "    os.system('echo via-system')\n"
    "except OSError as e:\n"
    "    print('blocked', e.errno)  # RLIMIT_NPROC for a non-root user with many processes"
)

KILL_PARENT = (
    "import os, signal\nres = []\nfor pid in (os.getppid(), 1):\n    try:\n"
    "        os.kill(pid, signal.SIGKILL)\n        res.append('sent')\n"
    "    except OSError as e:\n        res.append(type(e).__name__)\nprint('still here')"
)


def os_exit(code: int) -> str:
    return f"import os\nos._exit({code})"


SEGFAULT = "import ctypes\nctypes.string_at(0)"

CLOSE_RPC_PIPES = "import os\nfor fd in range(3, 1024):\n    try:\n        os.close(fd)\n    except OSError:\n        pass"

# ---------------------------------------------------------------- resources

MEMORY_BOMB = "blob = bytearray(10**11)"
MEMORY_HOARD = "hoard = []\nwhile True:\n    hoard.append(bytearray(50 * 2**20))"


def memory_hoard(chunk_mb: int) -> str:
    """Grow a list of ``chunk_mb`` blocks until the address-space limit says no."""
    return f"hoard = []\nwhile True:\n    hoard.append(bytearray({chunk_mb} * 2**20))"


INFINITE_LOOP = "while True:\n    pass"
INFINITE_LOOP_IGNORING_SIGNALS = (
    "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
    "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"
)
RECURSION = "def f(n):\n    return f(n + 1)\nf(0)"
DEEP_RECURSION = "import sys\nsys.setrecursionlimit(10**8)\ndef g(n):\n    return g(n + 1)\ng(0)"
PRINT_FLOOD = "import sys\nsys.stdout.write('A' * 10**8)\nprint('END')"
FD_FLOOD = "import os\nos.write(1, b'B' * 10**8)\nprint('END')"


def file_limits(write_bytes: int, fds: int) -> str:
    """Write ``write_bytes`` to one file, then open files until refused. Prints the
    first errno, then the second and whether fewer than ``fds`` opened."""
    return (
        f"import os\ntry:\n    open('big.bin', 'wb').write(b'x' * {write_bytes})\nexcept OSError as e:\n    print(e.errno)\n"
        f"fs = []\ntry:\n    while True:\n        fs.append(open(os.devnull))\nexcept OSError as e:\n    print(e.errno, len(fs) < {fds})\n"
        "for f in fs:\n    f.close()"
    )


# ---------------------------------------------------------------- the scaffold and the protocol

OVERWRITE_SCAFFOLD = (
    "llm_batch = lambda ps: ['forged'] * len(ps)\nanswer = 'FORGED'\nset_answer = print\n"
    "import builtins\nbuiltins.llm_query = None"
)
MUTATE_CODEBASE = "try:\n    codebase[sorted(codebase)[0]] = 'pwned'\nexcept TypeError as e:\n    print('refused:', e)"


def huge_batch(n: int) -> str:
    """``llm_batch`` of ``n`` prompts. Prints the count and the set of distinct answers."""
    return f"res = llm_batch(['p%d' % i for i in range({n:_})])\nprint(len(res), set(res))"


def huge_batch_summary(n: int) -> str:
    """``llm_batch`` of ``n`` prompts. Prints ``len answered budget_errors``."""
    return (
        f"res = llm_batch(['p%d' % i for i in range({n:_})])\n"
        "budget = sum(r.startswith('[llm error] budget exhausted') for r in res)\n"
        "print(len(res), sum(not r.startswith('[llm error]') for r in res), budget)"
    )


FIFTY_MB_PROMPT = "res = llm_batch(['small', 'x' * (50 * 2**20)])\nprint(res[0], res[1][:60])"
NON_STRING_PROMPTS = (
    "res = llm_batch(['fine', 1, None, b'bytes', ['a list'], {'a': 1}])\n"
    "for r in res:\n    print(r[:60])\n"
    "print(llm_query(42)[:60])"
)
RPC_GARBAGE = (
    "import os, stat\nhit = 0\nfor fd in range(3, 1024):\n    try:\n"
    "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
    '            os.write(fd, b\'garbage\\n{"type": "result", "id": -5}\\n[1, 2]\\n{"type": "llm", "id": 77, "prompts": 5}\\n\')\n'
    "            hit += 1\n    except OSError:\n        pass\nprint('hit', hit > 0)"
)
RPC_OVERLONG_LINE = (
    "import os, stat\nchunk = b'z' * 2**20\nfor fd in range(3, 1024):\n    try:\n"
    "        st = os.fstat(fd)\n    except OSError:\n        continue\n"
    "    if stat.S_ISFIFO(st.st_mode) and os.get_blocking(fd) and fd > 2:\n"
    "        try:\n            for _ in range(70):\n                os.write(fd, chunk)\n"
    "            os.write(fd, b'\\n')\n        except OSError:\n            pass\nprint('done')"
)
SYSTEM_EXIT = (
    "import sys\nsys.stdout = open('/dev/null', 'w')\nsys.stderr = None\nraise SystemExit(0)"
)
