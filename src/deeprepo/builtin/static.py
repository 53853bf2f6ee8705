"""The ``static`` sub-worker: answers file-audit prompts from analyzers, offline.

It implements :class:`~deeprepo.base.chat.ChatModel`, so the dispatcher,
budgets and ledger treat it like any model, at zero tokens. It reads each
``<file path="...">`` block of the prompt (the shape built by
:func:`~deeprepo.base.prompts.file_audit_prompt`), runs the analyzers
(:mod:`deeprepo.builtin.analyzers`) in a thread, and replies in the worker JSON
shape the prompt asks for::

    {"findings": [{"file", "line", "end_line", "kind", "cwe", "severity",
                   "title", "detail", "fix", "tool"}],
     "warnings": [{"file", "tool", "message"}]}

``warnings`` is present only when an analyzer could not read a file (e.g.
Python written for a newer interpreter, semgrep missing): those files'
findings from that analyzer are missing, and a report should say so.

**Whole files.** Built with the repository's files (``StaticWorker(files)``,
which the analyze path does), the worker analyses the *whole* file behind a
slice (``lines="120-240"``) and answers with the findings inside the slice, so
a check that depends on an import 400 lines above still fires. The whole-file
analysis runs once per file content, however many slices and prompts show it.
A block whose text is not the file's text at those lines (the root edited it,
or the file is unknown) is analysed as it stands. Lines are always the
original file's. ``file`` is always set so a prompt that groups several files
stays unambiguous.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple

from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.prompts import extract_file_blocks
from deeprepo.builtin.analyzers import FileResult, analyze_texts, run_semgrep, semgrep_applies
from deeprepo.builtin.analyzers.python import python_parser

__all__ = ["FREE_FORM_NOTE", "StaticWorker"]

FREE_FORM_NOTE = (
    'The static worker only answers file-audit prompts (a <file path="..."> block with '
    "numbered lines, as built by file_audit_prompt). This prompt has none, so nothing was "
    "analysed; use an LLM sub-model (--sub) for free-form questions."
)
_EMPTY = '{"findings": []}'
_MEMO_LIMIT = 20_000  # files' results kept; an entry is a few findings
_SEMGREP_AHEAD = 24  # files scanned ahead with each semgrep start


class _Target(NamedTuple):
    """What one prompt block makes the worker analyse."""

    path: str
    text: str
    whole: bool  # the whole file (findings filtered to lo..hi) or the block alone (shifted)
    lo: int
    hi: int

    @property
    def key(self) -> tuple[str, str, bool]:
        return (
            self.path,
            hashlib.sha256(self.text.encode("utf-8", "replace")).hexdigest(),
            self.whole,
        )


class _Memo:
    """Results by key, each computed once even when several threads ask at once."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self._done: OrderedDict[Any, FileResult] = OrderedDict()
        self._pending: dict[Any, Future[FileResult]] = {}
        self._limit = limit

    def absent(self, keys: Iterable[Any]) -> list[Any]:
        """The keys neither computed nor being computed."""
        with self._lock:
            return [k for k in keys if k not in self._done and k not in self._pending]

    def get_many(
        self, wanted: dict[Any, _Target], compute: Callable[[list[_Target]], list[FileResult]]
    ) -> dict[Any, FileResult]:
        out: dict[Any, FileResult] = {}
        mine: dict[Any, _Target] = {}
        waiting: dict[Any, Future[FileResult]] = {}
        with self._lock:
            for key, target in wanted.items():
                if key in self._done:
                    out[key] = self._done[key]
                elif key in self._pending:
                    waiting[key] = self._pending[key]
                else:
                    self._pending[key] = Future()
                    mine[key] = target
        if mine:
            try:
                results = dict(zip(mine, compute(list(mine.values())), strict=True))
            except BaseException as exc:
                with self._lock:
                    for key in mine:
                        self._pending.pop(key).set_exception(exc)
                raise
            with self._lock:
                for key, result in results.items():
                    self._done[key] = result
                    self._pending.pop(key).set_result(result)
                while len(self._done) > self._limit:
                    self._done.popitem(last=False)
            out.update(results)
        for key, fut in waiting.items():
            out[key] = fut.result()
        return out


