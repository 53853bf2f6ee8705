"""The codebase loader: a local directory or git revision → :class:`Codebase`."""

from deeprepo.codebase.loader import load_codebase
from deeprepo.codebase.model import Codebase, CodebaseMetadata, SkippedFile

__all__ = ["Codebase", "CodebaseMetadata", "SkippedFile", "load_codebase"]
