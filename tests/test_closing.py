"""Every resource deeprepo opens is closed one way (``base.closing.Closing``): ``close()``,
or a ``with`` block that closes it however the block ends, an exception included."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from deeprepo.base.closing import Closing
from deeprepo.cli.progress import RunProgress
from deeprepo.codebase.git import GitReader
from deeprepo.report.calls import CallLog
from deeprepo.report.trajectory import TrajectoryWriter
from deeprepo.testing.loopback import LoopbackServer


class Boom(Exception):
    pass


def test_a_with_block_closes_on_an_exception_and_close_is_idempotent(tmp_path: Path) -> None:
    with pytest.raises(Boom), TrajectoryWriter(tmp_path / "t.jsonl") as log:
        log.record("start")
        raise Boom
    with pytest.raises(Boom), CallLog(tmp_path / "c.jsonl") as calls:
        raise Boom
    for closed in (log, calls):
        assert isinstance(closed, Closing)
        assert closed._fh.closed
        closed.close()  # a second close is harmless


def test_resources_acquired_on_entry_are_given_back_on_exit(tmp_path: Path) -> None:
    with pytest.raises(Boom), GitReader(tmp_path) as git:
        empty = git._empty
        assert empty is not None and os.path.isdir(empty)
        raise Boom
    assert git._empty is None and not os.path.exists(empty)

    console = Console(file=io.StringIO(), force_terminal=True)
    with RunProgress(console, "analyze") as progress:
        assert progress._status is not None
    assert progress._status is None

    with LoopbackServer() as server:
        assert server.running and server.port > 0
    assert not server.running
