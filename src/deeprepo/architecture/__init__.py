"""A repository's architecture from its imports (Python, JavaScript, TypeScript): components,
the dependency edges between them with counts, cycles, the most depended-on modules, entry
points no test reaches and external dependencies. Nothing of the repository is executed.

``architecture_of(codebase)`` computes it once per codebase; ``architecture_markdown`` and
``architecture_summary`` render it for report.md and for the root model's first message.
"""

from deeprepo.architecture.analysis import analyze_architecture, architecture_of
from deeprepo.architecture.graph import (
    Architecture,
    Component,
    Edge,
    EntryPoint,
    ExternalDependency,
)
from deeprepo.architecture.render import architecture_markdown, architecture_summary, mermaid

__all__ = [
    "Architecture",
    "Component",
    "Edge",
    "EntryPoint",
    "ExternalDependency",
    "analyze_architecture",
    "architecture_markdown",
    "architecture_of",
    "architecture_summary",
    "mermaid",
]
