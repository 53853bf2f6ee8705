"""A content-addressed, on-disk cache of model replies.

The key is the SHA-256 of (model name, system prompt, messages, max_tokens,
temperature): the same request to the same model gives the same key, so
rerunning an analysis replays the sub-calls instead of paying for them again.
Each entry is one JSON file, written to a temp file and renamed into place, so
concurrent runs never read a half-written entry.

The directory is ``$DEEPREPO_CACHE_DIR``, else ``$XDG_CACHE_HOME/deeprepo/responses``,
else ``~/.cache/deeprepo/responses``, resolved when the cache is used (not at
import). A hit is recorded in the ledger as a ``cached=True`` call with zero
tokens and zero cost: the money was spent by the run that filled the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from deeprepo.base.chat import ChatRequest, Completion, Usage

__all__ = ["ResponseCache", "default_cache_dir"]

_FORMAT = 1


def default_cache_dir() -> Path:
    """Where the cache lives unless told otherwise (environment read now, not at import)."""
    if os.environ.get("DEEPREPO_CACHE_DIR"):
        return Path(os.environ["DEEPREPO_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deeprepo" / "responses"


def cache_key(model_name: str, request: ChatRequest) -> str:
    """SHA-256 hex of what determines a reply. ``cache_prompt`` is left out: it
    changes the bill, not the answer."""
    payload = {
        "v": _FORMAT,
        "model": model_name,
        "system": request.system,
        "messages": [[m.role, m.content] for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    blob = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """One JSON file per key under ``directory`` (sharded by the key's first 2 chars)."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory
        self.hits = 0
        self.misses = 0

    @property
    def directory(self) -> Path:
        return self._directory if self._directory is not None else default_cache_dir()

    def path_for(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, model_name: str, request: ChatRequest) -> Completion | None:
        """The stored reply for this request, or None. A corrupt entry is a miss."""
        path = self.path_for(cache_key(model_name, request))
        try:
            data = json.loads(path.read_text("utf-8"))
            completion = _completion_from(data)
        except (OSError, ValueError, TypeError, KeyError):
            self.misses += 1
            return None
        self.hits += 1
        return completion

    def put(self, model_name: str, request: ChatRequest, completion: Completion) -> None:
        """Store a reply; the write is atomic (temp file + rename)."""
        path = self.path_for(cache_key(model_name, request))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "v": _FORMAT,
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


def _completion_from(data: dict[str, Any]) -> Completion:
    if data.get("v") != _FORMAT or not isinstance(data.get("text"), str):
        raise ValueError("not a cache entry of this format")
    u = data.get("usage") or {}
    if not isinstance(u, dict):
        raise ValueError("the entry's usage is not an object")
    cost = data.get("reported_cost_usd")
    return Completion(
        text=data["text"],
        usage=Usage.from_dict(u),
        model=str(data.get("model") or ""),
        finish_reason=data.get("finish_reason"),
        reported_cost_usd=None if cost is None else float(cost),
    )
