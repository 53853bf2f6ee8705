"""The sandbox kernel: root code runs in a child process, never in deeprepo.

``Kernel.start(payload, handler, config)`` starts a child interpreter holding the
codebase; ``kernel.exec(code)`` runs one cell and returns an :class:`ExecResult`.
``KernelPool`` keeps children pre-started so a start only sends the payload.
See ``docs/security.md`` for what the kernel can and cannot reach.
"""

from deeprepo.sandbox.config import SandboxConfig, SandboxMode
from deeprepo.sandbox.isolation import Isolation, bwrap_problem, resolve_mode
from deeprepo.sandbox.kernel import ExecResult, Kernel, LlmHandler
from deeprepo.sandbox.pool import KernelPool

__all__ = [
    "ExecResult",
    "Isolation",
    "Kernel",
    "KernelPool",
    "LlmHandler",
    "SandboxConfig",
    "SandboxMode",
    "bwrap_problem",
    "resolve_mode",
]
