"""How the child is isolated: the command line, the environment, the mode in use.

``bwrap`` mode runs the child under bubblewrap: every namespace unshared (no
network: only the sandbox's own loopback, not the host's; its own pid space; no
view of the parent's processes), all capabilities dropped, a new session, only
system paths and the interpreter mounted read-only, ``/`` and ``/dev`` read-only,
capped tmpfs ``/tmp`` and ``/dev/shm``, a seccomp filter, and the sandbox dies
with deeprepo. When deeprepo runs as root, bwrap sets the sandbox up without a
user namespace and the child gives up root (uid ``nobody``, no capabilities)
before it reads a cell, so no cell runs as host uid 0.

``process`` mode runs the same child as a plain process with the same resource
limits, scrubbed environment and seccomp filter, in its own session, confined by
Landlock where the kernel has it: a weaker boundary (see docs/security.md).
``auto`` never falls back to it: without bwrap it refuses to run model-written
code until ``--sandbox process`` is asked for.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from typing import Literal

from deeprepo.base.errors import SandboxError, SandboxRefused
from deeprepo.sandbox import seccomp

#: The directory that holds the ``deeprepo`` package (``src/`` of a checkout, or site-packages).
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The child's module, run as ``__main__`` (``child.py``).
CHILD_MODULE = "deeprepo.sandbox.child"
# The child's whole start: PACKAGE_ROOT (its first argument) goes on sys.path *after* the
# standard library, for this interpreter only, so nothing else installed next to deeprepo
# (a site-packages may hold an old ``typing.py`` or ``enum``) shadows a standard module, and
# the cell and its subprocesses see no PYTHONPATH. Then the child module runs by name.
BOOTSTRAP = (
    "import sys; sys.path.append(sys.argv.pop(1)); import runpy; "
    f"runpy.run_module({CHILD_MODULE!r}, run_name='__main__', alter_sys=True)"
)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# -s -P -S is -I without -E: the child's environment is an allow-list built here, so
# nothing foreign can enter through it, and -E would also drop PYTHONHASHSEED.
_PYTHON_FLAGS = ("-s", "-P", "-S")
# A fixed string-hash seed makes set and dict-of-set output the same on every run, so a
# rerun's root requests match the response cache turn after turn (hash flooding is no
# threat here: the only input is the sandboxed code itself). The child drops it from
# os.environ before running any cell.
_HASH_SEED = {"PYTHONHASHSEED": "0"}

_warned: set[str] = set()
# The sandbox's own tmpfs /dev/shm (POSIX shared memory, multiprocessing's locks).
SHM_SIZE_MB = 64
# bwrap as root: what the child needs for a moment to give up root (see harden.py).
_ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


@dataclass(frozen=True)
class Isolation:
    """The mode a kernel really runs in, and a note to show the user (process mode's limits)."""

    mode: Literal["process", "bwrap"]
    note: str | None = None


def running_as_root() -> bool:
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def sandbox_ids() -> tuple[int, int]:
    """The uid and gid a kernel runs as when deeprepo is root: ``nobody``'s (65534 by default)."""
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _warn_once(key: str, note: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(note, RuntimeWarning, stacklevel=4)


def seccomp_program() -> bytes | None:
    """The seccomp filter's BPF, or None (with one loud warning) where libseccomp is missing."""
    try:
        return seccomp.filter_bpf()
    except (seccomp.SeccompUnavailable, OSError) as exc:
        _warn_once(
            "seccomp",
            f"deeprepo: the kernel runs WITHOUT its seccomp filter ({exc}): ptrace, namespaces, "
            "mounts, the keyring, bpf and io_uring stay open to model-written code. Install "
            "libseccomp2 (scripts/setup.sh does).",
        )
        return None


def python_executable() -> str:
    """The interpreter the child runs: the real file behind a venv's symlink."""
    return os.path.realpath(sys.executable)


def child_env(home: str) -> dict[str, str]:
    """The whole environment of a process-mode child: an allow-list, no keys or proxies."""
    lang = os.environ.get("LANG", "")
    safe_lang = lang if lang and all(c.isalnum() or c in "._-@" for c in lang) else "C.UTF-8"
    return {"PATH": SANDBOX_PATH, "LANG": safe_lang, "HOME": home, "TMPDIR": home, **_HASH_SEED}


def _interpreter_dirs(python: str) -> list[str]:
    """Directories the interpreter needs that the system dirs may not cover (pyenv, conda, venv copies)."""
    dirs = [sys.base_prefix, sys.base_exec_prefix, os.path.dirname(python)]
    venv_root = os.path.dirname(os.path.dirname(python))
    if os.path.isfile(os.path.join(venv_root, "pyvenv.cfg")):
        dirs.append(venv_root)  # a venv made with --copies reads its pyvenv.cfg
    return [os.path.realpath(d) for d in dirs]


def kernel_paths() -> list[str]:
    """What the child imports of deeprepo: the package face (which imports only
    ``deeprepo.base.version``), ``deeprepo/base`` (the prompts) and ``deeprepo/sandbox``."""
    package = os.path.join(PACKAGE_ROOT, "deeprepo")
    return [
        os.path.join(package, "__init__.py"),
        os.path.join(package, "base"),
        os.path.join(package, "sandbox"),
    ]


def _covered(path: str, bound: list[str]) -> bool:
    return any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound)


def bwrap_argv(
    bwrap: str,
    python: str,
    tmp_size_mb: int,
    command: list[str],
    *,
    seccomp_fd: int | None = None,
    as_root: bool | None = None,
) -> list[str]:
    """The bubblewrap command line that runs ``command`` (whose argv[0] is ``python``).

    As root (``as_root``, default: this process's euid is 0) bwrap makes no user
    namespace, whose only uid would be host root: it unshares the others and keeps
    just the capabilities the child needs to change to ``nobody`` (``harden.py``).
    """
    if as_root is None:
        as_root = running_as_root()
    if as_root:
        namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        namespaces += ["--unshare-cgroup-try", "--cap-drop", "ALL"]
        for cap in _ROOT_CAPS:
            namespaces += ["--cap-add", cap]
    else:
        namespaces = ["--unshare-all", "--cap-drop", "ALL"]  # user, ipc, pid, net, uts, cgroup
    argv = [
        bwrap,
        *namespaces,
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(max(1, tmp_size_mb) * 1024 * 1024),
        "--tmpfs",
        "/tmp",
        "--perms",
        "1777",
        "--size",
        str(min(max(1, tmp_size_mb), SHM_SIZE_MB) * 1024 * 1024),
        "--tmpfs",
        "/dev/shm",
    ]
    bound: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
            bound.append(path)
    for path in _SYSTEM_FILES:
        argv += ["--ro-bind-try", path, path]
    made: set[str] = set()
    # Of deeprepo, only what the child imports: nothing else of a site-packages it lives in.
    for path in [*_interpreter_dirs(python), *kernel_paths()]:
        if os.path.exists(path) and not _covered(path, bound):
            # bwrap makes missing parents 0700: the child, once it is nobody, could not reach them.
            parts = path.strip("/").split("/")
            for i in range(1, len(parts)):
                parent = "/" + "/".join(parts[:i])
                if parent not in made and not _covered(parent, bound):
                    argv += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
            argv += ["--ro-bind", path, path]
            bound.append(path)
    # The root tmpfs bwrap builds and the /dev it fills are writable (and uncapped) unless
    # remounted. /proc read-only makes /proc/sys so whatever the uid (bwrap does not cover
    # /proc/sys in every setup); nothing the kernel does writes to /proc.
    argv += ["--remount-ro", "/proc", "--remount-ro", "/dev", "--remount-ro", "/"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--chdir", "/tmp", "--clearenv"]
    for key, value in {
        "PATH": SANDBOX_PATH,
        "LANG": "C.UTF-8",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        **_HASH_SEED,
    }.items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


@functools.lru_cache(maxsize=4)
def _probe(bwrap: str, python: str) -> str | None:
    """Run the interpreter once under the real sandbox arguments; None if it works, else why not."""
    read_fd, write_fd = os.pipe()
    program = seccomp_program()
    filter_fd = seccomp.program_fd(program) if program is not None else None
    try:
        code = f"import os; os.write({write_fd}, b'ok')"
        argv = bwrap_argv(bwrap, python, 16, [python, "-I", "-S", "-c", code], seccomp_fd=filter_fd)
        fds = (write_fd,) if filter_fd is None else (write_fd, filter_fd)
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                pass_fds=fds,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"running bwrap failed: {exc}"
        os.close(write_fd)
        write_fd = -1
        got = os.read(read_fd, 16)
        if proc.returncode != 0 or got != b"ok":
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"bwrap exited with {proc.returncode}: {err[-1] if err else 'no message'}"
        return None
    finally:
        os.close(read_fd)
        for fd in (write_fd, filter_fd):
            if fd is not None and fd >= 0:
                os.close(fd)


def bwrap_problem() -> str | None:
    """None when bubblewrap works here (checked once per process), else the reason it does not."""
    if not sys.platform.startswith("linux"):
        return "bubblewrap needs Linux"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed"
    return _probe(bwrap, python_executable())


def mode_for_root(requested: str, *, builtin_root: bool) -> tuple[str, str | None]:
    """The mode to ask for, and a note when it differs from ``requested``.

    ``auto`` refuses *model-written* code without bubblewrap. A built-in scripted root runs
    deeprepo's own fixed programs, so where bubblewrap cannot run it takes process isolation
    instead of refusing, and says so.
    """
    if requested != "auto" or not builtin_root:
        return requested, None
    problem = bwrap_problem()
    if problem is None:
        return requested, None
    return "process", (
        f"bubblewrap is not available ({problem}): the built-in scripted root ran with process "
        "isolation; a model root would be refused until bubblewrap is installed"
    )


def resolve_mode(requested: str) -> Isolation:
    """The mode to use for ``requested`` ("auto", "bwrap", "process").

    "auto" is bwrap, and where bwrap cannot run raises :class:`SandboxRefused`:
    model-written code runs without bubblewrap only when "process" is asked for by
    name. "bwrap" where it cannot run raises :class:`SandboxError`.
    """
    if requested == "process":
        if "--drop-caps" in process_drop_args(python_executable()) and not landlock_abi():
            raise SandboxRefused(
                "refusing --sandbox process as root here: the interpreter is not readable by "
                "other users (so the kernel cannot become nobody) and the kernel has no "
                "Landlock, so model-written code could write any file root owns. Install "
                "bubblewrap, or run deeprepo as an ordinary user."
            )
        return Isolation("process", process_mode_note())
    if requested not in ("bwrap", "auto"):
        raise SandboxError(f"unknown sandbox mode {requested!r}: use auto, bwrap or process")
    problem = bwrap_problem()
    if problem is None:
        return Isolation("bwrap")
    if requested == "auto":
        raise SandboxRefused(
            f"refusing to run model-written code without the bubblewrap sandbox ({problem}): "
            "install bubblewrap (apt-get install bubblewrap) and allow user namespaces, or pass "
            "--sandbox process to accept the weaker process isolation (see docs/security.md)."
        )
    raise SandboxError(
        f"the bwrap sandbox cannot run here ({problem}). Install bubblewrap "
        "(apt-get install bubblewrap) and allow user namespaces, or pass --sandbox process."
    )


def process_mode_note() -> str:
    """What process mode gives up, said once per process as a warning and returned as a note."""
    note = (
        "deeprepo: --sandbox process: the REPL runs as a plain child process (no API keys, resource "
        "limits, seccomp" + (", Landlock" if landlock_abi() else "") + "), not in bubblewrap: it "
        "shares this machine's network (UDP included) and process view. Install bubblewrap for "
        "the full sandbox."
    )
    _warn_once("process", note)
    return note


@functools.lru_cache(maxsize=1)
def protect_parent() -> None:
    """Make deeprepo itself non-dumpable, so a process-mode kernel (same uid, no capabilities)
    cannot read its ``/proc/<pid>/environ`` or memory, nor ptrace it. Once per process."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none), checked once per process."""
    return _landlock_abi()


@functools.lru_cache(maxsize=1)
def _landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return int(rc) if rc > 0 else 0


def _reachable_by_others(path: str) -> bool:
    """Whether an unprivileged uid can reach and read ``path`` (every parent searchable)."""
    import stat

    path = os.path.realpath(path)
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        current = "/".join(parts[:i]) or "/"
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def child_readable_paths(python: str) -> list[str]:
    """What a process-mode child needs to read once Landlock holds: system paths and the
    interpreter. Nothing of deeprepo: the child has loaded its modules before."""
    paths = [p for p in _SYSTEM_DIRS if os.path.exists(p)]
    paths += [os.path.realpath(p) for p in _SYSTEM_FILES if os.path.exists(p)]
    paths += _interpreter_dirs(python)
    return list(dict.fromkeys(paths))


def process_drop_args(python: str) -> list[str]:
    """How a process-mode child started by root gives up root: become nobody where the
    interpreter is readable by others, else keep uid 0 without any capability."""
    if not running_as_root():
        return []
    # deeprepo's own files are read before the uid changes: only the interpreter must be.
    needed = _interpreter_dirs(python)
    if all(_reachable_by_others(p) for p in needed if os.path.exists(p)):
        uid, gid = sandbox_ids()
        return ["--drop-to", f"{uid}:{gid}"]
    return ["--drop-caps"]


def child_command(
    mode: str,
    rfd: int,
    wfd: int,
    tmp_size_mb: int = 256,
    *,
    seccomp_fd: int | None = None,
    cgroup_fds: tuple[int, ...] = (),
    tmpdir: str | None = None,
) -> list[str]:
    """The full command line that starts a child with RPC pipes ``rfd``/``wfd``.

    ``seccomp_fd``: a readable fd with the filter (bwrap loads it, or the process-mode
    child does); ``cgroup_fds``: ``cgroup.procs`` fds the child writes itself into;
    ``tmpdir``: a process-mode child's private dir (its only writable place under Landlock).
    """
    python = python_executable()
    command = [python, *_PYTHON_FLAGS, "-c", BOOTSTRAP, PACKAGE_ROOT, str(rfd), str(wfd)]
    if cgroup_fds:
        command += ["--cgroup-fds", ",".join(map(str, cgroup_fds))]
    if mode == "bwrap":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError(
                "bwrap is not installed: install bubblewrap or pass --sandbox process"
            )
        if running_as_root():
            uid, gid = sandbox_ids()
            command += ["--drop-to", f"{uid}:{gid}"]
        return bwrap_argv(bwrap, python, tmp_size_mb, command, seccomp_fd=seccomp_fd)
    command += process_drop_args(python)
    if tmpdir is not None and landlock_abi():
        command += [
            "--landlock",
            tmpdir,
            "--read-paths",
            os.pathsep.join(child_readable_paths(python)),
        ]
    if seccomp_fd is not None:
        command += ["--seccomp-fd", str(seccomp_fd)]
    return command
