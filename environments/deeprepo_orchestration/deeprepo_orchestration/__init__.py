"""deeprepo's orchestration environment for verifiers (v1 API: Taskset + Env).

The trainee model is the *root* of deeprepo's Recursive Language Model loop: it writes
Python in a sandboxed REPL that holds a generated repository as data, delegates reading
to sub-LLM workers (``llm_batch``), records findings and submits a report. The reward
is deeprepo's (finding quality, coverage, delegation, efficiency, minus penalties).

verifiers finds the package by module name (taskset id ``deeprepo-orchestration``) and
reads its classes from ``__all__``: one Taskset, one Env, and the harness the seat uses
by default.
"""

from deeprepo_orchestration.env import OrchestrationEnv, OrchestrationEnvConfig
from deeprepo_orchestration.harness import DirectChatHarness, DirectChatHarnessConfig
from deeprepo_orchestration.root import InteractionRoot
from deeprepo_orchestration.taskset import (
    OrchestrationData,
    OrchestrationTask,
    OrchestrationTaskset,
    OrchestrationTasksetConfig,
)

__all__ = [
    "DirectChatHarness",
    "DirectChatHarnessConfig",
    "InteractionRoot",
    "OrchestrationData",
    "OrchestrationEnv",
    "OrchestrationEnvConfig",
    "OrchestrationTask",
    "OrchestrationTaskset",
    "OrchestrationTasksetConfig",
]
