"""The codebase loader: a local directory or git revision → :class:`Codebase`."""

from deeprepo.codebase.loader import codebase_from_files, load_codebase
from deeprepo.codebase.model import Codebase, CodebaseMetadata, SkippedFile

__all__ = ["Codebase", "CodebaseMetadata", "SkippedFile", "codebase_from_files", "load_codebase"]
