"""Tasks for rollouts: repositories with ground truth, from disk or generated in memory.

Two sources:

* a directory written by ``deeprepo tasks generate``: ``<id>/repo/...`` plus
  ``<id>/ground_truth.json`` for each task (``index.json``, when present, fixes the order);
* a generation SPEC: ``SIZE[:key=value...]`` with keys ``seed`` (default 0), ``lang``
  (``python``, ``js`` or ``mixed``; default ``python``), ``n`` (how many tasks) and
  ``substrate`` (``synthetic``, the default, or ``real``: bugs planted into vendored
  open-source files), e.g. ``medium:seed=7`` or ``small:seed=3:lang=js:n=10:substrate=real``.
  The tasks are those ``deeprepo tasks generate --seed SEED --size SIZE --lang LANG
  --substrate SUBSTRATE`` writes, in the same order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeprepo.base.errors import UsageError
from deeprepo.codebase.loader import codebase_from_files, load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.rl.tasks.spec import LANGS, SIZES, SUBSTRATES

if TYPE_CHECKING:
    from deeprepo.rl.tasks.spec import GeneratedTask

__all__ = [
    "Task",
    "TaskSpec",
    "codebase_from_files",
    "generate_tasks_in_memory",
    "load_task_dir",
    "load_tasks",
    "parse_task_spec",
    "task_from_generated",
]

_SPEC_KEYS = ("seed", "lang", "n", "substrate")


@dataclass(frozen=True)
class TaskSpec:
    """A parsed ``--generate`` SPEC."""

    size: str
    seed: int = 0
    lang: str = "python"
    n: int | None = None
    substrate: str = "synthetic"

    def __str__(self) -> str:
        text = f"{self.size}:seed={self.seed}:lang={self.lang}"
        text = text if self.n is None else f"{text}:n={self.n}"
        return text if self.substrate == "synthetic" else f"{text}:substrate={self.substrate}"


@dataclass(frozen=True)
class Task:
    """One repository with its ground truth, ready for an Episode."""

    id: str
    files: dict[str, str]
    ground_truth: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)
    codebase: Codebase | None = field(default=None, repr=False, compare=False)

    def get_codebase(self) -> Codebase:
        """The :class:`Codebase` the kernel holds (built from ``files`` when not given)."""
        return self.codebase or codebase_from_files(self.files, root_name=self.id)


def parse_task_spec(text: str) -> TaskSpec:
    """``"small:seed=3:lang=js:n=10"`` → ``TaskSpec("small", 3, "js", 10)``."""
    head, *rest = [p.strip() for p in text.strip().split(":")]
    example = "e.g. medium:seed=7 or small:seed=3:lang=js:n=10"
    if head not in SIZES:
        raise UsageError(f"--generate {text!r}: start with a size ({', '.join(SIZES)}), {example}")
    values: dict[str, str] = {}
    for item in rest:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in _SPEC_KEYS:
            raise UsageError(
                f"--generate {text!r}: {item!r} is not key=value with key one of "
                f"{', '.join(_SPEC_KEYS)}; {example}"
            )
        if key in values:
            raise UsageError(f"--generate {text!r}: {key!r} is given twice")
        values[key] = value.strip()
    lang = values.get("lang", "python")
    if lang not in LANGS:
        raise UsageError(f"--generate {text!r}: lang must be one of {', '.join(LANGS)}")
    substrate = values.get("substrate", "synthetic")
    if substrate not in SUBSTRATES:
        raise UsageError(f"--generate {text!r}: substrate must be one of {', '.join(SUBSTRATES)}")
    try:
        seed = int(values.get("seed", "0"))
        n = int(values["n"]) if "n" in values else None
    except ValueError:
        raise UsageError(f"--generate {text!r}: seed and n must be integers; {example}") from None
    if n is not None and n < 1:
        raise UsageError(f"--generate {text!r}: n must be at least 1")
    return TaskSpec(size=head, seed=seed, lang=lang, n=n, substrate=substrate)


def generate_tasks_in_memory(spec: TaskSpec, n: int | None = None) -> list[Task]:
    """``n`` tasks (default ``spec.n``, else 1) from the generator, without touching disk."""
    from deeprepo.rl.tasks.generator import generate_task, task_seeds

    count = n if n is not None else (spec.n or 1)
    return [
        task_from_generated(generate_task(task_seed, spec.size, spec.lang, spec.substrate))
        for task_seed in task_seeds(spec.seed, count)
    ]


def task_from_generated(gen: GeneratedTask) -> Task:
    """A rollout :class:`Task` from one generated repository (no disk)."""
    files = dict(gen.files)
    return Task(
        id=gen.task_id,
        files=files,
        ground_truth=[e.to_dict() for e in gen.ground_truth],
        metadata={k: v for k, v in gen.info().to_dict().items() if k != "path"},
        codebase=codebase_from_files(files, root_name=gen.task_id),
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot read {path}: {exc}. Regenerate it with `deeprepo tasks generate`."
        ) from None


def load_task_dir(task_dir: Path, metadata: dict[str, Any] | None = None) -> Task:
    """One task directory: ``repo/`` and ``ground_truth.json``."""
    gt = _read_json(task_dir / "ground_truth.json")
    if isinstance(gt, dict) and isinstance(gt.get("entries"), list):
        gt = gt["entries"]
    if not isinstance(gt, list) or not all(isinstance(e, dict) for e in gt):
        raise UsageError(f"{task_dir / 'ground_truth.json'} must be a JSON list of entries")
    if not (task_dir / "repo").is_dir():
        raise UsageError(
            f"{task_dir} has no repo/ directory; is it a `deeprepo tasks generate` output?"
        )
    codebase = load_codebase(task_dir / "repo", respect_gitignore=False)
    return Task(
        id=task_dir.name,
        files=codebase.files,
        ground_truth=gt,
        metadata=dict(metadata or {}),
        codebase=codebase,
    )


def load_tasks(directory: str | Path, n: int | None = None) -> list[Task]:
    """The first ``n`` tasks (all by default) of a directory written by ``deeprepo tasks
    generate``, in ``index.json`` order when there is one, else sorted by name. The
    directory may also be a single task."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"--tasks {root}: no such directory")
    if (root / "ground_truth.json").is_file():
        return [load_task_dir(root)]
    entries: list[tuple[Path, dict[str, Any]]] = []
    index = root / "index.json"
    if index.is_file():
        data = _read_json(index)
        items = data.get("tasks", []) if isinstance(data, dict) else data
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and "id" in item:
                entries.append((root / str(item.get("path") or item["id"]), dict(item)))
    if not entries:
        entries = [(p, {}) for p in sorted(root.iterdir()) if (p / "ground_truth.json").is_file()]
    if not entries:
        raise UsageError(
            f"--tasks {root}: no task directories (<id>/repo/ + <id>/ground_truth.json) found; "
            "create some with `deeprepo tasks generate`"
        )
    entries = entries[:n] if n is not None else entries
    return [load_task_dir(path, meta) for path, meta in entries]
