"""A training log's reward and turns against step, as a PNG (matplotlib Agg, imported lazily).

Reads ``train_log.jsonl`` (one JSON object per GRPO step, ``deeprepo train grpo``): the
training reward's mean with a ±1 std band, the discovery reward, and the mean number of
turns on a second axis. ``deeprepo plot training`` and ``deeprepo train grpo`` call it.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

from deeprepo.base.errors import UsageError
from deeprepo.base.jsonl import numbered_lines
from deeprepo.base.safefile import write_atomic

__all__ = ["plot_training", "read_train_log"]


def read_train_log(log_path: Path) -> list[dict[str, Any]]:
    """The step records of ``log_path``, in step order; raises :class:`UsageError` when
    it is missing or holds no step."""
    try:
        lines = numbered_lines(Path(log_path).read_text("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {log_path}: {exc.strerror or exc}") from None
    rows: list[dict[str, Any]] = []
    for n, line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise UsageError(f"{log_path}:{n}: not a JSON line; is it a train_log.jsonl?") from None
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows.append(row)
    if not rows:
        raise UsageError(f"{log_path} holds no step record; is it a train_log.jsonl?")
    return sorted(rows, key=lambda r: int(r["step"]))


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) else math.nan


def plot_training(log_path: Path, out_png: Path) -> Path:
    """Draw reward (mean ± std, and the discovery reward) and turns against step; return ``out_png``."""
    rows = read_train_log(log_path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [int(r["step"]) for r in rows]
    mean = [_num(r, "reward_mean") for r in rows]
    std = [_num(r, "reward_std") for r in rows]
    discovery = [_num(r, "discovery_mean") for r in rows]
    turns = [_num(r, "turns_mean") for r in rows]

    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=120)
    ax.plot(steps, mean, marker="o", color="#1f77b4", label="training reward (mean)")
    lo = [m - s for m, s in zip(mean, std, strict=True)]
    hi = [m + s for m, s in zip(mean, std, strict=True)]
    ax.fill_between(steps, lo, hi, color="#1f77b4", alpha=0.18, label="± 1 std")
    if any(not math.isnan(d) for d in discovery) and discovery != mean:
        ax.plot(
            steps,
            discovery,
            marker=".",
            linestyle="--",
            color="#2ca02c",
            label="discovery reward (mean)",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_ylim(
        -0.05, 1.05 + max(0.0, max((h for h in hi if not math.isnan(h)), default=1.0) - 1.0)
    )
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(steps, turns, marker="s", color="#d62728", alpha=0.8, label="turns (mean)")
    ax2.set_ylabel("turns")
    ax2.set_ylim(0, max((t for t in turns if not math.isnan(t)), default=1.0) * 1.2 + 0.5)
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], loc="upper left", fontsize=8)
    ax.set_title(f"{Path(log_path).parent.name or 'training'}: reward and turns per step")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, format="png")
    write_atomic(out_png, png.getvalue())
    plt.close(fig)
    return out_png
