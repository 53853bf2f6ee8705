"""A one-line live progress display for long runs (stderr, so stdout stays clean).

On a terminal it is a spinner line; elsewhere (CI, a pipe) plain lines, one per turn
and at most one every few seconds while files are being audited. It shows the turn,
the files audited out of the audit set (from answered worker prompts) and, once the
audit is under way, an estimate of the time left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.status import Status

from deeprepo.base.closing import Closing

#: Plain (non-terminal) audit lines at most this often.
PLAIN_EVERY_S = 5.0


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class RunProgress(Closing):
    """Feeds on Episode events: turn number, worker calls, files audited, findings."""

    def __init__(
        self,
        console: Console,
        label: str,
        clock: Callable[[], float] = time.monotonic,
        *,
        verbose: bool = False,
    ) -> None:
        self.console = console
        self.label = label
        self.verbose = verbose
        self.clock = clock
        self.turn = 0
        self.max_turns = 0
        self.sub_calls = 0
        self.findings = 0
        self.audited = 0
        self.to_audit = 0
        self._audit_t0: float | None = None
        self._audit_n0 = 0
        self._last_audit = 0.0
        self._last_plain = clock()  # the first plain audit line comes after PLAIN_EVERY_S
        self._status: Status | None = None

    def open(self) -> None:
        """Start the spinner line (on a terminal only)."""
        if self.console.is_terminal:
            self._status = self.console.status(self._text())
            self._status.start()

    def close(self) -> None:
        """Stop the spinner line."""
        status, self._status = self._status, None
        if status is not None:
            status.stop()

    def stopping(self) -> None:
        """Ctrl-C or SIGTERM: the spinner stops and one line says the run is winding down."""
        self.close()
        self.console.print(
            "stopping… (writing what the run has; Ctrl-C again to stop at once)",
            highlight=False,
            markup=False,
        )

    def eta_s(self) -> float | None:
        """Seconds until every file is audited, at the rate seen so far (None: unknown)."""
        if self._audit_t0 is None or self.audited <= self._audit_n0:
            return None
        if self.clock() - self._last_audit > PLAIN_EVERY_S:
            return None  # no file audited lately: the rate says nothing about what is left
        rate = (self.audited - self._audit_n0) / max(self.clock() - self._audit_t0, 1e-6)
        return (self.to_audit - self.audited) / rate

    def _text(self) -> str:
        parts = [f"{self.label}: turn {self.turn}/{self.max_turns}"]
        if self.to_audit:
            audit = f"audited {self.audited}/{self.to_audit} files"
            eta = self.eta_s()
            if eta is not None and self.audited < self.to_audit:
                audit += f" · ETA {_duration(eta)}"
            parts.append(audit)
        parts += [f"worker calls {self.sub_calls}", f"findings {self.findings}"]
        return " · ".join(parts)

    def _loaded(self, data: dict[str, Any]) -> None:
        """The load summary: what was read, and what was left out and why."""
        parts = [f"loaded {data['files']:,} files"]
        if data.get("skipped"):
            parts.append(f"{data['skipped']:,} skipped")
        if data.get("ignored"):
            parts.append(f"{data['ignored']:,} ignored by .gitignore")
        runs = data.get("run_folders") or []
        if runs:
            shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3:,} more" if len(runs) > 3 else "")
            parts.append(
                f"{len(runs):,} run folder(s) of deeprepo's own outputs left out ({shown})"
            )
        self.console.print(" · ".join(parts), highlight=False, markup=False, soft_wrap=True)
        if self.verbose:
            for note in data.get("notes") or []:
                self.console.print(f"load note: {note}", highlight=False, markup=False)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        plain_line = False
        if kind == "loaded":
            self._loaded(data)
        elif kind == "turn_start":
            self.turn, self.max_turns = data["turn"], data["max_turns"]
        elif kind == "sub_calls":
            self.sub_calls = data["count"]
        elif kind == "audit_start":
            self.to_audit = data["files"]
        elif kind == "audited":
            # Every answered prompt says how many were answered; the rate (ETA) follows files.
            self.sub_calls = max(self.sub_calls, int(data.get("calls", 0)))
            now = self.clock()
            if self._audit_t0 is None:
                self._audit_t0, self._audit_n0 = now, data["files"]
            if data["files"] != self.audited:
                self._last_audit = now
            self.audited, self.to_audit = data["files"], data["total"]
            if now - self._last_plain >= PLAIN_EVERY_S:
                self._last_plain = now
                plain_line = True
        elif kind == "turn_end":
            self.findings, self.sub_calls = data["findings"], data["sub_calls"]
            plain_line = True
        elif kind == "since":  # --since REV was analysed first
            self.console.print(
                f"since {data['rev']}: {data['findings']:,} finding(s) there; "
                "those found again are set aside as baselined",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        if self._status is not None:
            self._status.update(self._text())
        elif plain_line:
            # Not a terminal: plain lines instead of a spinner.
            self.console.print(self._text(), highlight=False, markup=False)
