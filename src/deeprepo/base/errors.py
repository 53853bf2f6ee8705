"""The deeprepo error hierarchy.

Every error deeprepo raises on purpose derives from :class:`DeeprepoError`, and
its message says what the user can do next::

    DeeprepoError
    ├── UsageError              bad command-line input (exit code 2)
    │   ├── CodebaseError       the path cannot be analysed (missing, a file, empty)
    │   └── UnsafePathError     a link or odd file planted where deeprepo writes or reads
    ├── ConfigError             a model spec, price file or setting is wrong
    │   └── MissingKeyError     a provider needs an API key that is not set
    ├── ProviderError           a model call failed for good (after retries)
    │   └── ProviderUnreachable the server cannot be reached: refused, DNS, TLS (fails fast)
    ├── BudgetExceeded          a cost / sub-call / time budget is spent
    └── SandboxError            the kernel could not be started or talked to
        └── SandboxRefused      no sandbox strong enough for model-written code (exit code 2)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deeprepo.base.chat import Completion


class DeeprepoError(Exception):
    """Root of every error deeprepo raises on purpose."""

    exit_code: int = 1


class UsageError(DeeprepoError):
    """Bad input from the user: the message names the problem and the fix."""

    exit_code = 2


class CodebaseError(UsageError):
    """The path given cannot be analysed (missing, not a directory, empty, bad revision)."""


class UnsafePathError(UsageError):
    """A link, a FIFO or another file deeprepo did not make sits where it writes, a run
    folder's file is too large to read safely (``base.safefile``), or a folder or file it
    would trust could have been planted or changed by someone else (``base.private``):
    refused, never followed; the message names it and the fix."""


class ConfigError(DeeprepoError):
    """A model spec, price file or other setting is invalid."""

    exit_code = 2


class MissingKeyError(ConfigError):
    """A provider needs an API key that is not in the environment."""


class ProviderError(DeeprepoError):
    """A model call failed for good, after the retries the wrapper allows."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
        billed: Completion | None = None,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        # Seconds the server asked us to wait (``retry-after`` header), if it said.
        self.retry_after = retry_after
        # A reply that arrived (and was billed) but could not be used, e.g. empty
        # ``choices``: the metered wrapper records its usage so the ledger stays exact.
        self.billed = billed


class ProviderUnreachable(ProviderError):
    """Nothing answers at the model's URL: connection refused, a name that does not
    resolve, a TLS handshake that fails. Not transient like a 5xx: retried once, quickly."""

    def __init__(self, message: str, *, url: str | None = None):
        super().__init__(message, retryable=True)
        self.url = url


class BudgetExceeded(DeeprepoError):
    """A budget (cost, sub-calls, wall time) is spent; carries the spend so far."""

    def __init__(self, message: str, *, kind: str, spent_usd: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.spent_usd = spent_usd


class SandboxError(DeeprepoError):
    """The sandbox kernel could not be started or stopped answering."""


class SandboxRefused(SandboxError):
    """No isolation strong enough to run model-written code here; the message names the fix."""

    exit_code = 2
