"""``results.jsonl``: one line per rollout, written by ``deeprepo eval`` and read by ``compare``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeprepo.base.errors import UsageError
from deeprepo.base.jsonl import numbered_lines
from deeprepo.base.safefile import write_atomic

if TYPE_CHECKING:
    from deeprepo.rl.env.rollout import RolloutOutcome

RESULTS_FILENAME = "results.jsonl"


@dataclass(frozen=True)
class RolloutResult:
    """One rollout of one example. Keys a reader does not know are kept in ``extra``
    and written back, so files from newer versions survive a round trip."""

    example_id: str
    rollout: int = 0
    reward: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    num_turns: int = 0
    stop_condition: str = ""
    is_truncated: bool = False
    sub_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    generation_seconds: float = 0.0
    model: str = ""
    trajectory: list[Any] = field(default_factory=list)
    # metrics.json's "behaviour" (orchestrator.behaviour); {} in files written before it
    behaviour: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_outcome(cls, outcome: RolloutOutcome, *, model: str | None = None) -> RolloutResult:
        """The ``results.jsonl`` record: tokens are the root's (``RunResult.root_tokens``)."""
        r = outcome.result
        root = r.root_tokens
        return cls(
            example_id=outcome.task_id,
            rollout=outcome.rollout,
            reward=outcome.reward.total,
            parts=dict(outcome.reward.parts),
            num_turns=r.num_turns,
            stop_condition=outcome.stop_condition,
            is_truncated=outcome.is_truncated,
            sub_calls=r.sub_calls,
            input_tokens=root.input,
            output_tokens=root.output,
            generation_seconds=outcome.seconds,
            model=model or r.root_model,
            trajectory=[t.to_dict() for t in r.turns],
            behaviour=r.behaviour.to_dict() if r.behaviour else {},
            extra={
                "sub_model": r.sub_model,
                "stop_reason": r.stop_reason,
                "stop_detail": r.stop_detail,
                "incomplete": r.incomplete,
                "complete": r.complete,
                "worker_seed": outcome.worker_seed,
                "findings": len(r.findings),
                "files_covered": len(r.files_covered),
                "coverable_files": r.coverable_files,
                "batch_sizes": list(r.batch_sizes),
                "total_cost_usd": r.total_cost_usd,
                "usage": r.usage,
                "reward_details": dict(outcome.reward.details),
                # the root's first request; with `trajectory` the exact conversation
                "system_prompt": r.system_prompt,
                "first_user_message": r.first_message,
            },
        )

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**self.extra, **d}

    def to_json(self) -> str:
        """One JSON line (no newline)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str)

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> RolloutResult:
        """Parse a line or a dict. Raises ``ValueError`` saying which field is wrong."""
        d = json.loads(data) if isinstance(data, str) else data
        if not isinstance(d, Mapping):
            raise ValueError("expected a JSON object")
        if "example_id" not in d or "reward" not in d:
            raise ValueError("missing 'example_id' or 'reward'")
        try:
            parts = {str(k): float(v) for k, v in (d.get("parts") or {}).items()}
            return cls(
                example_id=str(d["example_id"]),
                rollout=int(d.get("rollout") or 0),
                reward=float(d["reward"]),
                parts=parts,
                num_turns=int(d.get("num_turns") or 0),
                stop_condition=str(d.get("stop_condition") or ""),
                is_truncated=bool(d.get("is_truncated", False)),
                sub_calls=int(d.get("sub_calls") or 0),
                input_tokens=int(d.get("input_tokens") or 0),
                output_tokens=int(d.get("output_tokens") or 0),
                generation_seconds=float(d.get("generation_seconds") or 0.0),
                model=str(d.get("model") or ""),
                trajectory=list(d.get("trajectory") or []),
                behaviour=dict(d.get("behaviour") or {}),
                extra={k: v for k, v in d.items() if k not in _FIELD_NAMES},
            )
        except (TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"a field has the wrong type ({e})") from None


_FIELD_NAMES = frozenset(f.name for f in fields(RolloutResult))


def resolve_results_path(path: Path) -> Path:
    """A results file, or a directory holding ``results.jsonl``."""
    path = Path(path)
    return path / RESULTS_FILENAME if path.is_dir() else path


#: The largest results.jsonl read, and the most rollouts in it: far above an evaluation's
#: size, and a bound on what a results file from elsewhere can cost in memory.
MAX_RESULTS_BYTES = 256 << 20
MAX_RESULTS = 50_000


def load_results(path: Path) -> list[RolloutResult]:
    """Read a ``results.jsonl`` (or a directory holding one); blank lines are skipped.
    A file over :data:`MAX_RESULTS_BYTES` or :data:`MAX_RESULTS` rollouts is refused."""
    path = resolve_results_path(path)
    try:
        size = path.stat().st_size
        if size > MAX_RESULTS_BYTES:
            raise UsageError(
                f"{path} is {size:,} bytes, more than the {MAX_RESULTS_BYTES:,} deeprepo reads "
                "from a results file; `deeprepo eval` never writes one that large"
            )
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"Results file not found: {path}. Pass a results.jsonl written by `deeprepo eval`."
        ) from None
    out: list[RolloutResult] = []
    for n, line in numbered_lines(text):
        if len(out) >= MAX_RESULTS:
            raise UsageError(
                f"{path} holds more than {MAX_RESULTS:,} rollouts, more than deeprepo reads "
                "from a results file; split it"
            )
        try:
            out.append(RolloutResult.from_json(line))
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            raise UsageError(
                f"{path} line {n}: {e}. Each line must be one JSON object with at least "
                "'example_id' and 'reward', as `deeprepo eval` writes it."
            ) from None
    return out


def write_results(path: Path, results: Iterable[RolloutResult]) -> None:
    """Write rollouts as JSON lines (the file is replaced)."""
    write_atomic(Path(path), "".join(r.to_json() + "\n" for r in results))
