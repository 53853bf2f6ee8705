"""The real-code substrate: open-source Python and JavaScript files that bugs are planted into.

The files live in ``realcode/`` beside this module (``python.json.xz``, ``js.json.xz``), with
``manifest.json`` (package, version, licence, source and sha256 of each file; where a top-level
block may go) and each package's licence text under ``licenses/``. ``scripts/fetch_realcode.py``
re-creates them from the registries. Every file's sha256 is checked when the corpus is loaded,
so a task never silently builds on changed data.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from deeprepo.base.errors import DeeprepoError

_REBUILD = "re-create it with `python3 scripts/fetch_realcode.py`"


class RealCodeError(DeeprepoError):
    """The vendored real-code data is missing or does not match its manifest."""


@dataclass(frozen=True)
class RealPackage:
    """One vendored package: where it came from and under which licence."""

    name: str
    version: str
    licence: str  # SPDX expression
    source: str  # "pypi:NAME==VERSION" or "npm:NAME@VERSION"
    archive: str  # the wheel or tarball the files were taken from
    archive_sha256: str
    licence_file: str  # relative to the realcode folder
    files: int


@dataclass(frozen=True)
class RealFile:
    """One vendored source file and where a planted top-level block may go in it."""

    path: str  # "click/core.py", "express/lib/router/index.js"
    package: str
    lang: str  # python | js
    text: str
    sha256: str
    anchors: tuple[int, ...]  # 1-based lines a block may be inserted before (after the header)
    import_after: int  # new imports go after this line (0: at the top)
    esm: bool = False  # js: an ES module (import/export) rather than CommonJS


def _data() -> Traversable:
    return resources.files("deeprepo.rl.tasks").joinpath("realcode")


@lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    """The parsed ``manifest.json``."""
    try:
        text = _data().joinpath("manifest.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RealCodeError(f"the real-code manifest is missing; {_REBUILD}") from None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise RealCodeError(f"the real-code manifest is not an object; {_REBUILD}")
    return data


@lru_cache(maxsize=1)
def packages() -> tuple[RealPackage, ...]:
    """Every vendored package, in manifest order."""
    return tuple(RealPackage(**p) for p in manifest()["packages"])


def licence_text(pkg: RealPackage) -> str:
    """The licence text the package ships."""
    return str(_data().joinpath(pkg.licence_file).read_text(encoding="utf-8"))


@lru_cache(maxsize=2)
def corpus(lang: str) -> tuple[RealFile, ...]:
    """The vendored files of ``lang`` (``python`` or ``js``), sorted by path, sha256-checked."""
    try:
        blob = _data().joinpath(f"{lang}.json.xz").read_bytes()
    except FileNotFoundError:
        raise RealCodeError(f"no real-code data for {lang!r}; {_REBUILD}") from None
    texts: dict[str, str] = json.loads(lzma.decompress(blob).decode("utf-8"))
    out: list[RealFile] = []
    for f in manifest()["files"]:
        if f["lang"] != lang:
            continue
        text = texts.get(f["path"])
        if text is None or hashlib.sha256(text.encode("utf-8")).hexdigest() != f["sha256"]:
            raise RealCodeError(f"{f['path']} does not match its manifest sha256; {_REBUILD}")
        out.append(
            RealFile(
                path=f["path"],
                package=f["package"],
                lang=lang,
                text=text,
                sha256=f["sha256"],
                anchors=tuple(f["anchors"]),
                import_after=int(f["import_after"]),
                esm=bool(f.get("esm", False)),
            )
        )
    return tuple(sorted(out, key=lambda r: r.path))
