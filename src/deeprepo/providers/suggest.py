""" "Did you mean …?" for a misspelt model: the nearest of the models deeprepo knows (the
price table's, and the offline engine's)."""

from __future__ import annotations

import difflib

from deeprepo.providers.prices import PriceTable

__all__ = ["did_you_mean"]

_OFFLINE = ("scripted/expert", "static", "oracle")


def did_you_mean(name: str) -> str:
    """``" (did you mean 'anthropic/claude-sonnet-4-5'?)"`` for the nearest known model, or
    ``""`` when none is near (or ``name`` is itself known)."""
    try:
        known = [*PriceTable.load().models(), *_OFFLINE]
    except Exception:  # a broken DEEPREPO_PRICES file must not hide the error being explained
        known = list(_OFFLINE)
    if name in known:
        return ""
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return f" (did you mean {near[0]!r}?)" if near else ""
