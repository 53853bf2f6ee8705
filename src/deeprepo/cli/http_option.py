"""``--http-client``: one option definition shared by analyze, eval and bench.

The choice travels in the run's environment (:data:`HTTP_CLIENT_ENV`), which every
command already hands to the run wiring, so rollouts, bench cells and the bench judge
build their models with the same client as a single analysis.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated

import typer

from deeprepo.run.wiring import HTTP_CLIENT_ENV

__all__ = ["HttpClientChoice", "HttpClientOption", "run_env"]


class HttpClientChoice(StrEnum):
    """How hosted models are called: deeprepo's aiohttp client or the official SDK."""

    fast = "fast"
    sdk = "sdk"


HttpClientOption = Annotated[
    HttpClientChoice | None,
    typer.Option(
        "--http-client",
        help="HTTP client for hosted models: fast (deeprepo's own, default) or sdk (the "
        "official OpenAI/Anthropic SDK). Both send the same requests and bill the same; "
        f"{HTTP_CLIENT_ENV} sets the default.",
        case_sensitive=False,
    ),
]


def run_env(
    choice: HttpClientChoice | None, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The run's environment (``os.environ`` by default) with ``choice`` applied; without
    one, :data:`HTTP_CLIENT_ENV` keeps whatever the environment says."""
    out = dict(os.environ if env is None else env)
    if choice is not None:
        out[HTTP_CLIENT_ENV] = choice.value
    return out
