"""The BENCH.toml file: what to run (configurations), on what (repositories), how often
and within which budgets. Parsed with pydantic; every mistake is one line naming the key.

Format (docs/bench.md)::

    [bench]
    repetitions = 1          # runs of each configuration on each repository
    max_concurrent = 2       # runs at the same time
    max_cost = 5.0           # USD for the whole bench (runs and judge); optional
    tolerance = 10           # line tolerance for matching findings
    prices = "prices.json"   # optional price table (relative to this file)

    [[repo]]
    path = "../vulnapi"                        # one repository
    ground_truth = "../vulnapi.ground_truth.json"   # optional; found beside it otherwise
    [[repo]]
    dir = "repos/"                             # every sub-folder (or a tasks folder)
    [[repo]]
    generate = "small:seed=7:lang=python:n=3"  # `deeprepo tasks generate`

    [[config]]
    name = "sonnet-minimax"
    root = "anthropic/claude-sonnet-4-5"
    sub = "openrouter/minimax/minimax-m2.5"
    prompt = "default"
    [[config]]
    name = "opus-baseline"
    mode = "baseline"
    model = "anthropic/claude-opus-4-6"
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deeprepo.base.errors import UsageError

__all__ = ["BenchFile", "BenchSettings", "ConfigSpec", "RepoSpec", "load_bench_file"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BenchSettings(_Strict):
    """The ``[bench]`` table."""

    repetitions: int = Field(default=1, ge=1, le=1000)
    max_concurrent: int = Field(default=1, ge=1, le=256)
    max_cost: float | None = Field(default=None, gt=0)
    tolerance: int = Field(default=10, ge=0, le=1000)
    prices: str | None = None
    sandbox: Literal["auto", "bwrap", "process"] = "auto"
    # Off by default: a repetition answered from the response cache would cost nothing and
    # repeat the first run instead of measuring a second.
    cache: bool = False


class RepoSpec(_Strict):
    """One ``[[repo]]`` entry: exactly one of ``path``, ``dir`` or ``generate``."""

    path: str | None = None
    dir: str | None = None
    generate: str | None = None
    ground_truth: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> RepoSpec:
        given = [k for k in ("path", "dir", "generate") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of path, dir or generate")
        if self.ground_truth is not None and self.path is None:
            raise ValueError("ground_truth goes with path (dir and generate find their own)")
        if self.name is not None and self.path is None:
            raise ValueError("name goes with path")
        if self.name is not None and not _NAME_RE.fullmatch(self.name):
            raise ValueError(f"name {self.name!r}: letters, digits, '.', '_', '-' only")
        return self


class ConfigSpec(_Strict):
    """One ``[[config]]``: an RLM configuration (root × sub × prompt) or a baseline."""

    name: str
    mode: Literal["rlm", "baseline"] = "rlm"
    # rlm
    root: str | None = None
    sub: str | None = None
    prompt: str = "default"
    root_base_url: str | None = None
    sub_base_url: str | None = None
    max_turns: int = Field(default=20, ge=1)
    max_sub_calls: int | None = Field(default=2000, ge=1)
    sub_concurrency: int = Field(default=16, ge=1)
    # baseline
    model: str | None = None
    base_url: str | None = None
    context_tokens: int | None = Field(default=None, ge=1000)
    # both
    max_cost: float | None = Field(default=None, gt=0)
    timeout: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _fits_mode(self) -> ConfigSpec:
        if not _NAME_RE.fullmatch(self.name):
            raise ValueError(
                f"name {self.name!r}: 1-64 letters, digits, '.', '_' or '-' (it names a folder)"
            )
        rlm_only = ("root", "sub", "root_base_url", "sub_base_url")
        if self.mode == "baseline":
            if self.model is None:
                raise ValueError("a baseline needs model = '...'")
            wrong = [k for k in rlm_only if getattr(self, k) is not None]
            if wrong:
                raise ValueError(f"{', '.join(wrong)} do not apply to a baseline (use model)")
        else:
            if self.root is None or self.sub is None:
                raise ValueError("an rlm configuration needs root = '...' and sub = '...'")
            wrong = [k for k in ("model", "base_url", "context_tokens") if getattr(self, k)]
            if wrong:
                raise ValueError(f"{', '.join(wrong)} apply to mode = 'baseline' only")
        if self.mode == "baseline" and (self.timeout is not None or self.max_cost is not None):
            raise ValueError(
                "timeout and max_cost apply to rlm configurations only (a baseline is one call)"
            )
        return self

    def fingerprint(self) -> str:
        """Hash of every field: a cell made under another definition is not reused."""
        data = json.dumps(self.model_dump(), sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]

    def models(self) -> str:
        """A short description: ``root / sub`` or ``baseline model``."""
        if self.mode == "baseline":
            return f"baseline {self.model}"
        prompt = "" if self.prompt == "default" else f" · prompt {self.prompt}"
        return f"{self.root} / {self.sub}{prompt}"


class BenchFile(_Strict):
    """A whole BENCH.toml."""

    bench: BenchSettings = Field(default_factory=BenchSettings)
    repo: list[RepoSpec] = Field(min_length=1)
    config: list[ConfigSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> BenchFile:
        seen: set[str] = set()
        for c in self.config:
            if c.name in seen:
                raise ValueError(f"two configurations are named {c.name!r}; names must differ")
            seen.add(c.name)
        return self


def _where(loc: tuple[int | str, ...], data: dict[str, Any]) -> str:
    """``('config', 1, 'root')`` → ``config[2] ('opus').root``: TOML-ish and 1-based."""
    parts: list[str] = []
    node: Any = data
    for item in loc:
        if isinstance(item, int):
            label = f"[{item + 1}]"
            if isinstance(node, list) and item < len(node) and isinstance(node[item], dict):
                name = node[item].get("name")
                if isinstance(name, str):
                    label += f" ({name!r})"
            parts.append(label)
            node = node[item] if isinstance(node, list) and item < len(node) else None
        else:
            parts.append(("." if parts else "") + item)
            node = node.get(item) if isinstance(node, dict) else None
    return "".join(parts)


def load_bench_file(path: Path) -> BenchFile:
    """Read and validate BENCH.toml; any problem is a :class:`UsageError` of one line."""
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise UsageError(f"{path} {what}; give a BENCH.toml file (see docs/bench.md)")
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text; give a BENCH.toml file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    try:
        return BenchFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = _where(tuple(first["loc"]), data)
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = "unknown key (see docs/bench.md for the keys)"
        more = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
        raise UsageError(f"{path}: {where or 'file'}: {msg}{more}") from None
