"""An in-process chat harness: one non-streaming model call per segment, no program launched.

verifiers' built-in ``null`` harness runs a small chat program through ``uv`` for every
segment, and that program always streams (``stream=True``). This harness does the same
job in the env's own process, as verifiers' ``Harness.launch`` contract allows ("a
harness may run its loop in-process ... as long as every model call goes through
``endpoint`` + ``secret``"): it posts the conversation to the rollout's interception
endpoint and returns. The interception records the turn on the trace, applies the
seat's limits and ``@stop`` hooks, and forwards the call to the run's client.

Why it is the default here: deeprepo's root has no tools (it writes Python that
deeprepo's own sandbox runs), so a per-turn subprocess buys nothing; it needs no
``uv`` nor package index; and a non-streaming upstream call works with every
OpenAI-compatible server, deeprepo's loopback server included. ``null`` still works
(``--env.root.harness.id null``) against servers that stream.
"""

from __future__ import annotations

from typing import Any

import httpx
import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.dialects.chat import message_to_wire

__all__ = ["DirectChatHarness", "DirectChatHarnessConfig"]


class DirectChatHarnessConfig(vf.HarnessConfig):
    """Knobs of the in-process chat harness (``--env.root.harness.*``)."""

    request_timeout: float = Field(900.0, gt=0)
    """Seconds one model call may take through the interception server."""


class DirectChatHarness(vf.Harness[DirectChatHarnessConfig]):
    """Posts each segment's conversation to the interception endpoint, in process."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # the default resume() relaunches on the accreted conversation
    EXECUTES_CODE = False  # the model's code runs in deeprepo's sandbox kernel, not here
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        tool_interception_url: str | None = None,
    ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages.extend(message_to_wire(m) for m in prompt)
        body = {"model": ctx.model, "messages": messages}
        try:
            async with httpx.AsyncClient(timeout=self.config.request_timeout) as client:
                response = await client.post(
                    endpoint.rstrip("/") + "/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {secret}"},
                )
        except httpx.HTTPError as exc:
            # The harness contract reports failures as a program result; the base class
            # turns a non-zero exit into HarnessError unless a limit/@stop ended the run.
            return vf.ProgramResult(exit_code=1, stdout="", stderr=f"{type(exc).__name__}: {exc}")
        if response.status_code != 200:
            return vf.ProgramResult(
                exit_code=1,
                stdout="",
                stderr=f"model call failed with HTTP {response.status_code}: {response.text[:2000]}",
            )
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")
