"""The repositories of a bench: paths, folders of repositories, generated task sets.

Each becomes a :class:`BenchRepo` with a unique id (it names a folder of runs) and, where
one exists, its ground truth: given in the TOML, ``<path>.ground_truth.json`` beside the
repository (as ``examples/vulnapi.ground_truth.json``), or the ``ground_truth.json`` of a
task folder written by ``deeprepo tasks generate`` (``<id>/repo`` + ``<id>/ground_truth.json``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from deeprepo.base.errors import UsageError
from deeprepo.rl.bench.config import RepoSpec
from deeprepo.rl.tasks.hard_spec import BUDGET_KEY, TASK_FILE

__all__ = ["BenchRepo", "resolve_repos"]


@dataclass(frozen=True)
class BenchRepo:
    id: str
    path: Path
    ground_truth: Path | None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "repo"


def _beside(path: Path) -> Path | None:
    """The ground truth found next to a repository, if any."""
    sibling = path.with_name(path.name + ".ground_truth.json")
    if sibling.is_file():
        return sibling
    if path.name == "repo" and (path.parent / "ground_truth.json").is_file():
        return path.parent / "ground_truth.json"
    return None


def _task_dirs(folder: Path) -> list[Path]:
    """Task folders of a ``deeprepo tasks generate`` output, in index order."""
    index = folder / "index.json"
    if index.is_file():
        try:
            data = json.loads(index.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {index}: {exc}") from None
        items = data.get("tasks", []) if isinstance(data, dict) else data
        out = [
            folder / str(item.get("path") or item["id"])
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict) and "id" in item
        ]
        if out:
            return out
    return sorted(p for p in folder.iterdir() if (p / "repo").is_dir())


def _from_folder(folder: Path, label: str) -> list[BenchRepo]:
    if not folder.is_dir():
        raise UsageError(f"{label} {folder} is not a directory")
    tasks = _task_dirs(folder)
    if tasks:
        return [
            BenchRepo(
                t.name,
                t / "repo",
                t / "ground_truth.json" if (t / "ground_truth.json").is_file() else None,
            )
            for t in tasks
        ]
    subs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subs:
        raise UsageError(f"{label} {folder} holds no repository folders")
    return [BenchRepo(_slug(p.name), p, _beside(p)) for p in subs]


def _generated(spec_text: str, tasks_root: Path) -> list[BenchRepo]:
    from deeprepo.rl.env.tasks import parse_task_spec
    from deeprepo.rl.tasks import generate_tasks
    from deeprepo.rl.tasks.hard import generate_hard_tasks
    from deeprepo.rl.tasks.hard_spec import HARD_SIZE

    spec = parse_task_spec(spec_text)
    n = spec.n or 1
    real = "-real" if spec.substrate == "real" else ""
    folder = tasks_root / _slug(f"{spec.size}-seed{spec.seed}-{spec.lang}{real}-n{n}")
    # The generator is deterministic: a folder already written for this spec is reused, so
    # a resumed bench sees the very same repositories.
    if not (folder / "index.json").is_file():
        if spec.size == HARD_SIZE:
            generate_hard_tasks(folder, seed=spec.seed, n=n, lang=spec.lang)
        else:
            generate_tasks(
                folder,
                seed=spec.seed,
                n=n,
                size=spec.size,
                lang=spec.lang,
                substrate=spec.substrate,
            )
    return _from_folder(folder, "generate")


def held_sub_calls(limit: int | None, repo: Path) -> int | None:
    """``limit``, or the sub-call budget of a hard task (its ``task.json`` beside ``repo/``)
    when that is smaller: a bench on the hard tier is held to it as eval is."""
    path = repo.parent / TASK_FILE
    if repo.name != "repo" or not path.is_file():
        return limit
    try:
        budget = json.loads(path.read_text("utf-8")).get(BUDGET_KEY)
    except (OSError, ValueError, AttributeError):
        raise UsageError(f"{path} is not a task's JSON; regenerate it") from None
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise UsageError(f"{path}: sub_call_budget must be a whole number of at least 1")
    return budget if limit is None else min(limit, budget)


def resolve_repos(specs: list[RepoSpec], base: Path, tasks_root: Path) -> list[BenchRepo]:
    """Every repository the bench runs on; paths in ``specs`` are relative to ``base``
    (the TOML file's folder), generated tasks are written under ``tasks_root``."""
    repos: list[BenchRepo] = []
    for i, spec in enumerate(specs, 1):
        if spec.path is not None:
            path = (base / spec.path).resolve()
            if not path.is_dir():
                raise UsageError(f"repo[{i}].path {spec.path} is not a directory (from {base})")
            gt = (base / spec.ground_truth).resolve() if spec.ground_truth else _beside(path)
            if gt is not None and not gt.is_file():
                raise UsageError(f"repo[{i}].ground_truth {spec.ground_truth} is not a file")
            name = spec.name or (path.parent.name if path.name == "repo" else path.name)
            repos.append(BenchRepo(_slug(name), path, gt))
        elif spec.dir is not None:
            repos.extend(_from_folder((base / spec.dir).resolve(), f"repo[{i}].dir"))
        else:
            assert spec.generate is not None
            repos.extend(_generated(spec.generate, tasks_root))
    seen: set[str] = set()
    for r in repos:
        if r.id in seen:
            raise UsageError(
                f"two repositories are both named {r.id!r}; give one a name = '...' in its [[repo]]"
            )
        seen.add(r.id)
    return repos
