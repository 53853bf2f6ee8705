"""A one-line live progress display for long runs (stderr, so stdout stays clean)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.status import Status


class RunProgress:
    """Feeds on Episode events: turn number, sub-calls, findings."""

    def __init__(self, console: Console, label: str) -> None:
        self.console = console
        self.label = label
        self.turn = 0
        self.max_turns = 0
        self.sub_calls = 0
        self.findings = 0
        self._status: Status | None = None

    def __enter__(self) -> RunProgress:
        if self.console.is_terminal:
            self._status = self.console.status(self._text())
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def _text(self) -> str:
        return (
            f"{self.label}: turn {self.turn}/{self.max_turns} · sub-calls {self.sub_calls} · "
            f"findings {self.findings}"
        )

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "turn_start":
            self.turn, self.max_turns = data["turn"], data["max_turns"]
        elif kind == "sub_calls":
            self.sub_calls = data["count"]
        elif kind == "turn_end":
            self.findings, self.sub_calls = data["findings"], data["sub_calls"]
            if self._status is None:
                # Not a terminal (CI, a pipe): one plain line per turn instead of a spinner.
                self.console.print(self._text(), highlight=False)
        if self._status is not None:
            self._status.update(self._text())
