"""The scripted root policies as a ChatModel, and the table that names them.

Each policy is a list of turn programs. The core registers the offline engine's root,
``expert`` (``builtin/programs.py``); the research stack registers its reference and
gaming policies (``deeprepo.rl.policies``) with :func:`register_policy`. The turn number
is read from the conversation (how many assistant replies it already holds), so a policy
is stateless and replays identically. Token usage is an estimate (4 characters per
token) so efficiency metrics have something to measure; the cost of a built-in model is
exactly zero.
"""

from __future__ import annotations

from deeprepo.base import prompts
from deeprepo.base.chat import ChatRequest, Completion, Usage
from deeprepo.base.errors import ConfigError
from deeprepo.builtin import programs

__all__ = ["POLICIES", "ScriptedPolicy", "estimate_tokens", "make_policy", "register_policy"]

#: Policy name → its turn programs (the last one repeats).
POLICIES: dict[str, list[str]] = {"expert": programs.EXPERT}
#: Policy name → the program it runs on the extra turn at ``max_turns``; a policy not
#: listed submits :data:`programs.SALVAGE_SUBMIT`.
FINAL: dict[str, str] = {"expert": programs.EXPERT_FINAL}


def _turn_programs(name: str, turns: list[str]) -> list[str]:
    if not turns:
        raise ValueError(f"scripted policy {name!r} has no turn programs")
    return turns


def register_policy(name: str, turns: list[str], final: str | None = None) -> None:
    """Make ``scripted/<name>`` a root model; registering a name again replaces it."""
    POLICIES[name] = _turn_programs(name, turns)
    if final is None:
        FINAL.pop(name, None)
    else:
        FINAL[name] = final


def make_policy(name: str) -> ScriptedPolicy:
    """``make_policy("expert")`` → the scripted expert root."""
    if name not in POLICIES:
        valid = ", ".join(f"scripted/{n}" for n in sorted(POLICIES))
        raise ConfigError(
            f"unknown scripted policy {name!r}; choose one of: {valid} (the research "
            "policies are registered by the deeprepo.rl package)"
        )
    return ScriptedPolicy(name)


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


class ScriptedPolicy:
    """A root model that replies with a fixed program per turn."""

    def __init__(self, policy: str, turns: list[str] | None = None) -> None:
        """The registered policy ``policy``, or, given ``turns``, an unregistered one of
        that name (a policy built per task, which the shared table must not collect)."""
        self.policy = policy
        if turns is not None:
            self._turns, self._final = _turn_programs(policy, turns), programs.SALVAGE_SUBMIT
        else:
            self._turns = POLICIES[policy]
            self._final = FINAL.get(policy, programs.SALVAGE_SUBMIT)

    @property
    def name(self) -> str:
        return f"scripted/{self.policy}"

    async def complete(self, request: ChatRequest) -> Completion:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        last_user = request.last_user_text()
        if prompts.FINAL_TURN_NOTE in last_user:
            code = self._final
        else:
            code = self._turns[min(turn, len(self._turns) - 1)]
        text = f"Turn {turn + 1}.\n\n```python\n{code.strip()}\n```\n"
        prompt_chars = sum(len(m.content) for m in request.messages) + len(request.system or "")
        usage = Usage(input_tokens=(prompt_chars + 3) // 4, output_tokens=estimate_tokens(text))
        return Completion(text=text, usage=usage, model=self.name, finish_reason="stop")

    async def aclose(self) -> None:
        return None
