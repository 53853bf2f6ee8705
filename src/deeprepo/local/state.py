"""The state file of a ``deeprepo local serve`` server: ``<data home>/run/<name>.json``.

Runs send their worker prompts (the repository's code) to the server a state file
names, so it is trusted only when nothing else could have put it there or taken the
server's place: a private file (not a link, the user's own, mode ``0600`` in a
``0700`` folder) naming a loopback URL, a live process of this user, a port whose
listening socket is this user's, and the per-server token llama.cpp checks on each
request (``--api_key``). A state file failing any of these is ignored, with the
reason, and the run starts its own server.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from deeprepo.base.private import UnsafePathError, private_dir, read_private, write_private
from deeprepo.local.catalog import LocalModelInfo
from deeprepo.local.paths import data_home

__all__ = ["ServerState", "new_token", "read_state", "remove_state", "state_file", "write_state"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


@dataclass(frozen=True)
class ServerState:
    """Where a running server listens, its process, and the key it requires."""

    base_url: str
    pid: int
    token: str


def new_token() -> str:
    """A fresh random key for one server start."""
    return secrets.token_hex(32)  # hex: never read as an option (a leading "-")


def state_file(info: LocalModelInfo, env: Mapping[str, str] | None) -> Path:
    return data_home(env) / "run" / f"{info.name}.json"


def write_state(path: Path, state: ServerState) -> None:
    """Write ``state`` readable by this user only (it holds the server's key)."""
    private_dir(path.parent, "the local server folder")
    record = {"base_url": state.base_url, "pid": state.pid, "token": state.token}
    write_private(path, (json.dumps(record) + "\n").encode("utf-8"))


def remove_state(path: Path, pid: int) -> None:
    """Remove the state file if it names the server ``pid`` (one this process stopped)."""
    try:
        raw = read_private(path, "the local server state", limit=4096)
        if raw is not None and json.loads(raw.decode("utf-8")).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError, UnicodeDecodeError, AttributeError, UnsafePathError):
        pass  # not ours to remove: the next run ignores it, with the reason


def read_state(path: Path) -> tuple[ServerState | None, str | None]:
    """``(state, None)`` for a state file that passes every check; ``(None, why)`` for
    one that fails (``why`` says which check); ``(None, None)`` when there is none."""
    try:
        raw = read_private(path, "the local server state", limit=4096)
        if raw is None:
            return None, None
        data = json.loads(raw.decode("utf-8"))
    except UnsafePathError as exc:
        return None, str(exc)
    except (ValueError, UnicodeDecodeError):
        return None, f"{path} is not a state file deeprepo wrote"
    if not isinstance(data, dict):
        return None, f"{path} is not a state file deeprepo wrote"
    url, pid, token = data.get("base_url"), data.get("pid"), data.get("token")
    if not isinstance(url, str) or not isinstance(token, str) or len(token) < 16:
        return None, f"{path} names no server key (written by an older deeprepo?)"
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
        return None, f"{path} names no server process"
    why = _why_not_ours(url, pid)
    return (None, f"{path}: {why}") if why else (ServerState(url, pid, token), None)


def _why_not_ours(url: str, pid: int) -> str | None:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK or port is None:
        return f"{url} is not a loopback address of this machine"
    if not _process_is_mine(pid):
        return f"process {pid} is gone or not yours"
    owner = _port_owner(port)
    if owner == -1:
        return f"nothing listens on port {port}"
    if owner not in (None, os.getuid()):
        return f"port {port} is held by another user"
    return None


def _process_is_mine(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # alive, but another user's
    proc = Path(f"/proc/{pid}")
    try:
        return proc.stat().st_uid == os.getuid()
    except FileNotFoundError:
        return not proc.parent.is_dir()  # no /proc here: os.kill already proved it ours
    except OSError:
        return False


def _port_owner(port: int) -> int | None:
    """The uid of the socket listening on ``port`` (Linux ``/proc/net``); None where that
    cannot be known. -1 when nothing listens there."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not any(t.exists() for t in tables):
        return None
    owners: set[int] = set()
    for table in tables:
        try:
            lines = table.read_text("ascii", errors="replace").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 8 or cols[3] != _LISTEN:
                continue
            local_port = cols[1].rpartition(":")[2]
            if local_port and int(local_port, 16) == port:
                owners.add(int(cols[7]))
    if not owners:
        return -1
    return owners.pop() if len(owners) == 1 else -2
