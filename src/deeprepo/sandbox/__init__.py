"""The sandbox kernel: root code runs in a child process, never in deeprepo.

``Kernel.start(payload, handler, config)`` (``deeprepo.sandbox.kernel``) starts a child
interpreter holding the codebase; ``kernel.exec(code)`` runs one cell and returns an
``ExecResult``. ``KernelPool`` (``deeprepo.sandbox.pool``) keeps children pre-started so
a start only sends the payload; ``SandboxConfig`` (``deeprepo.sandbox.config``) sets the
limits and the isolation mode. The library face ``deeprepo`` exports all three.

This file imports nothing: the child process imports this package on its way to its own
modules (``child.py``), and must not pull the parent's side (asyncio, the pool) in. See
``docs/security.md`` for what the kernel can and cannot reach.
"""
