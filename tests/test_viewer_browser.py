"""trajectory.html in a real browser (headless Chromium): what is on screen, what the DOM
holds once parsed and laid out, and that hostile text from a model or a repository neither
runs nor adds elements. One browser start per check.

Skipped when no Chromium is installed (``apt-get install chromium``), except under CI
(``DEEPREPO_REQUIRE_CHROMIUM=1``), where a missing browser fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from viewerhelp import injected, parse

from deeprepo.base.textsafe import escape_name
from deeprepo.report.viewer import write_viewer
from deeprepo.testing.runfolder import RunSpec, write_run_folder

pytestmark = pytest.mark.e2e

TITLE_PAYLOAD = (
    "</title></script><script>document.title='PWNED'</script>"
    "<img src=x onerror=\"document.title='PWNED';document.body.innerHTML='PWNED'\">"
    "<svg><script>document.title='PWNED'</script></svg>"
    "<a href=\"javascript:document.title='PWNED'\" id=evil>click</a>"
    "<iframe srcdoc=\"<script>parent.document.title='PWNED'</script>\"></iframe>"
    "<details open ontoggle=\"document.title='PWNED'\">x</details>"
    "\u2028\u2029'\"`"
)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = _chromium()
    if found is None:
        if os.environ.get("DEEPREPO_REQUIRE_CHROMIUM") == "1":
            pytest.fail(
                "DEEPREPO_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)"
            )
        pytest.skip("no headless Chromium on PATH (apt-get install chromium chromium-driver)")
    return found


def _browser(chromium: str, page: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-extensions", f"--user-data-dir={profile}",
             "--window-size=1200,1600", *mode, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip


def test_the_page_on_screen_is_not_blank(chromium: str, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    write_run_folder(tmp_path / "run", RunSpec(turns=3, subs_per_turn=4))
    page = write_viewer(tmp_path / "run").path
    shot = tmp_path / "shot.png"
    proc = _browser(chromium, page, f"--screenshot={shot}")
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    with Image.open(shot) as img:
        assert img.size == (1200, 1600)
        pixels = np.asarray(img.convert("RGB"), dtype=np.int32).reshape(-1, 3)
    inked = float((pixels.sum(axis=1) < 600).mean())  # darker than light grey
    colours = len(np.unique(pixels, axis=0))
    # Text, tables, the badge and the chart's lines: ink and many colours, not a white page.
    assert inked > 0.01, inked
    assert colours > 50, colours
    # The chart's coloured lines are on screen: pixels of the root line's blue (#2563eb).
    r, g, b = pixels[:, 0], pixels[:, 1], pixels[:, 2]
    assert int(((abs(r - 0x25) < 40) & (abs(g - 0x63) < 40) & (b > 0xC0)).sum()) > 20


def test_the_rendered_dom_holds_every_turn_and_sub_call(chromium: str, tmp_path: Path) -> None:
    figures = write_run_folder(tmp_path / "run", RunSpec(turns=4, subs_per_turn=6))
    page = write_viewer(tmp_path / "run").path
    proc = _browser(chromium, page, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = parse(proc.stdout)
    assert dom.title == "deeprepo run: repo"
    assert dom.count("details", "turn") == 4
    assert dom.count("details", "call") == figures["sub_calls"] == 24
    assert {f"call-{i}" for i in range(1, figures["calls"] + 1)} <= dom.ids()
    assert "SUBPROMPT-4-5" in dom.all_text and "SUBREPLY-4-5" in dom.all_text
    assert dom.count("polyline") == 3
    assert injected(dom) == []


def test_hostile_text_neither_runs_nor_adds_elements(chromium: str, tmp_path: Path) -> None:
    write_run_folder(tmp_path / "run", RunSpec(payload=TITLE_PAYLOAD))
    page = write_viewer(tmp_path / "run").path
    proc = _browser(chromium, page, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = parse(proc.stdout)
    # No script ran: every payload would have set the title (or wiped the body).
    assert dom.title == "deeprepo run: repo" + escape_name(TITLE_PAYLOAD)
    assert "\\u2028" in dom.title  # shown, not acted on
    assert dom.count("details", "turn") == 3 and dom.count("details", "call") == 12
    # No element or attribute the viewer does not write: the payload stayed text.
    assert injected(dom) == []
    assert dom.count("script") == dom.count("img") == dom.count("iframe") == dom.count("a") == 0
    assert "<img src=x onerror=" in dom.all_text


def test_the_harness_sees_a_script_that_runs(chromium: str, tmp_path: Path) -> None:
    """The check above is meaningful: the same browser and flags report a script that runs."""
    page = tmp_path / "control.html"
    page.write_text(
        "<!DOCTYPE html><title>before</title><body><script>document.title='RAN';"
        "document.body.appendChild(document.createElement('img'))</script></body>"
    )
    proc = _browser(chromium, page, "--dump-dom")
    dom = parse(proc.stdout)
    assert dom.title == "RAN" and dom.count("img") == 1
