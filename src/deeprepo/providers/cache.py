"""A content-addressed, on-disk cache of model replies.

The key is the SHA-256 of (provider, endpoint, model name, system prompt, messages,
max_tokens, temperature): the same request to the same model at the same server gives
the same key, so rerunning an analysis replays the sub-calls instead of paying for them
again, and a reply from one server never answers a run against another. Each entry is
one JSON file, written to a temp file and renamed into place, so concurrent runs never
read a half-written entry; it records where it came from (provider, endpoint, model,
time), and an entry whose origin is not the request's, or that is not an entry this
version writes (wrong types, too big, a link), is a miss, counted in ``rejected``.

The cache is untrusted input like a run folder: a directory that is a symbolic link,
another user's, or writable by others is refused (:class:`UnsafePathError`).

The directory is ``$DEEPREPO_CACHE_DIR``, else ``$XDG_CACHE_HOME/deeprepo/responses``,
else ``~/.cache/deeprepo/responses``, resolved when the cache is used (not at
import). A hit is recorded in the ledger as a ``cached=True`` call with zero
tokens and zero cost: the money was spent by the run that filled the cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.private import check_shared_dir

__all__ = ["CacheOrigin", "ResponseCache", "cache_key", "default_cache_dir", "endpoint_for"]

_FORMAT = 2  # 1 did not key on the endpoint: its entries are misses
_MAX_ENTRY_BYTES = 16 << 20  # far above any reply; a bigger file was not written by us
#: Where each provider's SDK sends requests when no base URL is given (and the variable
#: that SDK reads to change it).
_DEFAULT_ENDPOINTS = {
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "openrouter": (None, "https://openrouter.ai/api/v1"),
}


@dataclass(frozen=True)
class CacheOrigin:
    """Who answers a model's requests: its provider and endpoint (normalised)."""

    provider: str
    base_url: str


def _normalise(url: str) -> str:
    parts = urlsplit(url.strip())
    return urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, "")
    )


def endpoint_for(provider: str, base_url: str | None, env: Mapping[str, str] | None = None) -> str:
    """The endpoint a model of ``provider`` reaches: ``base_url``, else its SDK's default
    (as the environment sets it), normalised; ``""`` for a provider with none."""
    if base_url:
        return _normalise(base_url)
    variable, default = _DEFAULT_ENDPOINTS.get(provider, (None, ""))
    environ = os.environ if env is None else env
    chosen = (environ.get(variable) or "") if variable else ""
    return _normalise(chosen or default) if (chosen or default) else ""


