"""Built-in scripted root policies: real Python emitted into the REPL, no network.

They are the offline default root (``scripted/expert``) and the reference
behaviours the reward is calibrated against.
"""

from __future__ import annotations

from deeprepo.errors import ConfigError
from deeprepo.policies.scripted import POLICIES, ScriptedPolicy

__all__ = ["POLICIES", "ScriptedPolicy", "make_policy"]


def make_policy(name: str) -> ScriptedPolicy:
    """``make_policy("expert")`` → the scripted expert root."""
    if name not in POLICIES:
        valid = ", ".join(f"scripted/{n}" for n in sorted(POLICIES))
        raise ConfigError(f"unknown scripted policy {name!r}; choose one of: {valid}")
    return ScriptedPolicy(name)
