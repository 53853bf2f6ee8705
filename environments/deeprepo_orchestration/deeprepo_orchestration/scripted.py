"""A scripted root behind an OpenAI-compatible server, for offline runs of the env.

``vf-eval`` needs a model endpoint. deeprepo's loopback server
(``python -m deeprepo.testing.loopback --script FILE``) can play one of deeprepo's
scripted root policies if the script answers each turn with the policy's reply for
that turn. The replies are the policy's own (``deeprepo.builtin``), turn by turn;
turn ``k + 1`` is chosen by a rule matching reply ``k`` in the conversation, so the
script needs no state and concurrent rollouts do not disturb one another::

    python -m deeprepo_orchestration.scripted --policy expert script.json
    python -m deeprepo.testing.loopback --port 0 --ttl 600 --script script.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import deeprepo.rl  # noqa: F401  (registers the research policies)
from deeprepo import POLICIES, ChatRequest, Message, make_policy

__all__ = ["loopback_script", "scripted_replies"]


def scripted_replies(policy: str, turns: int | None = None) -> list[str]:
    """The replies ``scripted/<policy>`` gives on turns 1..``turns`` (default: its
    programs plus one), asked exactly as the Episode asks it."""
    model = make_policy(policy)
    count = turns if turns is not None else len(POLICIES[policy]) + 1
    replies: list[str] = []
    messages: list[Message] = [Message("user", "repository overview")]
    for _ in range(count):
        completion = asyncio.run(model.complete(ChatRequest(tuple(messages))))
        replies.append(completion.text)
        messages += [Message("assistant", completion.text), Message("user", "output")]
    return replies


def loopback_script(policy: str = "expert", turns: int | None = None) -> dict[str, Any]:
    """A loopback ``--script`` document that plays ``scripted/<policy>`` as the root.

    The first turn gets the default reply; every later turn is picked by the rule
    matching the previous reply, newest rules first so the latest turn wins.
    """
    replies = scripted_replies(policy, turns)
    rules = [
        {"contains": replies[k - 1].strip(), "route": "openai", "reply": {"text": replies[k]}}
        for k in range(len(replies) - 1, 0, -1)
    ]
    return {"rules": rules, "default": {"text": replies[0]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deeprepo_orchestration.scripted", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("out", type=Path, help="where to write the loopback script (JSON)")
    parser.add_argument(
        "--policy", default="expert", choices=sorted(POLICIES), help="scripted root policy"
    )
    args = parser.parse_args(argv)
    args.out.write_text(json.dumps(loopback_script(args.policy), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
