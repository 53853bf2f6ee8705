"""Start, find and stop llama.cpp servers for local models.

A run starts the server it needs on 127.0.0.1 on a free port, waits until it
answers, and stops it at the end. Three things make sure it never outlives the
run: :meth:`LocalServer.stop` (called when the model is closed), an ``atexit``
hook, and a watchdog thread inside the server's own process that exits as soon
as its parent is gone (a crash, ``kill -9``), so no stray server keeps 2 GB.

A server started by ``deeprepo local serve`` is written to
``<data home>/run/<name>.json``; runs reuse it instead of starting their own.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Mapping
from pathlib import Path

from deeprepo.base.errors import ConfigError, ProviderError
from deeprepo.local.catalog import LocalModelInfo
from deeprepo.local.paths import logs_dir
from deeprepo.local.runtime import find_runtime
from deeprepo.local.state import (
    ServerState,
    new_token,
    read_state,
    remove_state,
    state_file,
    write_state,
)
from deeprepo.local.store import model_path

__all__ = ["THREADS_ENV", "LocalServer", "acquire", "check_ready", "release"]

THREADS_ENV = "DEEPREPO_LOCAL_THREADS"
START_TIMEOUT_S = 180.0
STOP_GRACE_S = 1.0

# Runs in the server's process before llama_cpp.server: exit when the parent is gone. The
# key comes in the environment, which only this user can read (/proc/PID/environ), and is
# added to argv inside the process, so it never shows in the process list's command line.
_BOOTSTRAP = """\
import os, runpy, sys, threading, time
parent = int(sys.argv[1])
def _watch():
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)
threading.Thread(target=_watch, daemon=True).start()
token = os.environ.pop("DEEPREPO_LLAMA_API_KEY", "")
sys.argv = ["llama_cpp.server"] + sys.argv[2:] + ([f"--api_key={token}"] if token else [])
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def check_ready(info: LocalModelInfo, env: Mapping[str, str] | None = None) -> tuple[Path, Path]:
    """``(python, weights)`` for ``info``, or one :class:`ConfigError` line naming the fix.
    Cheap: no hashing, no import of llama_cpp."""
    python = find_runtime(env)
    weights = model_path(info, env)
    fix = f"run: deeprepo local setup --model {info.name}"
    if python is None:
        raise ConfigError(f"local/{info.name}: the llama.cpp runtime is not installed; {fix}")
    if not weights.is_file() or weights.stat().st_size != info.size_bytes:
        raise ConfigError(f"local/{info.name}: the model's weights are not installed; {fix}")
    return python, weights


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _threads(env: Mapping[str, str] | None) -> int:
    environ = os.environ if env is None else env
    raw = environ.get(THREADS_ENV, "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            raise ConfigError(f"{THREADS_ENV} must be a whole number, not {raw!r}") from None
    # One CPU fewer than we may use: llama.cpp's threads spin at barriers, and when one is
    # descheduled (deeprepo's own process, the sandbox, anything else) the others wait.
    # Measured on a busy 2-core machine: 2 threads 2.8 generated tok/s, 1 thread 36.6.
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cpus or 2) - 1)


def _get_json(url: str, token: str, timeout: float = 2.0) -> object:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:  # a checked loopback URL
        return json.loads(resp.read().decode("utf-8"))


def _serves(base_url: str, name: str, token: str) -> bool:
    """True when ``base_url`` answers ``/models`` with ``token`` and lists ``name``."""
    try:
        data = _get_json(base_url + "/models", token)
    except (OSError, ValueError):
        return False
    models = data.get("data", []) if isinstance(data, dict) else []
    return any(isinstance(m, dict) and m.get("id") == name for m in models)


