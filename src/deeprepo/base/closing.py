"""One way for a resource to be closed: ``close()``, or a ``with`` block that calls it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["Closing"]


class Closing(ABC):
    """A resource its owner must close: call :meth:`close`, or use it in a ``with`` block,
    which calls :meth:`open` on entry and :meth:`close` on exit however the block ends.

    A class that acquires something only when entered (a temporary directory, a live
    display) does it in :meth:`open`; one that holds it from construction needs only
    :meth:`close`. ``close`` must be safe to call twice.
    """

    def open(self) -> None:  # noqa: B027 (a hook: most resources are open from the start)
        """Acquire what :meth:`close` gives back; ``with`` calls it. Nothing by default."""

    @abstractmethod
    def close(self) -> None:
        """Give back what the resource holds."""

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
