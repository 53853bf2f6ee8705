"""The price table: USD per 1M tokens for each model, shipped as data.

The packaged table (``deeprepo/data/prices.json``) can be overridden by a user
file of the same shape (``{"models": {"<spec>": {"input": …, "output": …}}}``),
given as a path or through ``$DEEPREPO_PRICES``; its entries merge field by field
over the packaged ones. A model missing from both has an *unknown* price: its
cost is ``None``, never 0. Built-in models (``scripted/*``, ``static``,
``oracle``) are known and free, and so are local models (``local/<name>``): they
run on this machine.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from deeprepo.base.chat import Usage
from deeprepo.base.errors import ConfigError

__all__ = ["ModelPrice", "PriceTable", "is_builtin_model"]

PRICES_ENV = "DEEPREPO_PRICES"
_PER_TOKEN = 1e-6
_PRICE_FIELDS = frozenset({"input", "output", "cache_read", "cache_write"})
_PROVENANCE = ("source", "as_of", "source_url")
# Dated snapshots (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``) price like their alias.
_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def is_builtin_model(name: str) -> bool:
    """True for the in-process models that need no key and cost nothing (local
    checkpoints, ``hf/<path>``, included)."""
    return name in ("static", "oracle") or name.startswith(("scripted/", "hf/"))


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M tokens. Cache prices default to the input price when a provider
    has no separate rate: that over- rather than under-states the cost."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    context_window: int | None = None
    source: str | None = None  # where the price came from (a list price, a listing, a file)
    as_of: str | None = None  # when it was checked (YYYY-MM)
    source_url: str | None = None
    cache_read_listed: bool = True  # False: no separate rate, cache_read is the input price
    cache_write_listed: bool = True  # the same for cache_write

    def cost(self, usage: Usage) -> float:
        """Dollar cost of ``usage`` at these prices."""
        return _PER_TOKEN * (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        )


def _number(entry: Mapping[str, Any], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{where}: {key!r} must be a non-negative number of USD per 1M tokens")
    return float(value)


def _to_price(name: str, entry: Mapping[str, Any], where: str) -> ModelPrice:
    inp = _number(entry, "input", f"{where} [{name}]")
    out = _number(entry, "output", f"{where} [{name}]")
    if inp is None or out is None:
        raise ConfigError(f"{where} [{name}]: both 'input' and 'output' prices are required")
    ctx = entry.get("context_window")
    if ctx is not None and (isinstance(ctx, bool) or not isinstance(ctx, int) or ctx <= 0):
        raise ConfigError(f"{where} [{name}]: 'context_window' must be a positive integer")
    read = _number(entry, "cache_read", f"{where} [{name}]")
    write = _number(entry, "cache_write", f"{where} [{name}]")
    return ModelPrice(
        input=inp,
        output=out,
        cache_read=inp if read is None else read,
        cache_write=inp if write is None else write,
        context_window=ctx,
        source=_text(entry, "source"),
        as_of=_text(entry, "as_of"),
        source_url=_text(entry, "source_url"),
        cache_read_listed=read is not None,
        cache_write_listed=write is not None,
    )


def _text(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return (value.strip() or None) if isinstance(value, str) else None


def _models_of(data: Any, where: str) -> dict[str, dict[str, Any]]:
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ConfigError(
            f'{where}: expected a JSON object {{"models": {{"<model spec>": {{...}}}}}}'
        )
    models: dict[str, dict[str, Any]] = {}
    for name, entry in data["models"].items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} [{name}]: each model entry must be a JSON object")
        models[str(name)] = dict(entry)
    return models


_PACKAGED = "packaged prices.json"


def _packaged_models() -> dict[str, dict[str, Any]]:
    text = resources.files("deeprepo").joinpath("data/prices.json").read_text("utf-8")
    return _models_of(json.loads(text), _PACKAGED)


@functools.cache
def _packaged_prices() -> Mapping[str, ModelPrice]:
    """The packaged prices, made once a process: the file cannot change under a running
    process and a price is frozen, while every rollout loads a table (~1 ms of JSON and
    records each)."""
    return {name: _to_price(name, entry, _PACKAGED) for name, entry in _packaged_models().items()}


class PriceTable:
    """Prices by model spec name; see the module docstring for the file shape."""

    def __init__(self, prices: Mapping[str, ModelPrice]) -> None:
        self._prices = dict(prices)

    @classmethod
    def load(cls, override_path: Path | None = None) -> PriceTable:
        """The packaged table, with ``override_path`` (or ``$DEEPREPO_PRICES``) merged over it."""
        if override_path is None and os.environ.get(PRICES_ENV):
            override_path = Path(os.environ[PRICES_ENV])
        if override_path is None:
            return cls(_packaged_prices())
        raw = _packaged_models()
        where = str(override_path)
        try:
            data = json.loads(Path(override_path).read_text("utf-8"))
        except OSError as exc:
            raise ConfigError(
                f"cannot read price file {override_path}: {exc.strerror}; "
                f"fix the path or unset {PRICES_ENV}"
            ) from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"price file {override_path} is not valid JSON: {exc}") from exc
        for name, entry in _models_of(data, where).items():
            base = raw.get(name, {})
            if _PRICE_FIELDS & set(entry) and "source" not in entry:
                # Prices from the user's file: the packaged provenance no longer applies.
                base = {k: v for k, v in base.items() if k not in _PROVENANCE}
                entry = {**entry, "source": f"prices file {override_path}"}
            raw[name] = {**base, **entry}
        return cls({name: _to_price(name, entry, where) for name, entry in raw.items()})

    def get(self, model_name: str) -> ModelPrice | None:
        """The price of ``model_name``; dated snapshots fall back to their alias."""
        price = self._prices.get(model_name)
        if price is None:
            price = self._prices.get(_DATE_SUFFIX.sub("", model_name))
        return price

    def cost(self, model_name: str, usage: Usage) -> float | None:
        """Dollar cost of ``usage`` on ``model_name``: 0.0 for built-ins, None if unknown."""
        if is_builtin_model(model_name) or model_name.startswith("local/"):
            return 0.0
        price = self.get(model_name)
        return None if price is None else price.cost(usage)

    def context_window(self, model_name: str) -> int | None:
        """The model's context window in tokens, where the table knows it."""
        price = self.get(model_name)
        return None if price is None else price.context_window

    def models(self) -> list[str]:
        """Every model name the table prices, sorted."""
        return sorted(self._prices)

    def __contains__(self, model_name: object) -> bool:
        return isinstance(model_name, str) and self.get(model_name) is not None
