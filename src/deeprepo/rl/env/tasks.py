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
  The size ``hard`` is the hard tier (``rl.tasks.hard``, synthetic only): its tasks carry a
  sub-call budget (``Task.sub_call_budget``) that a rollout enforces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeprepo.base.errors import UsageError
from deeprepo.codebase.loader import codebase_from_files, load_codebase
from deeprepo.codebase.model import Codebase
from deeprepo.rl.tasks.hard_spec import BUDGET_KEY, HARD_LANGS, HARD_SIZE, TASK_FILE
from deeprepo.rl.tasks.spec import LANGS, SIZES, SUBSTRATES

if TYPE_CHECKING:
    from deeprepo.rl.tasks.hard import HardTask
    from deeprepo.rl.tasks.spec import GeneratedTask

__all__ = [
    "BUDGET_KEY",
    "Task",
    "TaskSpec",
    "budget_instruction",
    "budget_notes",
    "codebase_from_files",
    "generate_tasks_in_memory",
    "load_task_dir",
    "load_tasks",
    "parse_task_spec",
    "task_from_generated",
    "task_from_hard",
]

_SPEC_KEYS = ("seed", "lang", "n", "substrate")
_TIERS = (*SIZES, HARD_SIZE)


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
        return self.codebase or codebase_from_files(
            self.files, root_name=self.id, notes=budget_notes(self.sub_call_budget)
        )

    @property
    def sub_call_budget(self) -> int | None:
        """The worker calls a run of this task may make (hard tier), or ``None``: no limit."""
        value = self.metadata.get(BUDGET_KEY)
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def budget_instruction(budget: int) -> str:
    """The analysis instruction of a run held to ``budget`` worker calls."""
    return (
        "Analyse this repository for bugs, security vulnerabilities and architecture problems. "
        f"You may make {budget} worker calls in all (each prompt of llm_query or llm_batch is "
        "one; prompts past the budget are refused), fewer than the repository has files: "
        "choose what the workers read. Start by exploring `file_tree` and `metadata`, then "
        "delegate."
    )


def budget_notes(budget: int | None) -> list[str]:
    """The note the root reads in ``metadata["notes"]`` about a task's sub-call budget."""
    if budget is None:
        return []
    return [
        f"sub-call budget: {budget} worker calls for this task (every prompt of llm_query or "
        "llm_batch is one call; prompts past it are refused): choose what to read"
    ]


def parse_task_spec(text: str) -> TaskSpec:
    """``"small:seed=3:lang=js:n=10"`` → ``TaskSpec("small", 3, "js", 10)``."""
    head, *rest = [p.strip() for p in text.strip().split(":")]
    example = "e.g. medium:seed=7 or small:seed=3:lang=js:n=10"
    if head not in _TIERS:
        raise UsageError(f"--generate {text!r}: start with a size ({', '.join(_TIERS)}), {example}")
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
    langs = HARD_LANGS if head == HARD_SIZE else LANGS
    if lang not in langs:
        raise UsageError(f"--generate {text!r}: lang must be one of {', '.join(langs)}")
    substrate = values.get("substrate", "synthetic")
    if substrate not in SUBSTRATES:
        raise UsageError(f"--generate {text!r}: substrate must be one of {', '.join(SUBSTRATES)}")
    if head == HARD_SIZE and substrate != "synthetic":
        raise UsageError(f"--generate {text!r}: the hard tier is synthetic only; drop substrate=")
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
    if spec.size == HARD_SIZE:
        from deeprepo.rl.tasks.hard import generate_hard_task

        return [
            task_from_hard(generate_hard_task(s, spec.lang)) for s in task_seeds(spec.seed, count)
        ]
    return [
        task_from_generated(generate_task(task_seed, spec.size, spec.lang, spec.substrate))
        for task_seed in task_seeds(spec.seed, count)
    ]


def task_from_generated(gen: GeneratedTask, sub_call_budget: int | None = None) -> Task:
    """A rollout :class:`Task` from one generated repository (no disk); ``sub_call_budget``
    (the hard tier's) goes into its metadata and the codebase's notes."""
    files = dict(gen.files)
    metadata: dict[str, Any] = {k: v for k, v in gen.info().to_dict().items() if k != "path"}
    if sub_call_budget is not None:
        metadata[BUDGET_KEY] = sub_call_budget
    return Task(
        id=gen.task_id,
        files=files,
        ground_truth=[e.to_dict() for e in gen.ground_truth],
        metadata=metadata,
        codebase=codebase_from_files(
            files, root_name=gen.task_id, notes=budget_notes(sub_call_budget)
        ),
    )


def task_from_hard(hard: HardTask) -> Task:
    """A rollout :class:`Task` from a hard task, held to its sub-call budget."""
    return task_from_generated(hard.task, hard.sub_call_budget)


def _read_budget(task_dir: Path, metadata: dict[str, Any]) -> None:
    """A hard task's budget (its ``task.json``, else its ``index.json`` line) into
    ``metadata``, checked; nothing for a task without one."""
    path = task_dir / TASK_FILE
    if path.is_file():
        data = _read_json(path)
        budget = data.get(BUDGET_KEY) if isinstance(data, dict) else None
    elif BUDGET_KEY in metadata:
        path, budget = task_dir.parent / "index.json", metadata[BUDGET_KEY]
    else:
        return
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise UsageError(
            f"{path}: {BUDGET_KEY} must be a whole number of at least 1; regenerate the task "
            "with `deeprepo tasks generate --size hard`"
        )
    metadata[BUDGET_KEY] = budget


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
    meta = dict(metadata or {})
    _read_budget(task_dir, meta)
    codebase = load_codebase(task_dir / "repo", respect_gitignore=False)
    budget = meta.get(BUDGET_KEY)
    if isinstance(budget, int):
        codebase = replace(
            codebase,
            metadata=replace(
                codebase.metadata, notes=[*codebase.metadata.notes, *budget_notes(budget)]
            ),
        )
    return Task(
        id=task_dir.name, files=codebase.files, ground_truth=gt, metadata=meta, codebase=codebase
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
