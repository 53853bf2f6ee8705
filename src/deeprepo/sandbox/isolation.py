"""How the child is isolated: the command line, the environment, the mode in use.

``bwrap`` mode runs the child under bubblewrap: every namespace unshared (no
network: only the sandbox's own loopback, not the host's; its own pid space; no
view of the parent's processes), all capabilities dropped, a new session, only system paths and the
interpreter mounted read-only, a private tmpfs ``/tmp``, and the sandbox dies
with deeprepo. ``process`` mode runs the same child as a plain process with the
same resource limits and scrubbed environment, but it shares the host's
filesystem view, network and uid: a weaker boundary (see docs/security.md).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from typing import Literal

from deeprepo.errors import SandboxError

CHILD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
_PROMPTS_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "orchestrator"
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

_warned = False


@dataclass(frozen=True)
class Isolation:
    """The mode a kernel really runs in, and a note to show the user once (auto fallback)."""

    mode: Literal["process", "bwrap"]
    note: str | None = None


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


def _covered(path: str, bound: list[str]) -> bool:
    return any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound)


def bwrap_argv(bwrap: str, python: str, tmp_size_mb: int, command: list[str]) -> list[str]:
    """The bubblewrap command line that runs ``command`` (whose argv[0] is ``python``)."""
    argv = [
        bwrap,
        "--unshare-all",  # user, ipc, pid, net (only its own loopback), uts, cgroup
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--size",
        str(max(1, tmp_size_mb) * 1024 * 1024),
        "--tmpfs",
        "/tmp",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
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
    for path in [*_interpreter_dirs(python), os.path.dirname(CHILD_SCRIPT), _PROMPTS_DIR]:
        if os.path.isdir(path) and not _covered(path, bound):
            argv += ["--ro-bind", path, path]
            bound.append(path)
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
    try:
        code = f"import os; os.write({write_fd}, b'ok')"
        argv = bwrap_argv(bwrap, python, 16, [python, "-I", "-S", "-c", code])
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                pass_fds=(write_fd,),
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
        if write_fd >= 0:
            os.close(write_fd)


def bwrap_problem() -> str | None:
    """None when bubblewrap works here (checked once per process), else the reason it does not."""
    if not sys.platform.startswith("linux"):
        return "bubblewrap needs Linux"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed"
    return _probe(bwrap, python_executable())


def resolve_mode(requested: str) -> Isolation:
    """The mode to use for ``requested`` ("auto", "bwrap", "process").

    "auto" falls back to "process" with a note (and one ``RuntimeWarning`` per
    process); "bwrap" where it cannot run raises :class:`SandboxError`.
    """
    global _warned
    if requested == "process":
        return Isolation("process")
    if requested not in ("bwrap", "auto"):
        raise SandboxError(f"unknown sandbox mode {requested!r}: use auto, bwrap or process")
    problem = bwrap_problem()
    if problem is None:
        return Isolation("bwrap")
    if requested == "bwrap":
        raise SandboxError(
            f"the bwrap sandbox cannot run here ({problem}). Install bubblewrap "
            "(apt-get install bubblewrap) and allow user namespaces, or pass --sandbox process."
        )
    note = (
        f"deeprepo: bubblewrap sandbox unavailable ({problem}); the REPL runs as a plain child "
        "process with resource limits and no API keys, but it can reach the network and your "
        "files. Install bubblewrap for full isolation."
    )
    if not _warned:
        _warned = True
        warnings.warn(note, RuntimeWarning, stacklevel=3)
    return Isolation("process", note)


def child_command(mode: str, rfd: int, wfd: int, tmp_size_mb: int = 256) -> list[str]:
    """The full command line that starts a child with RPC pipes ``rfd``/``wfd``."""
    python = python_executable()
    command = [python, *_PYTHON_FLAGS, CHILD_SCRIPT, str(rfd), str(wfd)]
    if mode == "bwrap":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError(
                "bwrap is not installed: install bubblewrap or pass --sandbox process"
            )
        return bwrap_argv(bwrap, python, tmp_size_mb, command)
    return command
