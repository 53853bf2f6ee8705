"""The trajectory viewer: one self-contained ``trajectory.html`` per run folder.

``runview`` reads the folder, ``sections`` and ``turns`` render its parts, ``costchart``
draws cost over time as inline SVG, ``page`` assembles and writes the page.
"""

from deeprepo.report.viewer.markup import Limits
from deeprepo.report.viewer.page import (
    VIEWER_FILE,
    ViewerPage,
    render_viewer,
    viewer_on_failure,
    write_viewer,
    write_viewer_quietly,
)

__all__ = [
    "VIEWER_FILE",
    "Limits",
    "ViewerPage",
    "render_viewer",
    "viewer_on_failure",
    "write_viewer",
    "write_viewer_quietly",
]
