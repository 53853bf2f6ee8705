"""The llama.cpp runtime: ``llama-cpp-python[server]`` in an environment deeprepo manages.

Its own virtualenv (``<data home>/runtime/llama-cpp-<version>``), not an extra of
deeprepo's: the server runs as a separate process anyway, and its pins (fastapi,
starlette, uvicorn, numpy) then never meet deeprepo's extras (verifiers, semgrep).

The package builds llama.cpp from source. pip caches the built wheel by the sdist's
URL only, not by ``CMAKE_ARGS``: a wheel tuned to this CPU (``GGML_NATIVE``) could be
reused on another machine with the same cache and die there of an illegal
instruction. So the build is portable: no native tuning, x86-64-v3 (AVX2, FMA, F16C)
on x86-64, the compiler's defaults elsewhere.

Every file pip installs is pinned by version and sha256 in the locks shipped with
deeprepo (``data/local-runtime/build.lock``, then ``runtime.lock``), installed with
``--require-hashes``: a changed or substituted package on the index, or an unpinned
dependency, fails the install instead of running in the server that reads the code.
The build dependencies come from the first lock and the build runs without pip's
isolated build environment, whose packages pip would fetch unchecked.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import IO

from deeprepo.base.errors import DeeprepoError
from deeprepo.local.paths import runtime_dir

__all__ = [
    "LLAMA_CPP_VERSION",
    "PYTHON_ENV",
    "RuntimeInstallError",
    "build_cmake_args",
    "check_lock",
    "find_runtime",
    "install_commands",
    "install_runtime",
    "lock_files",
]

LLAMA_CPP_VERSION = "0.3.36"
REQUIREMENT = f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}"
#: A Python that already has ``llama_cpp.server`` (overrides the managed environment).
PYTHON_ENV = "DEEPREPO_LLAMA_PYTHON"
_PROBE = "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"


class RuntimeInstallError(DeeprepoError):
    """Installing or finding the llama.cpp runtime failed."""


_PIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")
_HASH_RE = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


def lock_files() -> tuple[Path, Path]:
    """The build lock and the runtime lock shipped with deeprepo."""
    folder = Path(str(resources.files("deeprepo") / "data" / "local-runtime"))
    return folder / "build.lock", folder / "runtime.lock"


def check_lock(path: Path) -> list[str]:
    """The pins of a lock (``name==version``), each with its sha256 hashes; a line that is
    not one (an unpinned or unhashed requirement, an option, a URL) is refused."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise RuntimeInstallError(
            f"the runtime lock {path} cannot be read ({exc.strerror}); reinstall deeprepo"
        ) from None
    pins: list[str] = []
    for requirement in text.replace("\\\n", " ").splitlines():
        words = requirement.split("#", 1)[0].split()
        if not words:
            continue
        pin, hashes = words[0], words[1:]
        if not _PIN_RE.match(pin) or not hashes or not all(_HASH_RE.match(h) for h in hashes):
            raise RuntimeInstallError(
                f"the runtime lock {path} has a line that is not an exact version with its "
                f"sha256 hashes ({requirement.strip()[:120]!r}); nothing was installed. "
                "Reinstall deeprepo, or regenerate the lock (docs/local.md)"
            )
        pins.append(pin)
    if not pins:
        raise RuntimeInstallError(f"the runtime lock {path} pins nothing; reinstall deeprepo")
    return pins


def install_commands(python: Path) -> list[list[str]]:
    """The pip commands that install the runtime into ``python``'s environment: the build
    lock, then the runtime lock, both checked first and installed with ``--require-hashes``."""
    build, runtime = lock_files()
    pins = check_lock(build), check_lock(runtime)
    if f"llama-cpp-python=={LLAMA_CPP_VERSION}" not in pins[1]:
        raise RuntimeInstallError(
            f"the runtime lock {runtime} does not pin llama-cpp-python=={LLAMA_CPP_VERSION}; "
            "reinstall deeprepo"
        )
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--require-hashes"]
    return [
        [*pip, "--only-binary=:all:", "-r", str(build)],
        [*pip, "--no-build-isolation", "-r", str(runtime)],
    ]