def default_cache_dir() -> Path:
    """Where the cache lives unless told otherwise (environment read now, not at import)."""
    if os.environ.get("DEEPREPO_CACHE_DIR"):
        return Path(os.environ["DEEPREPO_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deeprepo" / "responses"


def cache_key(model_name: str, request: ChatRequest, origin: CacheOrigin | None = None) -> str:
    """SHA-256 hex of what determines a reply. ``cache_prompt`` is left out: it
    changes the bill, not the answer."""
    origin = origin or _origin_of(model_name)
    payload = {
        "v": _FORMAT,
        "provider": origin.provider,
        "base_url": origin.base_url,
        "model": model_name,
        "system": request.system,
        "messages": [[m.role, m.content] for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    blob = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _origin_of(model_name: str) -> CacheOrigin:
    """The origin of a model named only by its spec: its provider's default endpoint."""
    provider = model_name.partition("/")[0]
    return CacheOrigin(provider, endpoint_for(provider, None))


class ResponseCache:
    """One JSON file per key under ``directory`` (sharded by the key's first 2 chars).
    ``origin``: the provider and endpoint every request of this cache goes to (see
    :meth:`bound`); without one, a model's provider default."""

    def __init__(self, directory: Path | None = None, origin: CacheOrigin | None = None) -> None:
        self._directory = directory
        self.origin = origin
        self.hits = 0
        self.misses = 0
        self.rejected = 0  # entries read but not trusted (another origin, malformed)
        self._made = False  # the directory was made (or found) and checked by a put
        check_shared_dir(self.directory, "the response cache")

    def bound(
        self, provider: str, base_url: str | None, env: Mapping[str, str] | None = None
    ) -> ResponseCache:
        """This cache for the requests of one model: ``provider`` at ``base_url``."""
        return ResponseCache(
            self._directory, CacheOrigin(provider, endpoint_for(provider, base_url, env))
        )

    @property
    def directory(self) -> Path:
        return self._directory if self._directory is not None else default_cache_dir()

    def path_for(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, model_name: str, request: ChatRequest) -> Completion | None:
        """The stored reply for this request, or None. An entry that is corrupt, not of
        this format, or from another origin is a miss (the last two are ``rejected``)."""
        origin = self.origin or _origin_of(model_name)
        path = self.path_for(cache_key(model_name, request, origin))
        try:
            data = _read_entry(path)
        except FileNotFoundError:
            self.misses += 1
            return None
        except (OSError, ValueError, RecursionError) as exc:
            self._reject(path, str(exc) or type(exc).__name__)
            return None
        try:
            _check_origin(data, model_name, origin)
            completion = _completion_from(data)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            self._reject(path, str(exc))
            return None
        self.hits += 1
        return completion

    def _reject(self, path: Path, why: str) -> None:
        self.misses += 1
        self.rejected += 1
        if self.rejected == 1:  # once per model and run: the count says the rest
            warnings.warn(
                f"ignored the cached reply {path} ({why[:200]}); the model is asked instead",
                stacklevel=3,
            )

    def put(self, model_name: str, request: ChatRequest, completion: Completion) -> None:
        """Store a reply; the write is atomic (temp file + rename)."""
        origin = self.origin or _origin_of(model_name)
        path = self.path_for(cache_key(model_name, request, origin))
        if not self._made:
            # Made private if new; checked again, as someone could have made it since.
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            check_shared_dir(self.directory, "the response cache")
            self._made = True
        path.parent.mkdir(exist_ok=True)
        data = {
            "v": _FORMAT,
            "origin": {
                "provider": origin.provider,
                "base_url": origin.base_url,
                "model": model_name,
                "stored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            "model_name": model_name,
            "text": completion.text,
            "model": completion.model,
            "finish_reason": completion.finish_reason,
            "reported_cost_usd": completion.reported_cost_usd,
            "usage": completion.usage.to_dict(),
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def clear(self) -> int:
        """Delete every entry; returns how many were removed."""
        removed = 0
        if not self.directory.is_dir():
            return 0
        for entry in self.directory.glob("*/*.json"):
            try:
                entry.unlink()
                removed += 1
            except OSError:
                pass
        return removed


def _read_entry(path: Path) -> dict[str, Any]:
    """The entry's JSON object; a link, a non-file or an oversized file is refused."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ENTRY_BYTES:
            raise ValueError("not a regular file of a reply's size")
        data = json.loads(fh.read(_MAX_ENTRY_BYTES + 1).decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _check_origin(data: dict[str, Any], model_name: str, origin: CacheOrigin) -> None:
    if data.get("v") != _FORMAT:
        raise ValueError("not a cache entry of this format")
    recorded = data.get("origin")
    if not isinstance(recorded, dict):
        raise ValueError("the entry records no origin")
    seen = (recorded.get("provider"), recorded.get("base_url"), recorded.get("model"))
    if seen != (origin.provider, origin.base_url, model_name):
        raise ValueError(
            f"stored for {seen[1] or seen[0]!s:.80} ({seen[2]!s:.80}), not for "
            f"{origin.base_url or origin.provider} ({model_name})"
        )


def _completion_from(data: dict[str, Any]) -> Completion:
    if not isinstance(data.get("text"), str):
        raise ValueError("the entry's text is not a string")
    u = data.get("usage") or {}
    if not isinstance(u, dict):
        raise ValueError("the entry's usage is not an object")
    cost = data.get("reported_cost_usd")
    if cost is not None and (
        isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost)
    ):
        raise ValueError("the entry's cost is not a number")
    finish = data.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise ValueError("the entry's finish reason is not a string")
    model = data.get("model")
    return Completion(
        text=data["text"],
        usage=Usage.from_dict(u),
        model=model if isinstance(model, str) else "",
        finish_reason=finish,
        reported_cost_usd=None if cost is None else float(cost),
    )
