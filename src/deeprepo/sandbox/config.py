"""Settings of the sandbox kernel (limits, isolation mode, output size)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from deeprepo.sandbox.cgroup import CgroupLimits

SandboxMode = Literal["process", "bwrap", "auto"]


@dataclass(frozen=True)
class SandboxConfig:
    """How a kernel is isolated and bounded.

    ``mode``: ``"bwrap"`` runs the child in a bubblewrap sandbox (no network, a pid
    namespace, only system paths read-only plus a private ``/tmp``, never as host root);
    ``"process"`` runs a plain child process with resource limits, a scrubbed
    environment, seccomp and Landlock where available; ``"auto"`` takes bwrap and, where
    bwrap cannot run, refuses (``SandboxRefused``) rather than fall back to process.

    ``cell_timeout_s`` counts the time the child's code runs, not the time the parent
    spends answering its ``llm_query``/``llm_batch`` calls (the episode's own timeout
    and budgets bound those).
    """

    mode: SandboxMode = "auto"
    cell_timeout_s: float = 120.0
    output_limit: int = 8192  # chars shown to the root, head and tail kept
    memory_limit_mb: int = 2048  # RLIMIT_AS per process; with a cgroup, also the whole tree's
    cpu_seconds: int = 600  # RLIMIT_CPU, for the kernel's whole life
    cpus: float = 1.0  # with a cgroup: CPU time per second for the whole tree (0: no limit)
    max_open_files: int = 256  # RLIMIT_NOFILE
    max_processes: int = 64  # with a cgroup: pids.max of the tree; also RLIMIT_NPROC (per uid)
    max_file_size_mb: int = 64  # RLIMIT_FSIZE
    max_prompt_chars: int = 1_000_000  # one sub-LLM prompt; longer ones become error strings
    tmp_size_mb: int = 256  # size of the private /tmp in bwrap mode (a tmpfs)
    start_timeout_s: float = 30.0  # how long a kernel may take to come up

    def __post_init__(self) -> None:
        if self.mode not in ("process", "bwrap", "auto"):
            raise ValueError(f"sandbox mode must be auto, bwrap or process, not {self.mode!r}")
        if self.cell_timeout_s <= 0 or self.start_timeout_s <= 0:
            raise ValueError("sandbox timeouts must be positive")
        if not 0 < self.max_prompt_chars <= 4_000_000:
            # One prompt travels in one message, and the parent drops messages over 64 MB.
            raise ValueError("sandbox max_prompt_chars must be between 1 and 4,000,000")
        if self.cpus < 0:
            raise ValueError("sandbox cpus must be 0 (no limit) or positive")
        for name in ("output_limit", "memory_limit_mb", "cpu_seconds", "max_open_files"):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox {name} must be positive")

    def cgroup_limits(self) -> CgroupLimits:
        """The limits of the kernel's cgroup, where one can be made (see ``cgroup.py``)."""
        return CgroupLimits(self.memory_limit_mb, self.max_processes, self.cpus)

    def limits(self) -> dict[str, int]:
        """The resource limits the child applies to itself before running any cell."""
        return {
            "memory_mb": self.memory_limit_mb,
            "cpu_seconds": self.cpu_seconds,
            "open_files": self.max_open_files,
            "processes": self.max_processes,
            "file_size_mb": self.max_file_size_mb,
        }

    def child_options(self, *, tree_limited: bool = False) -> dict[str, Any]:
        """What the child needs to know, sent with the codebase in the init message.

        ``tree_limited``: the kernel has a cgroup whose ``pids.max`` bounds its tree, so no
        ``RLIMIT_NPROC``, which counts every process of the uid: kernels running as nobody
        would share one budget, and one kernel's fork bomb would starve the others.
        """
        limits = self.limits()
        if tree_limited:
            limits.pop("processes")
        return {
            "limits": limits,
            "output_limit": self.output_limit,
            "max_prompt_chars": self.max_prompt_chars,
        }
