"""The scripted root policies as a ChatModel.

Each policy is a list of turn programs (``policies/programs.py``). The turn
number is read from the conversation (how many assistant replies it already
holds), so a policy is stateless and replays identically. Token usage is an
estimate (4 characters per token) so efficiency metrics have something to
measure; the cost of a built-in model is exactly zero.
"""

from __future__ import annotations

from deeprepo.orchestrator import prompts
from deeprepo.policies import adversarial, programs
from deeprepo.providers.base import ChatRequest, Completion, Usage

POLICIES: dict[str, list[str]] = {
    "expert": programs.EXPERT,
    "lazy": programs.LAZY,
    "no-delegation": programs.NO_DELEGATION,
    "over-explorer": programs.OVER_EXPLORER,
    "syntax-errors": programs.SYNTAX_ERRORS,
    # Issue 9's adversarial suite (``policies/adversarial.py``).
    "ignore-workers": adversarial.IGNORE_WORKERS,
    "regex-only": adversarial.REGEX_ONLY,
    "regex-audit": adversarial.REGEX_AUDIT,
    "stock-filter": adversarial.STOCK_FILTER,
    "expert-unchecked": adversarial.EXPERT_UNCHECKED,
    "half": adversarial.HALF,
    "serial": adversarial.SERIAL,
    "own-prompts": adversarial.OWN_PROMPTS,
    "per-file": adversarial.PER_FILE,
}


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


class ScriptedPolicy:
    """A root model that replies with a fixed program per turn."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self._turns = POLICIES[policy]

    @property
    def name(self) -> str:
        return f"scripted/{self.policy}"

    async def complete(self, request: ChatRequest) -> Completion:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        last_user = request.last_user_text()
        if prompts.FINAL_TURN_NOTE in last_user:
            code = programs.FINAL_SUBMIT.get(self.policy, programs.SALVAGE_SUBMIT)
        else:
            code = self._turns[min(turn, len(self._turns) - 1)]
        text = f"Turn {turn + 1}.\n\n```python\n{code.strip()}\n```\n"
        prompt_chars = sum(len(m.content) for m in request.messages) + len(request.system or "")
        usage = Usage(input_tokens=(prompt_chars + 3) // 4, output_tokens=estimate_tokens(text))
        return Completion(text=text, usage=usage, model=self.name, finish_reason="stop")

    async def aclose(self) -> None:
        return None
