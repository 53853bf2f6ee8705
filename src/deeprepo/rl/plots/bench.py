"""A bench's cost against quality: one labelled point per configuration.

Quality is F1 against ground truth when the bench graded any run, else the mean findings
per run. Cost is the mean total cost per run from the runs' ledgers. matplotlib is
imported when a plot is drawn (Agg backend: no display needed)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from deeprepo.base.errors import UsageError
from deeprepo.base.safefile import write_atomic

__all__ = ["load_bench_json", "plot_bench"]


def load_bench_json(path: Path) -> dict[str, Any]:
    """``bench.json``, given the file or the bench folder that holds it."""
    file = path / "bench.json" if path.is_dir() else path
    if not file.is_file():
        raise UsageError(f"{path}: no bench.json there; give a bench folder or its bench.json")
    try:
        data = json.loads(file.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{file} is not readable JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("configs"), list):
        raise UsageError(
            f"{file} is not a bench.json (no configs list); write one with deeprepo bench"
        )
    return data


def plot_bench(bench: dict[str, Any] | Path, out_png: Path) -> Path:
    """Draw cost per run (x) against F1 or findings (y) into ``out_png``; returns it."""
    data = load_bench_json(bench) if isinstance(bench, Path) else bench
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = [c for c in data["configs"] if c.get("runs")]
    graded = any(c.get("grading") for c in configs)
    points: list[tuple[str, float, float]] = []
    left_out: list[str] = []
    for c in configs:
        cost = (c.get("cost") or {}).get("mean_total_usd")
        y = (c["grading"] or {}).get("f1") if graded else c.get("findings_mean")
        if cost is None or y is None:
            left_out.append(str(c["name"]))
            continue
        points.append((str(c["name"]), float(cost), float(y)))

    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=110)
    try:
        # Configurations that land on the same point share one label.
        at: dict[tuple[float, float], list[str]] = {}
        for name, x, y in points:
            at.setdefault((x, y), []).append(name)
        for (x, y), names in at.items():
            ax.scatter([x], [y], s=60)
            label = ", ".join(names)
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=9)
        ax.set_xlabel("mean cost per run (USD, from the runs' ledgers)")
        ax.set_ylabel("F1 against ground truth" if graded else "findings per run (mean)")
        if graded:
            ax.set_ylim(-0.05, 1.05)
        xs = [p[1] for p in points]
        if xs and max(xs) > 0 and min(xs) > 0 and max(xs) / min(xs) > 100:
            ax.set_xscale("log")
        else:  # costs are never negative; free runs (the offline engine) sit at $0
            hi = max(xs, default=0.0) or 1.0
            ax.set_xlim(-0.03 * hi, 1.2 * hi)
        title = "Cost against quality, one point per configuration"
        if left_out:
            title += f"\nnot shown (cost unknown or no score): {', '.join(left_out)[:80]}"
        if not points:
            ax.text(0.5, 0.5, "no configuration with a finished run", ha="center",
                    transform=ax.transAxes)  # fmt: skip
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        out_png.parent.mkdir(parents=True, exist_ok=True)
        png = io.BytesIO()
        fig.savefig(png, format="png")
        write_atomic(out_png, png.getvalue())
    finally:
        plt.close(fig)
    return out_png
