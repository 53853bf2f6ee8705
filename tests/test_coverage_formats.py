"""Issue 19 item 1's corpus: the same two files sent to a worker in honest formats (every one
must score the whole file) and in degraded ones (every one must score low), through the one
coverage function the Episode's audit figure and the reward share (``findings.coverage``).

"Low" is two things. The reward credits nothing (``coverage_credit`` at its default floor
0.95: a file cut by a twentieth is not an audit). And the in-order share says how much of the
file a worker could read as code: near 0 (at most 0.2) for the formats that destroy order
(shuffled, sorted, reversed, interleaved, every other line, a prompt per line, lines
shuffled in small blocks), and no more than the part shown in order for the ones that show
part of it (a sample, windows, a prefix, deduplicated lines).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from xml.sax.saxutils import escape

import pytest

from deeprepo.base.prompts import file_audit_prompt
from deeprepo.findings.coverage import CoverageIndex, coverage_credit, shown_in
from deeprepo.orchestrator.audit import audited_files

PY = '''"""Orders: read, create and cancel orders for the shop's API."""

from __future__ import annotations

import logging

from flask import Blueprint, jsonify, request

from shop.db import DatabaseError, get_connection
from shop.auth import current_user, require_login

logger = logging.getLogger(__name__)
bp = Blueprint("orders", __name__)


@bp.route("/orders/<int:order_id>")
@require_login
def get_order(order_id: int):
    conn = get_connection()
    cursor = conn.cursor()
    try:
        cursor.execute("SELECT * FROM orders WHERE id = %s", (order_id,))
        row = cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("query failed: %s", exc)
        return jsonify({"error": "unavailable"}), 503
    finally:
        cursor.close()
    if row is None:
        return jsonify({"error": "not found"}), 404
    if row["owner_id"] != current_user().id:
        return jsonify({"error": "forbidden"}), 403
    return jsonify(dict(row))


@bp.route("/orders", methods=["POST"])
@require_login
def create_order():
    payload = request.get_json(force=True)
    items = payload.get("items", [])
    if not items:
        return jsonify({"error": "no items"}), 400
    conn = get_connection()
    cursor = conn.cursor()
    try:
        cursor.execute(
            "INSERT INTO orders (owner_id, items) VALUES (%s, %s) RETURNING id",
            (current_user().id, json.dumps(items)),
        )
        order_id = cursor.fetchone()["id"]
        conn.commit()
    except DatabaseError as exc:
        logger.warning("query failed: %s", exc)
        conn.rollback()
        return jsonify({"error": "unavailable"}), 503
    finally:
        cursor.close()
    return jsonify({"id": order_id}), 201


@bp.route("/orders/<int:order_id>/cancel", methods=["POST"])
@require_login
def cancel_order(order_id: int):
    reason = request.args.get("reason", "customer request")
    conn = get_connection()
    cursor = conn.cursor()
    try:
        cursor.execute(
            f"UPDATE orders SET state = 'cancelled', note = '{reason}' WHERE id = {order_id}"
        )
        conn.commit()
    except DatabaseError as exc:
        logger.warning("query failed: %s", exc)
        conn.rollback()
        return jsonify({"error": "unavailable"}), 503
    finally:
        cursor.close()
    return jsonify({"id": order_id, "state": "cancelled"})
