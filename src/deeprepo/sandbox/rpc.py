"""The parent's side of the kernel's sub-LLM calls: serving one ``llm`` request, and
grouping a cell's requests into the ``llm_query``/``llm_batch`` calls that sent them.

A request may be forged (a cell can write on the pipe), so each is served for at most
what the sub-call budget has left (plus a margin) and ``MAX_REQUEST_ITEMS``; the rest
get one compact error, and a failing handler fails the items, never the kernel.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, NamedTuple

from deeprepo.sandbox import protocol

LlmHandler = Callable[[list[str], str | None], Awaitable[list[str]]]
"""A batch of prompts (and an optional system prompt) -> one answer per prompt; errors as strings."""
Capacity = Callable[[], int | None]
"""How many more sub-calls the budget allows (None: no sub-call limit)."""


class LlmCall(NamedTuple):
    """One ``llm_query`` / ``llm_batch`` call of a cell, however many requests carried it."""

    api: Literal["query", "batch"]
    size: int  # prompts the call asked for (refused ones included)


async def serve_request(
    msg: dict[str, Any], handler: LlmHandler, capacity: Capacity | None, max_prompt_chars: int
) -> tuple[bytes, int, int]:
    """Answer one ``llm`` request: ``(reply, prompts served, prompts refused)``.

    Every served item gets a string, failures included. Past what the sub-call budget
    has left (plus a margin), and past ``MAX_REQUEST_ITEMS``, prompts are refused
    with one error for all of them, so a request of millions costs no more than the
    prompts it may send.
    """
    prompts = msg.get("prompts")
    call_id = msg.get("id") if type(msg.get("id")) is int else None
    items: list[object] = prompts if isinstance(prompts, list) else []
    left = capacity() if capacity is not None else None
    allowed = protocol.MAX_REQUEST_ITEMS
    if left is not None:
        allowed = min(allowed, left + protocol.REQUEST_MARGIN) if left > 0 else 0
    served = items[:allowed]
    refused = len(items) - len(served)
    system = msg.get("system")
    limit = max_prompt_chars
    bad_system = protocol.system_error(system, limit)
    if bad_system is not None:
        results: list[str | None] = [bad_system] * len(served)
    else:
        results = [protocol.prompt_error(i, p, limit) for i, p in enumerate(served)]
    todo = [i for i, r in enumerate(results) if r is None]
    if todo:
        batch = [str(served[i]) for i in todo]
        answers = await call_handler(handler, batch, system if isinstance(system, str) else None)
        for i, answer in zip(todo, answers, strict=True):
            results[i] = answer
    reply: dict[str, Any] = {"type": "llm_result", "id": call_id, "results": results}
    if refused:
        reply["refused"] = refused
        reply["error"] = protocol.refusal_error(len(items), len(served), left)
    return protocol.encode(reply), len(served), refused


async def call_handler(handler: LlmHandler, batch: list[str], system: str | None) -> list[str]:
    try:
        answers = await handler(batch, system)
    except Exception as exc:  # a failing handler fails the items, never the kernel
        return [f"{protocol.ERROR_PREFIX} {type(exc).__name__}: {exc}"] * len(batch)
    out = [
        a if isinstance(a, str) else str(a) for a in (answers if isinstance(answers, list) else [])
    ]
    missing = len(batch) - len(out)
    if missing > 0:
        out += [f"{protocol.ERROR_PREFIX} no answer came back for this prompt"] * missing
    return out[: len(batch)]


class CallLog:
    """Groups a cell's ``llm`` requests into the calls that sent them. The child tags each
    request with ``api``, a call number shared by a call's requests (a large batch goes in
    several) and the call's size; a request without tags (a forged line) is a call of its own."""

    def __init__(self) -> None:
        self._calls: list[LlmCall] = []
        self._last: int | None = None  # the call number of the last request
        self._seen = 0  # prompts the last call's requests carried so far

    def add(self, msg: dict[str, Any]) -> None:
        items = msg.get("prompts")
        seen = len(items) if isinstance(items, list) else 0
        api: Literal["query", "batch"] = "query" if msg.get("api") == "query" else "batch"
        number, size = msg.get("call"), msg.get("size")
        declared = size if type(size) is int and size >= 0 else 0
        if type(number) is int and number == self._last and self._calls:
            self._seen += seen
            prev = self._calls[-1]
            self._calls[-1] = prev._replace(size=max(prev.size, declared, self._seen))
            return
        if not max(seen, declared):  # a (forged) request of no prompts is no call
            return
        self._last = number if type(number) is int else None
        self._seen = seen
        self._calls.append(LlmCall(api, max(seen, declared)))

    def calls(self) -> tuple[LlmCall, ...]:
        return tuple(self._calls)
