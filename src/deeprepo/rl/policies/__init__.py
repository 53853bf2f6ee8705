"""The research stack's scripted root policies: the reference behaviours the reward is
calibrated against (``reference.py``) and the gaming suite it must keep low
(``adversarial.py``). :func:`register` adds them to the core's policy table
(``deeprepo.builtin.scripted``), beside the offline engine's ``expert``."""

from __future__ import annotations

from deeprepo.builtin.scripted import register_policy
from deeprepo.rl.policies import (
    adversarial,
    compact,
    reference,
    routes_coverage,
    routes_hard,
    routes_oracle,
)

__all__ = ["RESEARCH_POLICIES", "register"]

#: Every policy this package adds, in the order ``deeprepo models`` lists them.
RESEARCH_POLICIES: dict[str, list[str]] = {
    "lazy": reference.LAZY,
    "no-delegation": reference.NO_DELEGATION,
    "over-explorer": reference.OVER_EXPLORER,
    "syntax-errors": reference.SYNTAX_ERRORS,
    # Issue 9's adversarial suite.
    "ignore-workers": adversarial.IGNORE_WORKERS,
    "regex-only": adversarial.REGEX_ONLY,
    "regex-audit": adversarial.REGEX_AUDIT,
    "stock-filter": adversarial.STOCK_FILTER,
    "expert-unchecked": adversarial.EXPERT_UNCHECKED,
    "half": adversarial.HALF,
    "serial": adversarial.SERIAL,
    "own-prompts": adversarial.OWN_PROMPTS,
    "per-file": adversarial.PER_FILE,
    # Issue 19 item 4: the hard tier's policies (upper-bound is built per task:
    # routes_hard.upper_bound_policy).
    "random-subset": routes_hard.RANDOM_SUBSET,
    "pack-all": routes_hard.PACK_ALL,
    "routes-first": routes_hard.ROUTES_FIRST,
    # Issue 19 item 5: gaming routes of the hard stream.
    "spray": routes_hard.SPRAY,
    "duplicates": routes_hard.DUPLICATES,
    "whole-file": routes_hard.WHOLE_FILE,
    "repeat-pad": routes_hard.REPEAT_PAD,
    "verbatim": routes_hard.VERBATIM,
    # Issue 19 item 2: non-audit requests, a template matcher, two giant prompts.
    **routes_oracle.ROUTES,
    # Issue 19's coverage routes and honest formats.
    **routes_coverage.POLICIES,
    # The expert's method in turns short enough for a small model to learn (issue 21).
    "compact": compact.COMPACT,
    # One reply of ~250 tokens: what the CPU learning run warm-starts on (issue 21).
    "brief": compact.BRIEF,
}


def register() -> None:
    """Make every research policy a ``scripted/<name>`` root model."""
    for name, turns in RESEARCH_POLICIES.items():
        register_policy(
            name, turns, {**reference.FINAL, "compact": compact.COMPACT_FINAL}.get(name)
        )
