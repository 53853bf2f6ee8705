"""The ``oracle`` sub-worker: answers file audits from a task's ground truth (DESIGN §5).

It isolates orchestration skill in RL: a root that gets every file's content to a worker
is rewarded, however well the worker reads. For each file whose *content* is in the
prompt it reports that file's true bugs lying in the lines shown, missing each with
probability ``miss_rate``, and adds plausible false findings (``false_rate`` expected per
file shown; half of them on a decoy when the file shows one). Naming a path is not
showing content: such a prompt gets ``{"findings": []}``.

Content is recognised in two ways:

* ``<file path="...">`` blocks of the audit prompt (``extract_file_blocks``), whole files
  or slices. With a ``codebase``, only block lines that match the real file count, so a
  block with made-up or empty content shows nothing;
* with a ``codebase``, also raw text: a file counts when at least ``min_fraction`` of its
  non-trivial lines are in the prompt verbatim (``findings.coverage``).

Randomness is drawn from an RNG seeded by a hash of (seed, path, content shown), so a
given prompt always gets the same answer, whatever the call order or concurrency.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deeprepo.findings.coverage import (
    DEFAULT_MIN_FRACTION,
    MIN_LINE_LENGTH,
    CoverageIndex,
    prompt_lines,
    shown_line_numbers,
)
from deeprepo.findings.grading import (
    DEFAULT_TOLERANCE,
    FamilyTable,
    GroundTruthEntry,
    default_families,
    parse_ground_truth,
)
from deeprepo.orchestrator.prompts import extract_file_blocks
from deeprepo.providers.base import ChatRequest, Completion, Usage

# Bug classes the false findings imitate: the ones a code-audit worker reports most.
_FALSE_FAMILIES = (
    "sql-injection",
    "command-injection",
    "path-traversal",
    "unsafe-deserialization",
    "xss",
    "ssrf",
    "hardcoded-secret",
    "weak-crypto",
    "missing-authorization",
    "insecure-randomness",
    "race-condition",
    "resource-leak",
    "logic-error",
)
_DECOY_SHARE = 0.5  # share of false findings placed on a decoy when one is shown


@dataclass(frozen=True)
class _View:
    """One file as shown in a prompt: the line numbers visible and their text."""

    path: str
    shown: frozenset[int]
    text: dict[int, str]  # line number -> stripped text, for the shown lines


class OracleWorker:
    """A :class:`~deeprepo.providers.base.ChatModel` answering from ground truth."""

    def __init__(
        self,
        ground_truth: Iterable[Mapping[str, Any] | GroundTruthEntry] | Mapping[str, Any],
        *,
        miss_rate: float = 0.1,
        false_rate: float = 0.05,
        seed: int = 0,
        codebase: Mapping[str, str] | None = None,
        min_fraction: float = DEFAULT_MIN_FRACTION,
        families: FamilyTable | None = None,
    ) -> None:
        if not 0.0 <= miss_rate <= 1.0:
            raise ValueError(f"miss_rate must be within [0, 1], got {miss_rate}")
        if false_rate < 0.0:
            raise ValueError(f"false_rate must be >= 0, got {false_rate}")
        self.miss_rate = miss_rate
        self.false_rate = false_rate
        self.seed = seed
        self.min_fraction = min_fraction
        self._families = families or default_families()
        self._bugs: dict[str, list[GroundTruthEntry]] = defaultdict(list)
        self._decoys: dict[str, list[GroundTruthEntry]] = defaultdict(list)
        for e in _entries(ground_truth):
            (self._bugs if e.vulnerable else self._decoys)[e.file].append(e)
        for group in (*self._bugs.values(), *self._decoys.values()):
            group.sort(key=lambda e: (e.start_line, e.end_line, e.id))
        self._codebase = {k.removeprefix("./"): v for k, v in (codebase or {}).items()}
        self._index = CoverageIndex(self._codebase) if codebase is not None else None
        self._lines: dict[str, list[str]] = {}

    @property
    def name(self) -> str:
        return "oracle"

    async def complete(self, request: ChatRequest) -> Completion:
        prompt = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        return Completion(
            text=self.answer(prompt), usage=Usage(), model="oracle", finish_reason="stop"
        )

    async def aclose(self) -> None:
        return None

    def answer(self, prompt: str) -> str:
        """The worker JSON for one prompt: ``{"findings": [...]}``."""
        return json.dumps({"findings": self.findings(prompt)})

    def findings(self, prompt: str) -> list[dict[str, Any]]:
        """Findings (worker dicts with ``file``) for every file whose content the prompt shows."""
        out: list[dict[str, Any]] = []
        for view in self._views(prompt):
            out.extend(self._answer_view(view))
        return out

    # ------------------------------------------------------------------ what the prompt shows

    def _file_lines(self, path: str) -> list[str] | None:
        if path not in self._codebase:
            return None
        if path not in self._lines:
            self._lines[path] = [ln.strip() for ln in self._codebase[path].split("\n")]
        return self._lines[path]

    def _views(self, prompt: str) -> list[_View]:
        text: dict[str, dict[int, str]] = defaultdict(dict)
        for raw_path, content, start in extract_file_blocks(prompt):
            path = raw_path.strip().removeprefix("./")
            real = self._file_lines(path)
            if self._index is not None and real is None:
                continue  # a path the repository does not have: nothing real is shown
            for k, line in enumerate(content.split("\n")):
                s, n = line.strip(), start + k
                if s and (real is None or (n <= len(real) and real[n - 1] == s)):
                    text[path][n] = s
        # Raw pasted text counts only when the prompt has no file blocks: with blocks, the
        # worker was told which files to audit, and files that merely share boilerplate
        # lines with them are not being shown.
        if self._index is not None and not text:
            plines = prompt_lines([prompt])
            for path, frac in self._index.fractions(plines).items():
                if frac >= self.min_fraction and path not in text:
                    real = self._file_lines(path) or []
                    text[path] = {
                        n: real[n - 1] for n in shown_line_numbers(self._codebase[path], plines)
                    }
        return [_View(p, frozenset(t), t) for p, t in sorted(text.items()) if t]

    def _rng(self, view: _View) -> random.Random:
        h = hashlib.sha256(f"{self.seed}\0{view.path}\0".encode())
        for n in sorted(view.shown):
            h.update(f"{n}\0{view.text[n]}\n".encode())
        return random.Random(int.from_bytes(h.digest()[:8], "big"))

    # ------------------------------------------------------------------ the answer

    def _answer_view(self, view: _View) -> list[dict[str, Any]]:
        rng = self._rng(view)
        out = []
        bugs = self._bugs.get(view.path, [])
        for e in bugs:
            if not any(n in view.shown for n in range(e.start_line, e.end_line + 1)):
                continue
            if rng.random() < self.miss_rate:
                continue
            out.append(self._report(view.path, e))
        n_false = int(self.false_rate) + (rng.random() < self.false_rate - int(self.false_rate))
        for _ in range(n_false):
            false = self._false_finding(view, bugs, rng)
            if false is not None:
                out.append(false)
        return out

    def _report(self, path: str, e: GroundTruthEntry) -> dict[str, Any]:
        fam_name = self._families.label(e.cwe, e.kind)
        fam = self._families.families.get(fam_name)
        title = e.description.split(". ")[0].strip().rstrip(".")[:100] if e.description else ""
        return {
            "file": path,
            "line": e.start_line,
            "end_line": e.end_line,
            "kind": e.kind or fam_name,
            "cwe": e.cwe,
            "severity": e.severity,
            "title": title or (fam.title if fam else fam_name),
            "detail": e.description or (fam.title if fam else fam_name),
            "fix": fam.fix if fam else "",
        }

    def _false_finding(
        self, view: _View, bugs: list[GroundTruthEntry], rng: random.Random
    ) -> dict[str, Any] | None:
        decoys = [
            d
            for d in self._decoys.get(view.path, [])
            if any(n in view.shown for n in range(d.start_line, d.end_line + 1))
        ]
        if decoys and rng.random() < _DECOY_SHARE:
            d = rng.choice(decoys)
            fam = self._families.families.get(self._families.label(d.cwe, d.kind))
            return {
                "file": view.path,
                "line": d.start_line,
                "end_line": d.end_line,
                "kind": d.kind or (fam.name if fam else "issue"),
                "cwe": d.cwe,
                "severity": "high",
                "title": f"Possible {fam.title.lower() if fam else 'vulnerability'}",
                "detail": "This code looks dangerous.",
                "fix": fam.fix if fam else "",
            }
        # A real-looking line far from every true bug, so the finding is surely false.
        lines = sorted(n for n in view.shown if len(view.text[n]) >= MIN_LINE_LENGTH) or sorted(
            view.shown
        )
        far = [n for n in lines if all(_gap(n, b) > DEFAULT_TOLERANCE for b in bugs)]
        if not far:
            return None
        line = rng.choice(far)
        fam_name = rng.choice([f for f in _FALSE_FAMILIES if f in self._families.families])
        fam = self._families.families[fam_name]
        return {
            "file": view.path,
            "line": line,
            "end_line": line,
            "kind": fam.name,
            "cwe": min(fam.cwes, key=lambda c: int(c.split("-")[1])),
            "severity": rng.choice(("medium", "low", "high")),
            "title": f"Possible {fam.title.lower()}",
            "detail": "The value used here may come from an untrusted source.",
            "fix": fam.fix,
        }


def _gap(line: int, e: GroundTruthEntry) -> int:
    return max(0, e.start_line - line, line - e.end_line)


def _entries(
    ground_truth: Iterable[Mapping[str, Any] | GroundTruthEntry] | Mapping[str, Any],
) -> list[GroundTruthEntry]:
    if isinstance(ground_truth, Mapping):
        return parse_ground_truth(dict(ground_truth))
    items = list(ground_truth)
    if all(isinstance(x, GroundTruthEntry) for x in items):
        return [x for x in items if isinstance(x, GroundTruthEntry)]
    return parse_ground_truth([dict(x) if isinstance(x, Mapping) else x for x in items])


def make_oracle(
    ground_truth: Iterable[Mapping[str, Any] | GroundTruthEntry] | Mapping[str, Any] | str | Path,
    **kwargs: Any,
) -> OracleWorker:
    """Build an :class:`OracleWorker`; ``ground_truth`` may be a path to ``ground_truth.json``."""
    if isinstance(ground_truth, str | Path):
        from deeprepo.findings.grading import load_ground_truth

        return OracleWorker(load_ground_truth(Path(ground_truth)), **kwargs)
    return OracleWorker(ground_truth, **kwargs)
