"""The sub-LLM dispatcher behind the REPL's ``llm_query`` and ``llm_batch``.

Every item of a batch runs concurrently; the :class:`MeteredModel`'s semaphore
bounds how many are in flight. One item failing (provider error, budget spent,
a prompt that is not a string) turns into a string beginning ``"[llm error] "``
in that item's place, so a root model's batch never dies of one bad item.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Literal

from deeprepo.base.chat import ChatRequest, Message
from deeprepo.base.errors import BudgetExceeded, DeeprepoError
from deeprepo.base.prompts import WORKER_SYSTEM_PROMPT
from deeprepo.providers.metered import MeteredModel

__all__ = ["ERROR_PREFIX", "SubDispatcher"]

ERROR_PREFIX = "[llm error] "
_Outcome = Literal["answered", "refused", "failed"]
log = logging.getLogger(__name__)


class SubDispatcher:
    """Answers sub-LLM prompts through one metered model.

    ``sent_prompts`` lists, in call order (batch order within a batch), every prompt
    a model or the cache answered: the orchestrator computes coverage from it, so a
    prompt whose call failed is not in it. ``calls`` counts those answered prompts (a
    refused call is not a call); ``refused`` the prompts a budget turned away before
    any call, ``failed`` those whose call failed for good (``first_error`` says how).
    ``on_answer`` is told of each answered prompt (live progress).
    """

    def __init__(
        self,
        model: MeteredModel,
        *,
        system_default: str | None = WORKER_SYSTEM_PROMPT,
        max_tokens: int = 4096,
        temperature: float | None = None,
    ) -> None:
        self.model = model
        self.system_default = system_default
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.sent_prompts: list[str] = []
        self.calls = 0
        self.refused = 0
        self.failed = 0
        self.first_error: str | None = None
        self.last_budget_error: BudgetExceeded | None = None
        self.on_answer: Callable[[str], None] | None = None

    @property
    def errors(self) -> int:
        """Prompts that came back as error strings (refused or failed)."""
        return self.refused + self.failed

    def sub_calls_left(self) -> int | None:
        """Sub-calls ``--max-sub-calls`` still allows (None: no such limit). The kernel serves
        no more prompts than this (plus a margin) from one request."""
        budget = self.model.budget
        if budget is None or budget.max_sub_calls is None:
            return None
        return max(0, budget.max_sub_calls - budget.sub_calls_started)

    async def _one(self, prompt: object, system: object) -> tuple[str, _Outcome]:
        """``(answer or error string, outcome)``; never raises for a failed call."""
        if not isinstance(prompt, str):
            return _error(f"prompt must be a str, got {type(prompt).__name__}"), "failed"
        if system is not None and not isinstance(system, str):
            return _error(f"system must be a str or None, got {type(system).__name__}"), "failed"
        request = ChatRequest(
            messages=(Message("user", prompt),),
            system=self.system_default if system is None else system,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        try:
            completion = await self.model.complete(request)
        except BudgetExceeded as exc:
            self.last_budget_error = exc
            return _error(f"budget exhausted ({exc.kind}): {exc}"), "refused"
        except DeeprepoError as exc:
            return _error(str(exc)), "failed"
        except Exception as exc:  # a bug in a built-in worker must not sink the batch
            log.exception("sub-call failed unexpectedly")
            return _error(f"{type(exc).__name__}: {exc}"), "failed"
        if self.on_answer is not None:
            self.on_answer(prompt)
        return completion.text, "answered"

    def _settle(self, prompts: list[object], results: list[tuple[str, _Outcome]]) -> list[str]:
        out: list[str] = []
        for prompt, (text, outcome) in zip(prompts, results, strict=True):
            if outcome == "answered" and isinstance(prompt, str):
                self.sent_prompts.append(prompt)
                self.calls += 1
            elif outcome == "refused":
                self.refused += 1
            else:
                self.failed += 1
                if self.first_error is None:
                    self.first_error = text.removeprefix(ERROR_PREFIX)
            out.append(text)
        return out

    async def query(self, prompt: str, system: str | None = None) -> str:
        """One sub-LLM call: the answer, or an ``"[llm error] …"`` string."""
        result = await self._one(prompt, system)
        return self._settle([prompt], [result])[0]

    async def batch(self, prompts: list[str], system: str | None = None) -> list[str]:
        """Answers in the order of ``prompts``; a failed item holds an error string."""
        if isinstance(prompts, str | bytes):
            raise TypeError("llm_batch takes a list of prompts; for one prompt use llm_query")
        items: list[object] = list(prompts)
        budget = self.model.budget
        cut = len(items)
        if budget is not None and budget.max_sub_calls is not None:
            # Prompts past what --max-sub-calls still allows would each queue for a slot only
            # to be refused (100,000 of them cost the parent seconds): run the ones that can
            # go through, then refuse the rest at once with the budget's own error.
            left = max(0, budget.max_sub_calls - budget.sub_calls_started)
            strings = [i for i, p in enumerate(items) if isinstance(p, str)]
            cut = strings[left] if left < len(strings) else len(items)
        results = list(await asyncio.gather(*(self._one(p, system) for p in items[:cut])))
        rest = items[cut:]
        if rest and budget is not None and budget.max_sub_calls is not None:
            if budget.sub_calls_started >= budget.max_sub_calls:
                try:
                    budget.acquire("sub")  # spent: raises the error each item would get
                except BudgetExceeded as exc:
                    self.last_budget_error = exc
                    refused = _error(f"budget exhausted ({exc.kind}): {exc}")
                    for p in rest:
                        results.append(
                            (refused, "refused")
                            if isinstance(p, str)
                            else await self._one(p, system)
                        )
                    rest = []
            # Else a call was refused on cost or time before it took a slot: go the normal way.
            results += await asyncio.gather(*(self._one(p, system) for p in rest))
        return self._settle(items, results)


def _error(reason: str) -> str:
    return ERROR_PREFIX + reason
