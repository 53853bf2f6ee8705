"""Cost over time for the viewer: cumulative USD against seconds from the run's start, per
role, as an inline SVG line chart computed here (no JavaScript, no library, no network).

A call's cost counts when the call ends (``t + latency_s`` in ``calls.jsonl``). A run folder
without calls.jsonl falls back to the ledger recorded after each turn, at the turn's end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

from deeprepo.report.viewer.runview import CallRecord, RunView, num, opt_num

__all__ = ["CostSeries", "cost_series", "cost_svg"]

#: Points drawn per line at most; cumulative cost is monotone, so thinning keeps its shape.
MAX_POINTS = 1500
ROLES = ("total", "root", "sub")
COLOURS = {"total": "#1f2937", "root": "#2563eb", "sub": "#d97706"}


@dataclass
class CostSeries:
    """Cumulative cost per role: ``(seconds, usd)`` points, starting at ``(0, 0)``."""

    points: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    unknown_calls: int = 0  # calls whose price is unknown: not in the lines
    source: str = ""  # where the figures come from, for the caption

    @property
    def final(self) -> dict[str, float]:
        return {role: pts[-1][1] for role, pts in self.points.items() if pts}


def cost_series(view: RunView) -> CostSeries:
    """The lines to draw, from calls.jsonl when the run has one, else from the turns' ledgers."""
    if view.calls is not None:
        series = CostSeries(
            points={role: [(0.0, 0.0)] for role in ROLES}, source="calls.jsonl, at each call's end"
        )
        sums = dict.fromkeys(ROLES, 0.0)
        for end_s, call in _on_one_clock(view.calls):
            if call.cost_usd is None:
                series.unknown_calls += 1
                continue
            role = call.role if call.role in ("root", "sub") else "sub"
            for key in ("total", role):
                sums[key] += call.cost_usd
                series.points[key].append((end_s, sums[key]))
        return series
    series = CostSeries(
        points={role: [(0.0, 0.0)] for role in ROLES},
        source="the ledger after each turn, at the turn's end (this run has no calls.jsonl)",
    )
    clock = 0.0
    for turn in view.turns:
        clock += max(0.0, num(turn.get("seconds")))
        ledger = turn.get("ledger")
        if not isinstance(ledger, list):
            continue
        sums = dict.fromkeys(ROLES, 0.0)
        unknown = 0
        for row in ledger:
            if not isinstance(row, dict):
                continue
            cost = opt_num(row.get("cost_usd"))
            if cost is None:
                unknown += 1
                continue
            role = "root" if row.get("role") == "root" else "sub"
            sums[role] += cost
            sums["total"] += cost
        series.unknown_calls = unknown  # ledger rows, not calls: the last turn's count
        for role in ROLES:
            series.points[role].append((clock, sums[role]))
    return series


def _on_one_clock(calls: list[CallRecord]) -> list[tuple[float, CallRecord]]:
    """Each call with its end time on one clock, in time order. ``t`` restarts at 0 in a
    resumed session, which first replays its turns from turn 1: a turn number lower than the
    one before (in completion order) starts a session, drawn after the previous one."""
    timed: list[tuple[float, CallRecord]] = []
    offset = session_end = 0.0
    last_turn = 0
    for call in sorted(calls, key=lambda c: c.seq):
        if call.turn < last_turn:
            offset = session_end
        last_turn = call.turn
        end = offset + call.end_s
        session_end = max(session_end, end)
        timed.append((end, call))
    return sorted(timed, key=lambda pair: pair[0])


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    step = math.ceil(len(points) / MAX_POINTS)
    return points[::step] + ([points[-1]] if (len(points) - 1) % step else [])


def nice_step(span: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``ticks`` ticks."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if raw <= mult * power:
            return float(mult * power)
    return float(10 * power)


def money(v: float) -> str:
    if v == 0:
        return "$0"
    return f"${v:.4f}" if v < 0.01 else f"${v:.2f}" if v >= 1 else f"${v:.3f}"


def _secs(v: float) -> str:
    return f"{v:g}s" if v < 120 else f"{v / 60:g}m"


def cost_svg(series: CostSeries, width: int = 760, height: int = 280) -> str:
    """The chart as an ``<svg>`` element (every label built from numbers, nothing from a model)."""
    left, right, top, bottom = 64, 16, 16, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    all_points = [p for pts in series.points.values() for p in pts]
    max_x = max((x for x, _ in all_points), default=0.0)
    max_y = max((y for _, y in all_points), default=0.0)
    x_step, y_step = nice_step(max_x), nice_step(max_y)
    x_top = max(x_step, math.ceil(max_x / x_step) * x_step)
    y_top = max(y_step, math.ceil(max_y / y_step) * y_step)

    def sx(x: float) -> float:
        return left + plot_w * x / x_top

    def sy(y: float) -> float:
        return top + plot_h * (1 - y / y_top)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="cumulative cost over time">'
    ]
    grid = []
    for i in range(round(y_top / y_step) + 1):
        y = i * y_step
        grid.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
            f'stroke="#e5e7eb"/><text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">'
            f"{escape(money(y))}</text>"
        )
    for i in range(round(x_top / x_step) + 1):
        x = i * x_step
        grid.append(
            f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{top}" y2="{top + plot_h}" '
            f'stroke="#f3f4f6"/><text x="{sx(x):.1f}" y="{top + plot_h + 16}" '
            f'text-anchor="middle">{escape(_secs(x))}</text>'
        )
    out += grid
    out.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        "seconds from the run's start</text>"
    )
    for n, role in enumerate(ROLES):
        pts = _thin(series.points.get(role, []))
        if len(pts) < 2:
            continue
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="5 3"' if role == "total" else ""
        out.append(
            f'<polyline class="line-{role}" fill="none" stroke="{COLOURS[role]}" '
            f'stroke-width="{2.5 if role == "total" else 1.5}"{dash} points="{path}"/>'
        )
        final = pts[-1][1]
        out.append(
            f'<text x="{left + 10}" y="{top + 14 + 15 * n}" fill="{COLOURS[role]}">'
            f"{role} ${final:.4f}</text>"
        )
    out.append("</svg>")
    return "".join(out)