def env_dir(env: Mapping[str, str] | None = None) -> Path:
    return runtime_dir(env) / f"llama-cpp-{LLAMA_CPP_VERSION}"


def _venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _probe(python: Path | str) -> str | None:
    """The llama_cpp version ``python`` imports, or None when it cannot."""
    try:
        proc = subprocess.run(
            [str(python), "-c", _PROBE], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def find_runtime(env: Mapping[str, str] | None = None) -> Path | None:
    """A Python that can run ``llama_cpp.server``: ``$DEEPREPO_LLAMA_PYTHON``, else the
    managed environment. None when neither is there (cheap: no import unless present)."""
    environ = os.environ if env is None else env
    override = environ.get(PYTHON_ENV, "").strip()
    if override:
        return Path(override)
    python = _venv_python(env_dir(env))
    marker = env_dir(env) / ".deeprepo-ready"
    return python if python.is_file() and marker.is_file() else None


def build_cmake_args() -> str:
    """Portable llama.cpp build flags (see the module docstring)."""
    flags = ["-DLLAVA_BUILD=OFF", "-DGGML_NATIVE=OFF"]
    if platform.machine().lower() in ("x86_64", "amd64"):
        flags += ["-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
    return " ".join(flags)


def _run_logged(
    command: list[str],
    log: IO[str],
    environ: Mapping[str, str],
    started: float,
    say: Callable[[str], None],
) -> int:
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(environ))
    last = time.monotonic() - started
    while proc.poll() is None:
        time.sleep(1.0)
        elapsed = time.monotonic() - started
        if elapsed - last >= 30:
            last = elapsed
            say(f"still installing the runtime ({elapsed / 60:.1f} min so far)")
    return proc.returncode


def install_runtime(
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[Path, bool]:
    """Create the managed environment and install the runtime; ``(python, did_work)``.

    Nothing is done when it already imports. The build log goes to
    ``<env>/build.log``; a failure names it.
    """
    say = progress or (lambda _msg: None)
    found = find_runtime(env)
    if found is not None and _probe(found):
        return found, False
    folder = env_dir(env)
    python = _venv_python(folder)
    commands = install_commands(python)  # a bad lock is refused before anything is made
    if not python.is_file():
        say(f"creating the runtime environment in {folder}")
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    elif _probe(python):
        (folder / ".deeprepo-ready").write_text(LLAMA_CPP_VERSION + "\n")
        return python, False
    if shutil.which("cmake") is None and shutil.which("gcc") is None and shutil.which("cc") is None:
        raise RuntimeInstallError(
            "building llama.cpp needs a C/C++ compiler and cmake (apt-get install build-essential "
            "cmake); install them and run deeprepo local setup again"
        )
    environ = dict(os.environ if env is None else env)
    environ.setdefault("CMAKE_ARGS", build_cmake_args())
    environ.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    log_path = folder / "build.log"
    say(
        f"installing {REQUIREMENT} (builds llama.cpp from source unless pip has the wheel "
        f"cached: 5 to 20 minutes on 2 cores; log: {log_path})"
    )
    started = time.monotonic()
    with log_path.open("w") as log:
        for command in commands:
            code = _run_logged(command, log, environ, started, say)
            if code != 0:
                raise RuntimeInstallError(
                    f"installing {REQUIREMENT} failed (exit {code}; a hash mismatch means a "
                    f"package on the index is not the one locked); see {log_path}"
                )
    version = _probe(python)
    if version is None:
        raise RuntimeInstallError(f"{REQUIREMENT} installed but does not import; see {log_path}")
    (folder / ".deeprepo-ready").write_text(version + "\n")
    return python, True
