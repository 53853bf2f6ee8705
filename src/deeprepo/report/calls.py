"""``calls.jsonl``: one record per model call, root and sub, written as each call ends.

The ledger keeps sums; this file keeps each call with what was asked and answered, for
the trajectory viewer and the run log. Root calls carry only the newest user message
(the REPL observation): the root's replies are in ``trajectory.jsonl``, and the whole
conversation again at every turn would grow the file quadratically. Prompts and replies
are cut to :data:`TEXT_LIMIT` characters each, with ``truncated`` set.

Records are flushed as they are written and synced at each turn's end (``sync``), so a
crash loses at most the calls of the turn in progress. Schema: docs/outputs.md.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from deeprepo.base.chat import ChatRequest, Role, UsageDict
from deeprepo.base.closing import Closing
from deeprepo.base.jsonl import iter_objects
from deeprepo.base.safefile import open_append
from deeprepo.providers.ledger import LLMCall
from deeprepo.report.trajectory import drop_torn_tail, read_trajectory

__all__ = ["TEXT_LIMIT", "CallDict", "CallLog", "read_calls"]

#: Characters kept of each prompt and each reply.
TEXT_LIMIT = 32 * 1024
#: The longest line read back from calls.jsonl: three texts of TEXT_LIMIT characters, even
#: JSON-escaped, fit well under it.
CALL_LINE_BYTES = 1 << 20


def _cut(text: str | None) -> tuple[str | None, bool]:
    if text is None or len(text) <= TEXT_LIMIT:
        return text, False
    return text[:TEXT_LIMIT], True


class CallDict(UsageDict):
    """One line of ``calls.jsonl`` as written (docs/outputs.md)."""

    seq: int
    turn: int
    t: float
    role: Role
    model: str
    system: str | None
    prompt: str | None
    response: str | None
    cost_usd: float | None
    latency_s: float
    cached: bool
    error: str | None
    finish_reason: str | None
    truncated: bool


class CallLog(Closing):
    """Appends call records to ``path``; ``turn`` is the root turn calls now belong to.

    Used as the ``on_call`` hook of both metered models of a run (thread-safe: sub-calls
    end concurrently).
    """

    def __init__(self, path: Path, *, first_turn: int = 1, started: float | None = None) -> None:
        self.path = path
        self.turn = first_turn
        self._t0 = time.time() if started is None else started
        self._lock = threading.Lock()
        if path.is_file():
            drop_torn_tail(path)  # a crash's half record must not swallow the next one
        self._seq = _last_seq(path)
        self._fh = open_append(path)
        #: Why the file stopped being written (a full disk, say); the run goes on and says so.
        self.failed: str | None = None

    def __call__(self, call: LLMCall, request: ChatRequest, response: str | None) -> None:
        self.write(call, request, response)

    def write(self, call: LLMCall, request: ChatRequest, response: str | None) -> None:
        """Append one record (``response`` None when no reply came)."""
        prompt, cut_prompt = _cut(request.last_user_text())
        reply, cut_reply = _cut(response)
        system, cut_system = _cut(request.system if call.role == "sub" else None)
        with self._lock:
            if self._fh.closed:
                return
            self._seq += 1
            record: CallDict = {
                "seq": self._seq,
                "turn": self.turn,
                "t": round(max(0.0, time.time() - call.latency_s - self._t0), 4),
                "role": call.role,
                "model": call.model,
                "system": system,
                "prompt": prompt,
                "response": reply,
                **call.usage.to_dict(),
                "cost_usd": call.cost_usd,
                "latency_s": round(call.latency_s, 4),
                "cached": call.cached,
                "error": call.error,
                "finish_reason": call.finish_reason,
                "truncated": cut_prompt or cut_reply or cut_system,
            }
            try:
                self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                self._fh.flush()
            except OSError as exc:
                self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        self.failed = f"{exc.strerror or exc}"
        try:
            self._fh.close()
        except OSError:
            pass

    def sync(self) -> None:
        """Flush to disk (called at each turn's end)."""
        with self._lock:
            if not self._fh.closed:
                try:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                except OSError as exc:
                    self._stop(exc)

    def close(self) -> None:
        self.sync()
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


def read_calls(path: Path) -> list[dict[str, Any]]:
    """Every complete record of ``path`` (none when it is absent; a torn last line is ignored)."""
    return read_trajectory(path) if path.is_file() else []


def _last_seq(path: Path) -> int:
    # A resumed run appends: numbering goes on from the last whole record.
    # Streamed: a hostile calls.jsonl of millions of records costs time, not memory.
    if not path.is_file():
        return 0
    seqs = (r.get("seq") for r in iter_objects(path, max_line_bytes=CALL_LINE_BYTES))
    return max((s for s in seqs if isinstance(s, int)), default=0)
