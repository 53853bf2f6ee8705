"""The ``static`` sub-worker: answers file-audit prompts from analyzers, offline.

It implements :class:`~deeprepo.providers.base.ChatModel`, so the dispatcher,
budgets and ledger treat it like any model, at zero tokens. It reads each
``<file path="...">`` block of the prompt (the shape built by
:func:`~deeprepo.orchestrator.prompts.file_audit_prompt`), runs
:func:`~deeprepo.workers.analyzers.analyze_file` on it in a thread, and replies
in the worker JSON shape the prompt asks for::

    {"findings": [{"file", "line", "end_line", "kind", "cwe", "severity",
                   "title", "detail", "fix", "tool"}]}

Lines are the original file's, also for a slice (``lines="120-240"``).
``file`` is always set so a prompt that groups several files stays unambiguous.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from deeprepo.orchestrator.prompts import extract_file_blocks
from deeprepo.providers.base import ChatRequest, Completion, Usage
from deeprepo.workers.analyzers import analyze_file

__all__ = ["FREE_FORM_NOTE", "StaticWorker"]

FREE_FORM_NOTE = (
    'The static worker only answers file-audit prompts (a <file path="..."> block with '
    "numbered lines, as built by file_audit_prompt). This prompt has none, so nothing was "
    "analysed; use an LLM sub-model (--sub) for free-form questions."
)
_EMPTY = '{"findings": []}'


class StaticWorker:
    """Built-in sub-worker backed by bandit (Python) and detect-secrets (every file)."""

    @property
    def name(self) -> str:
        return "static"

    async def complete(self, request: ChatRequest) -> Completion:
        """Audit every file block of the last user message; zero usage, no network."""
        prompt = _last_user_text(request)
        if not extract_file_blocks(prompt):
            return Completion(f"{FREE_FORM_NOTE}\n{_EMPTY}", Usage(), self.name, "stop")
        text = await asyncio.to_thread(self.answer, prompt)
        return Completion(text, Usage(), self.name, "stop")

    def answer(self, prompt: str) -> str:
        """The reply to one prompt, synchronously (the blocking part of :meth:`complete`)."""
        blocks = extract_file_blocks(prompt)
        if not blocks:
            return f"{FREE_FORM_NOTE}\n{_EMPTY}"
        findings: list[dict[str, Any]] = []
        for path, content, start_line in blocks:
            findings.extend(f.to_json(path) for f in analyze_file(path, content, start_line))
        return json.dumps({"findings": findings}, ensure_ascii=False)

    async def aclose(self) -> None:
        """Nothing to release: analyzers hold no connections."""


def _last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content
    return ""
