"""The llama.cpp runtime: ``llama-cpp-python[server]`` in an environment deeprepo manages.

Its own virtualenv (``<data home>/runtime/llama-cpp-<version>``), not an extra of
deeprepo's: the server runs as a separate process anyway, and its pins (fastapi,
starlette, uvicorn, numpy) then never meet deeprepo's extras (verifiers, semgrep).

The package builds llama.cpp from source. pip caches the built wheel by the sdist's
URL only, not by ``CMAKE_ARGS``: a wheel tuned to this CPU (``GGML_NATIVE``) could be
reused on another machine with the same cache and die there of an illegal
instruction. So the build is portable: no native tuning, x86-64-v3 (AVX2, FMA, F16C)
on x86-64, the compiler's defaults elsewhere.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from deeprepo.base.errors import DeeprepoError
from deeprepo.local.paths import runtime_dir

__all__ = [
    "LLAMA_CPP_VERSION",
    "PYTHON_ENV",
    "RuntimeInstallError",
    "build_cmake_args",
    "find_runtime",
    "install_runtime",
]

LLAMA_CPP_VERSION = "0.3.36"
REQUIREMENT = f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}"
#: A Python that already has ``llama_cpp.server`` (overrides the managed environment).
PYTHON_ENV = "DEEPREPO_LLAMA_PYTHON"
_PROBE = "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"


class RuntimeInstallError(DeeprepoError):
    """Installing or finding the llama.cpp runtime failed."""


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
        proc = subprocess.Popen(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", REQUIREMENT],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        last = 0.0
        while proc.poll() is None:
            time.sleep(1.0)
            elapsed = time.monotonic() - started
            if elapsed - last >= 30:
                last = elapsed
                say(f"still installing the runtime ({elapsed / 60:.1f} min so far)")
    if proc.returncode != 0:
        raise RuntimeInstallError(
            f"installing {REQUIREMENT} failed (exit {proc.returncode}); see {log_path}"
        )
    version = _probe(python)
    if version is None:
        raise RuntimeInstallError(f"{REQUIREMENT} installed but does not import; see {log_path}")
    (folder / ".deeprepo-ready").write_text(version + "\n")
    return python, True