class StaticWorker:
    """Built-in sub-worker backed by bandit, semgrep (deeprepo's rules) and detect-secrets.

    ``files`` maps repository paths to their text (a :class:`Codebase`'s
    ``files``); with it, slices are analysed in their whole file's context.
    """

    def __init__(self, files: Mapping[str, str] | None = None) -> None:
        self._files = files
        self._memo = _Memo(_MEMO_LIMIT)
        self._semgrep_memo = _Memo(_MEMO_LIMIT)
        self._semgrep_order: list[str] | None = None
        self._order_lock = threading.Lock()
        # (path, tool) -> why that analyzer could not read the file, for the run's notes.
        self._unread: dict[tuple[str, str], str] = {}
        # Files an analyzer gave up on at a time bound: not audited, whatever reached it.
        # Set when the run ends: analyses still running in worker threads stop at their
        # next line instead of keeping the process alive past the run's --timeout.
        self._stop = threading.Event()

    @property
    def name(self) -> str:
        return "static"

    @property
    def python_parser(self) -> str:
        """The interpreter the Python analyzers parse with (``metrics.json: python_parser``)."""
        return python_parser()

    def unread_files(self) -> dict[tuple[str, str], str]:
        """``(path, tool) -> message`` for every file an analyzer that applies to it could
        not read so far (the run's ``not_analysed``: such a file is not audited)."""
        with self._order_lock:
            return dict(self._unread)

    async def complete(self, request: ChatRequest) -> Completion:
        """Audit every file block of the last user message; zero usage, no network."""
        prompt = request.last_user_text()
        if not extract_file_blocks(prompt):
            return Completion(f"{FREE_FORM_NOTE}\n{_EMPTY}", Usage(), self.name, "stop")
        text = await asyncio.to_thread(self.answer, prompt)
        return Completion(text, Usage(), self.name, "stop")

    def answer(self, prompt: str) -> str:
        """The reply to one prompt, synchronously (the blocking part of :meth:`complete`)."""
        blocks = extract_file_blocks(prompt)
        if not blocks:
            return f"{FREE_FORM_NOTE}\n{_EMPTY}"
        targets = [self._target(path, content, start) for path, content, start in blocks]
        results = self._memo.get_many({t.key: t for t in targets}, self._analyze)
        findings: list[dict[str, Any]] = []
        warnings: list[dict[str, str]] = []
        seen_warnings: set[tuple[str, str]] = set()
        for t in targets:
            result = results[t.key]
            for f in result.findings:
                if t.whole and not t.lo <= f.line <= t.hi:
                    continue
                findings.append(
                    f.to_json(t.path) if t.whole else f.shifted(t.lo - 1).to_json(t.path)
                )
            for w in result.warnings:
                if (t.path, w.message) not in seen_warnings:
                    seen_warnings.add((t.path, w.message))
                    warnings.append(w.to_json(t.path))
                    with self._order_lock:
                        self._unread.setdefault((t.path, w.tool), w.message)
        reply: dict[str, Any] = {"findings": findings}
        if warnings:
            reply["warnings"] = warnings
        return json.dumps(reply, ensure_ascii=False)

    def _target(self, path: str, content: str, start: int) -> _Target:
        hi = start + content.count("\n")
        whole = self._files.get(path) if self._files is not None else None
        if whole is not None and _is_slice_of(content, whole, start):
            return _Target(path, whole, True, start, hi)
        return _Target(path, content, False, start, hi)

    async def aclose(self) -> None:
        """Stop the analyses still running (they end at their next line, named as cut)."""
        self._stop.set()

    def _analyze(self, targets: list[_Target]) -> list[FileResult]:
        out: list[FileResult | None] = [None] * len(targets)
        for whole in (True, False):
            at = [i for i, t in enumerate(targets) if t.whole is whole]
            if at:
                done = analyze_texts(
                    [(targets[i].path, targets[i].text) for i in at],
                    whole_files=whole,
                    semgrep=self._semgrep_ahead if whole else run_semgrep,
                    stop=self._stop,
                )
                for i, result in zip(at, done, strict=True):
                    out[i] = result
        return [r if r is not None else FileResult() for r in out]

    def _semgrep_ahead(self, files: Sequence[tuple[str, str]]) -> list[FileResult]:
        """semgrep for whole files, scanning the next files in path order along with them.

        A semgrep start costs more than scanning a few files, and roots audit
        files in path order (the expert does), so each scan also takes up to
        ``_SEMGREP_AHEAD`` files that follow the requested ones and have not
        been scanned; their results wait in a memo for the prompts that show them.
        """
        wanted = {t.key: t for t in (_Target(p, text, True, 1, 1) for p, text in files)}
        extra: dict[Any, _Target] = {}
        if self._semgrep_memo.absent(wanted):  # a semgrep start is due: make it worth it
            ahead = {t.key: t for t in self._next_files([p for p, _ in files])}
            extra = {k: ahead[k] for k in self._semgrep_memo.absent(ahead) if k not in wanted}
        results = self._semgrep_memo.get_many(
            {**wanted, **extra}, lambda ts: run_semgrep([(t.path, t.text) for t in ts])
        )
        return [results[k] for k in wanted]

    def _next_files(self, paths: list[str]) -> list[_Target]:
        if self._files is None or not paths:
            return []
        with self._order_lock:
            if self._semgrep_order is None:
                self._semgrep_order = sorted(
                    p for p, text in self._files.items() if semgrep_applies(p, text)
                )
        order = self._semgrep_order
        at = bisect.bisect_right(order, max(paths))
        return [_Target(p, self._files[p], True, 1, 1) for p in order[at : at + _SEMGREP_AHEAD]]


def _is_slice_of(content: str, whole: str, start: int) -> bool:
    """Whether ``content`` is ``whole``'s text from line ``start`` (trailing spaces aside)."""
    shown = content.split("\n")
    lines = whole.split("\n")[start - 1 : start - 1 + len(shown)]
    if start < 1 or len(lines) != len(shown):
        # A prompt may drop the empty line after the file's last newline.
        return (
            start >= 1
            and len(lines) == len(shown) - 1
            and shown[-1].strip() == ""
            and all(a.rstrip() == b.rstrip() for a, b in zip(shown, lines, strict=False))
        )
    return all(a.rstrip() == b.rstrip() for a, b in zip(shown, lines, strict=True))
