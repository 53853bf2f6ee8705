"""The models deeprepo knows: the price table's entries and the built-in models.

What ``deeprepo models`` lists. A priced model shows its four prices per 1M tokens, its
context window and where the price came from (``data/prices.json``, or the user's prices
file); what the table does not know is ``None`` (shown as "unknown"), never a guess. The
built-in models cost nothing and call no LLM.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from deeprepo.providers.prices import PriceTable
from deeprepo.providers.registry import builtin_providers

__all__ = ["ModelInfo", "builtin_models", "known_models"]


@dataclass(frozen=True)
class ModelInfo:
    """One row of ``deeprepo models`` (USD per 1M tokens)."""

    name: str
    kind: Literal["priced", "built-in"]
    input: float
    output: float
    cache_read: float
    cache_write: float
    cache_read_listed: bool  # False: no separate rate; billed at the input price
    cache_write_listed: bool
    context_window: int | None  # tokens; None: unknown (or, for a built-in, not a model)
    source: str | None  # None: unknown
    as_of: str | None
    source_url: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def builtin_models() -> list[ModelInfo]:
    """The models the registered built-in providers list (scripted root policies, the
    static and oracle workers): free, no key, no network."""
    described: dict[str, str] = {}
    for provider in builtin_providers():
        described.update(provider.models())
    return [
        ModelInfo(
            name=name,
            kind="built-in",
            input=0.0,
            output=0.0,
            cache_read=0.0,
            cache_write=0.0,
            cache_read_listed=True,
            cache_write_listed=True,
            context_window=None,
            source=text,
            as_of=None,
            source_url=None,
        )
        for name, text in described.items()
    ]


def known_models(table: PriceTable, pattern: str | None = None) -> list[ModelInfo]:
    """Priced models (sorted), then the built-ins; ``pattern`` keeps the names that contain
    it, case-insensitively."""
    rows: list[ModelInfo] = []
    for name in table.models():
        price = table.get(name)
        assert price is not None  # every name the table lists has a price
        rows.append(
            ModelInfo(
                name=name,
                kind="priced",
                input=price.input,
                output=price.output,
                cache_read=price.cache_read,
                cache_write=price.cache_write,
                cache_read_listed=price.cache_read_listed,
                cache_write_listed=price.cache_write_listed,
                context_window=price.context_window,
                source=price.source,
                as_of=price.as_of,
                source_url=price.source_url,
            )
        )
    rows += builtin_models()
    if pattern:
        needle = pattern.casefold()
        rows = [r for r in rows if needle in r.name.casefold()]
    return rows