'''

JS = """'use strict';

const express = require('express');
const { exec } = require('child_process');
const router = express.Router();

// Thumbnails are made by ImageMagick on demand.
router.get('/thumb', (req, res) => {
\tconst name = req.query.name;
\tif (!name) {
\t\treturn res.status(400).send('name required');
\t}
\tconst size = parseInt(req.query.size || '128', 10);
\texec(`convert uploads/${name} -resize ${size}x${size} thumbs/${name}`, (err) => {
\t\tif (err) {
\t\t\treturn res.status(500).send('conversion failed');
\t\t}
\t\tres.sendFile(`thumbs/${name}`, { root: __dirname });
\t});
});

router.get('/health', (req, res) => {
\tres.json({ status: 'ok', uptime: process.uptime() });
});

module.exports = router;
"""

FILES = {"shop/orders.py": PY, "web/thumbs.js": JS}
INDEX = CoverageIndex(FILES)
LINES = PY.split("\n")


def numbered(fmt: str, text: str = PY) -> str:
    return "\n".join(fmt.format(n=n, line=line) for n, line in enumerate(text.split("\n"), 1))


def new_file_diff(path: str, text: str) -> str:
    lines = text.split("\n")
    body = "\n".join("+" + ln for ln in lines)
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


def changed_line_diff() -> str:
    """A unified diff that changed one line: the file as it is now, with the old line."""
    at = LINES.index('    items = payload.get("items", [])')
    old = '    items = payload["items"]'
    rows = [" " + ln for ln in LINES[:at]] + ["-" + old, "+" + LINES[at]]
    rows += [" " + ln for ln in LINES[at + 1 :]]
    return (
        f"--- a/shop/orders.py\n+++ b/shop/orders.py\n@@ -1,{len(LINES)} +1,{len(LINES)} @@\n"
        + ("\n".join(rows))
    )


ASK = "Audit this code for security vulnerabilities. Answer with JSON findings.\n\n"

HONEST: dict[str, Callable[[], list[str]]] = {
    "bare, after the instruction": lambda: [ASK + PY],
    "numbers on the left (N | )": lambda: [file_audit_prompt("shop/orders.py", PY)],
    "numbers on the right (# N)": lambda: [ASK + numbered("{line}  # {n}")],
    "numbers on the right (// N)": lambda: [ASK + numbered("{line}  // {n}")],
    "numbers as L12, [12] and 12.": lambda: [
        numbered("L{n} {line}"),
        numbered("[{n}] {line}"),
        numbered("{n}. {line}"),
    ],
    "numbers and a tab": lambda: [numbered("{n}\t{line}")],
    "new-file diff": lambda: [ASK + new_file_diff("shop/orders.py", PY)],
    "diff that changed a line": lambda: [ASK + changed_line_diff()],
    "markdown fence with a header": lambda: [ASK + "### shop/orders.py\n```python\n" + PY + "```"],
    "block quote": lambda: [ASK + "\n".join("> " + ln for ln in LINES)],
    "JSON object, file as one string": lambda: [
        ASK + json.dumps({"path": "shop/orders.py", "content": PY})
    ],
    "JSON list of lines": lambda: [ASK + json.dumps({"path": "shop/orders.py", "lines": LINES})],
    "JSON list of lines, one a line": lambda: [ASK + json.dumps(LINES, indent=2)],
    "Python repr of the text": lambda: [ASK + repr(PY)],
    "XML tag, code on the tag's line": lambda: [
        ASK + '<file path="shop/orders.py">' + PY + "</file>"
    ],
    "XML line elements, escaped": lambda: [
        ASK + "<file>\n" + numbered('<line n="{n}">{line}</line>', escape(PY)) + "\n</file>"
    ],
    "CRLF line ends": lambda: [(ASK + PY).replace("\n", "\r\n")],
    "tabs for spaces": lambda: [ASK + PY.replace("    ", "\t")],
    "three slices in three prompts": lambda: [
        file_audit_prompt("shop/orders.py", "\n".join(LINES[i : i + 30]), start_line=i + 1)
        for i in range(0, len(LINES), 30)
    ],
}


def _shuffled(lines: list[str], seed: int = 7) -> list[str]:
    out = list(lines)
    random.Random(seed).shuffle(out)
    return out


def _windows(lines: list[str], at: tuple[int, ...], k: int) -> str:
    keep = sorted({i for a in at for i in range(max(0, a - k), min(len(lines), a + k + 1))})
    return "\n".join(lines[i] for i in keep)


def _prefix_holding(lines: list[str], share: float) -> list[str]:
    """The shortest prefix holding ``share`` of the distinct non-blank lines (issue 19)."""
    distinct = {ln.strip() for ln in lines if ln.strip()}
    seen: set[str] = set()
    for i, ln in enumerate(lines):
        if ln.strip():
            seen.add(ln.strip())
        if len(seen) >= share * len(distinct):
            return lines[: i + 1]
    return lines


def _deduplicated(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for ln in lines:
        if ln.strip() not in seen:
            out.append(ln)
            seen.add(ln.strip())
    return out


def _interleaved() -> str:
    """Each file's code lines, one from each in turn (the shorter one's again from its top)."""
    a = [ln for ln in LINES if len(ln.strip()) >= 8]
    b = [ln for ln in JS.split("\n") if len(ln.strip()) >= 8]
    return "\n".join(x for i, line in enumerate(a) for x in (line, b[i % len(b)]))


def _sampled(lines: list[str], share: float) -> list[str]:
    rng = random.Random(3)
    return [ln for ln in lines if rng.random() < share]


def _block_shuffled(lines: list[str], block: int = 5) -> list[str]:
    out: list[str] = []
    for i in range(0, len(lines), block):
        out.extend(_shuffled(lines[i : i + block], seed=i))
    return out


CODE = [ln for ln in LINES if len(ln.strip()) >= 8]  # the non-trivial lines, in order
# (name, prompts, the most the in-order share may be)
DEGRADED: dict[str, tuple[Callable[[], list[str]], float]] = {
    "shuffled lines": (lambda: [ASK + "\n".join(_shuffled(LINES))], 0.2),
    "shuffled, numbered": (
        lambda: [ASK + "\n".join(f"{i}: {ln}" for i, ln in enumerate(_shuffled(LINES), 1))],
        0.2,
    ),
    "sorted lines": (lambda: [ASK + "\n".join(sorted(LINES))], 0.2),
    "reversed lines": (lambda: [ASK + "\n".join(reversed(LINES))], 0.2),
    "every other code line": (lambda: [ASK + "\n".join(CODE[::2])], 0.2),
    "interleaved with another file": (lambda: [ASK + _interleaved()], 0.2),
    "one prompt per line": (lambda: [ASK + ln for ln in LINES], 0.2),
    "shuffled in blocks of five": (lambda: [ASK + "\n".join(_block_shuffled(LINES))], 0.5),
    "a random half of the lines": (
        lambda: [ASK + "\n".join(_sampled(LINES, 0.5))],
        0.5,
    ),
    "windows of +-3 around three lines": (lambda: [ASK + _windows(LINES, (20, 45, 70), 3)], 0.4),
    "prefix holding 90% of the distinct lines": (
        lambda: [ASK + "\n".join(_prefix_holding(LINES, 0.9))],
        0.9,
    ),
    "deduplicated lines": (lambda: [ASK + "\n".join(_deduplicated(LINES))], 0.9),
    "the path only": (lambda: ["Audit shop/orders.py for SQL injection."], 0.0),
}


def share(prompts: list[str], path: str = "shop/orders.py") -> float:
    return INDEX.shares(shown_in(prompts)).get(path, 0.0)


def test_the_corpus_is_large_enough() -> None:
    assert len(HONEST) >= 10 and len(DEGRADED) >= 10


@pytest.mark.parametrize("fmt", list(HONEST))
def test_an_honest_format_covers_the_whole_file(fmt: str) -> None:
    """Every honest format shows the whole file in order: share 1.0 (the changed-line diff
    shows the old line beside the new one: one line's pair lost, at most), and the Episode's
    audit figure calls the file audited."""
    prompts = HONEST[fmt]()
    assert share(prompts) >= 0.98, fmt
    assert coverage_credit(share(prompts)) >= 0.8, fmt
    assert audited_files(FILES, prompts, ["shop/orders.py"]) == ["shop/orders.py"]


def test_a_js_file_with_tabs_is_covered_in_every_numbered_format() -> None:
    for fmt in ("{line}  // {n}", "{n} | {line}", '<line n="{n}">{line}</line>'):
        prompt = numbered(fmt, escape(JS) if "<line" in fmt else JS)
        assert share([prompt], "web/thumbs.js") == 1.0, fmt


@pytest.mark.parametrize("fmt", list(DEGRADED))
def test_a_degraded_format_scores_low(fmt: str) -> None:
    """Degraded formats earn no coverage credit, and their in-order share stays under the
    part of the file they show in order (module docstring)."""
    make, most = DEGRADED[fmt]
    prompts = make()
    got = share(prompts)
    assert got <= most, (fmt, got)
    assert coverage_credit(got) == 0.0, (fmt, got)
    assert audited_files(FILES, prompts, ["shop/orders.py"]) == [] or most >= 0.9


def test_interleaving_hides_both_files() -> None:
    shares = INDEX.shares(shown_in([_interleaved()]))
    assert max(shares.values(), default=0.0) <= 0.2, shares


def test_the_credit_is_continuous_between_the_floor_and_the_whole_file() -> None:
    assert [coverage_credit(s) for s in (0.0, 0.5, 0.9, 0.95, 0.975, 1.0)] == pytest.approx(
        [0.0, 0.0, 0.0, 0.0, 0.5, 1.0]
    )
    assert coverage_credit(0.75, floor=0.5) == pytest.approx(0.5)
    assert coverage_credit(0.99, floor=1.0) == 0.0