class LocalServer:
    """One llama.cpp server for one model: started here, or a ``local serve`` one reused."""

    def __init__(self, info: LocalModelInfo, env: Mapping[str, str] | None = None) -> None:
        self.info = info
        self.env = env
        self.base_url: str | None = None
        self.token = new_token()  # the key of the server in use (llama.cpp's --api_key)
        self.notes: list[str] = []  # what a run's outputs should say about the server
        self.proc: subprocess.Popen[bytes] | None = None
        self.reused = False
        self.log_path = logs_dir(env) / f"local-{info.name}.log"
        self._lock = threading.Lock()

    @property
    def alias(self) -> str:
        return f"local/{self.info.name}"

    def _reusable(self) -> ServerState | None:
        """The ``local serve`` server to reuse, if its state file passes every check;
        one that fails is named (a warning and a run note) and ignored."""
        path = state_file(self.info, self.env)
        state, why = read_state(path)
        if state is not None and not _serves(state.base_url, self.alias, state.token):
            why = f"{path}: no server of {self.alias} answers at {state.base_url}"
            state = None
        if why is not None:
            note = f"ignored the local server state ({why}); started a fresh server"
            self.notes.append(note)
            warnings.warn(note, stacklevel=3)
        return state

    def start(self, *, persistent: bool = False) -> str:
        """The server's base URL (``http://127.0.0.1:PORT/v1``), starting it if needed."""
        with self._lock:
            if self.base_url is not None and (self.proc is None or self.proc.poll() is None):
                return self.base_url
            if not persistent:
                state = self._reusable()
                if state is not None:
                    self.base_url, self.token, self.reused = state.base_url, state.token, True
                    return state.base_url
            self.token = new_token()
            python, weights = check_ready(self.info, self.env)
            threads = _threads(self.env)
            port = _free_port()
            args = [
                str(python), "-c", _BOOTSTRAP, str(os.getpid()),
                "--model", str(weights), "--model_alias", self.alias,
                "--host", "127.0.0.1", "--port", str(port),
                "--n_ctx", str(self.info.n_ctx),
                "--n_threads", str(threads), "--n_threads_batch", str(threads),
            ]  # fmt: skip
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = self.log_path.open("wb")
            environ = dict(os.environ if self.env is None else self.env)
            environ["DEEPREPO_LLAMA_API_KEY"] = self.token
            # The server needs no key and must not reach out: drop what could send it anywhere.
            for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
                environ.pop(key, None)
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=environ, start_new_session=True
            )
            log.close()
            _started.add(self)
            url = f"http://127.0.0.1:{port}/v1"
            self._wait(url)
            self.base_url = url
            if persistent:
                state = ServerState(url, self.proc.pid, self.token)
                write_state(state_file(self.info, self.env), state)
            return url

    def _wait(self, url: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.proc is not None
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                _started.discard(self)
                raise ProviderError(
                    f"{self.alias}: the llama.cpp server exited with code {code} while "
                    f"starting ({_tail(self.log_path)}); log: {self.log_path}"
                )
            if _serves(url, self.alias, self.token):
                return
            time.sleep(0.25)
        self.stop()
        raise ProviderError(
            f"{self.alias}: the llama.cpp server did not answer within {START_TIMEOUT_S:.0f} s; "
            f"log: {self.log_path}"
        )

    def stop(self) -> None:
        """Stop the server if this process started it (a reused one is left running)."""
        with self._lock:
            proc, self.proc = self.proc, None
            self.base_url = None
            _started.discard(self)
            if proc is None or proc.poll() is not None:
                return
            # uvicorn's graceful stop waits for the request in flight, which can take a
            # minute on a CPU; the server keeps no state worth a wait, so it gets a second.
            proc.terminate()
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            remove_state(state_file(self.info, self.env), proc.pid)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])[:400]


_started: set[LocalServer] = set()
_shared: dict[str, tuple[LocalServer, int]] = {}
_shared_lock = threading.Lock()


def acquire(info: LocalModelInfo, env: Mapping[str, str] | None = None) -> LocalServer:
    """The process-wide server for ``info`` (root and sub on one model share it)."""
    with _shared_lock:
        server, users = _shared.get(info.name, (None, 0))
        if server is None:
            server = LocalServer(info, env)
        _shared[info.name] = (server, users + 1)
        return server


def release(server: LocalServer) -> None:
    """Drop one user of ``server``; the last one stops it."""
    with _shared_lock:
        current, users = _shared.get(server.info.name, (server, 1))
        if current is not server:
            server.stop()
            return
        if users <= 1:
            _shared.pop(server.info.name, None)
            server.stop()
        else:
            _shared[server.info.name] = (server, users - 1)


@atexit.register
def _stop_all() -> None:
    for server in list(_started):
        try:
            server.stop()
        except Exception:  # exiting anyway; the watchdog ends the server
            pass
