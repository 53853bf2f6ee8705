"""``--executor`` and ``--address``: where ``eval`` runs its rollouts and ``bench`` its cells."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

__all__ = ["AddressOption", "ExecutorChoice", "ExecutorOption"]


class ExecutorChoice(StrEnum):
    """This process's own pool, or Ray tasks (``pip install 'deeprepo[ray]'``)."""

    local = "local"
    ray = "ray"


ExecutorOption = Annotated[
    ExecutorChoice,
    typer.Option(
        "--executor",
        help="Where the work runs: local (this process, default) or ray (Ray tasks; "
        "needs pip install 'deeprepo[ray]'). Same results files either way.",
        case_sensitive=False,
    ),
]

AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="With --executor ray: the Ray cluster to join (e.g. 10.0.0.5:6379 from "
        "`ray start --head`); without it a local Ray bound to 127.0.0.1 is started.",
    ),
]
