"""Grade findings against a ground truth: matching, CWE families and scores (DESIGN §6).

A finding *matches* a vulnerable ground-truth entry when

* the file is the same (a leading ``./`` is ignored);
* its CWE is acceptable: the entry's CWE or one of its ``acceptable_cwes``, or any CWE in
  the same family as the entry's CWE (``data/cwe_families.json``). A finding without a
  CWE matches by ``kind``, looked up in the family table;
* its line range is within ``tolerance`` lines of the entry's range. A finding's range
  counts only up to ``tolerance`` lines past its start line, so one finding spanning a
  whole file cannot match every bug in it.

Matching is one-to-one and of maximum size: pairs are first taken greedily by distance,
then augmenting paths let a finding that lost its nearest entry take another, so two
findings near two bugs are both credited. Findings left over are false positives; one
that would match a decoy (``vulnerable: false``) counts as a decoy hit.

Exact duplicates (same file, start line and CWE-or-kind) are dropped before grading by
default, because engines report the same claim once per worker that saw it.

Edge cases: with no findings, precision is 1.0 when there is nothing to find and 0.0
otherwise; with no vulnerable entries, recall is 1.0. F-scores are 0.0 when precision
and recall are both 0.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from deeprepo.base.errors import UsageError
from deeprepo.base.finding import Finding, dedupe, finding_from_dict, normalize_cwe
from deeprepo.findings.families import FamilyTable, default_families

DEFAULT_TOLERANCE = 10


# ---------------------------------------------------------------------------- ground truth


class PlaceDict(TypedDict):
    """A place in the code: ``related`` entries of a cross-file bug."""

    file: str
    line: int


class GroundTruthDict(TypedDict):
    """One entry of ``ground_truth.json`` as :meth:`GroundTruthEntry.to_dict` writes it."""

    id: str
    file: str
    start_line: int
    end_line: int
    cwe: str | None
    acceptable_cwes: list[str]
    kind: str
    severity: str
    description: str
    vulnerable: bool
    related: NotRequired[list[PlaceDict]]


@dataclass(frozen=True)
class GroundTruthEntry:
    """One planted bug (``vulnerable``) or decoy (safe code that looks dangerous).
    ``related`` holds, for a cross-file bug, the ``(file, line)`` places where the
    untrusted value enters."""

    id: str
    file: str
    start_line: int
    end_line: int
    cwe: str | None
    acceptable_cwes: tuple[str, ...] = ()
    kind: str = ""
    severity: str = "medium"
    description: str = ""
    vulnerable: bool = True
    related: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> GroundTruthDict:
        d: GroundTruthDict = {
            "id": self.id,
            "file": self.file,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "cwe": self.cwe,
            "acceptable_cwes": list(self.acceptable_cwes),
            "kind": self.kind,
            "severity": self.severity,
            "description": self.description,
            "vulnerable": self.vulnerable,
        }
        if self.related:
            d["related"] = [{"file": f, "line": n} for f, n in self.related]
        return d


def _entries_list(data: object, source: str) -> list[object]:
    if isinstance(data, Mapping) and isinstance(data.get("entries"), list):
        return list(data["entries"])
    if isinstance(data, list | tuple):
        return list(data)
    raise UsageError(f"{source}: expected a JSON list of entries or an object with 'entries'.")


def parse_ground_truth(data: object, source: str = "ground truth") -> list[GroundTruthEntry]:
    """Entries from parsed JSON: a list, or ``{"entries": [...]}``. Items that are
    already :class:`GroundTruthEntry` are kept as they are, so every caller may pass
    what it holds: this is the one reader of ground truth."""
    out: list[GroundTruthEntry] = []
    for i, d in enumerate(_entries_list(data, source)):
        out.append(d if isinstance(d, GroundTruthEntry) else _entry(i, d, source))
    return out


def _entry(i: int, d: object, source: str) -> GroundTruthEntry:
    if not isinstance(d, Mapping):
        raise UsageError(f"{source}: entry {i} is not a JSON object.")
    try:
        # Lines start at 1, and a range ends no earlier than it starts (line 0 is line 1).
        start = max(1, int(d.get("start_line", d.get("line"))))
        end = max(start, int(d.get("end_line", start)))
        file = str(d["file"]).strip().removeprefix("./")
        related = tuple(
            (str(r["file"]).strip().removeprefix("./"), int(r["line"]))
            for r in d.get("related") or ()
            if isinstance(r, Mapping) and "file" in r and "line" in r
        )
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(
            f"{source}: entry {i} needs 'file' and an integer 'start_line', and each "
            f"'related' place an integer 'line' ({e!r})."
        ) from None
    acceptable = tuple(c for c in (normalize_cwe(x) for x in d.get("acceptable_cwes") or []) if c)
    vulnerable = d.get("vulnerable", True)
    return GroundTruthEntry(
        id=str(d.get("id") or f"gt-{i}"),
        file=file,
        start_line=start,
        end_line=end,
        cwe=normalize_cwe(d.get("cwe")),
        acceptable_cwes=acceptable,
        kind=str(d.get("kind") or ""),
        severity=str(d.get("severity") or "medium"),
        description=str(d.get("description") or ""),
        vulnerable=vulnerable
        if isinstance(vulnerable, bool)
        else str(vulnerable).strip().lower() in ("true", "1", "yes"),
        related=related,
    )


def _read_json(path: Path, what: str) -> object:
    try:
        return json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{what} file not found: {path}. Check the path.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{what} file {path} is not valid JSON ({e}).") from None


def load_ground_truth(path: Path) -> list[GroundTruthEntry]:
    """Read a ``ground_truth.json`` file."""
    return parse_ground_truth(_read_json(path, "Ground truth"), str(path))


def parse_findings(data: object, source: str = "findings") -> list[Finding]:
    """Findings from parsed JSON: a list of finding dicts, or ``{"findings": [...]}``."""
    items = data.get("findings") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise UsageError(
            f"{source}: expected a JSON list of findings or an object with 'findings'."
        )
    out = []
    for i, d in enumerate(items):
        try:
            out.append(finding_from_dict(d))
        except (AttributeError, ValueError) as e:
            raise UsageError(
                f"{source}: finding {i} is invalid ({e}); each needs 'file' and 'line'."
            ) from None
    return out


def load_findings(path: Path) -> list[Finding]:
    """Read a findings JSON file (a list, or a report object with ``findings``)."""
    return parse_findings(_read_json(path, "Findings"), str(path))


# ---------------------------------------------------------------------------- scores


def precision_recall(tp: int, fp: int, fn: int) -> tuple[float, float]:
    """Precision and recall with the edge conventions in the module docstring."""
    precision = tp / (tp + fp) if tp + fp else (1.0 if fn == 0 else 0.0)
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall


def f_beta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """F-beta from counts; ``beta < 1`` weighs precision more."""
    p, r = precision_recall(tp, fp, fn)
    b2 = beta * beta
    return (1 + b2) * p * r / (b2 * p + r) if (b2 * p + r) > 0 else 0.0


@dataclass(frozen=True)
class Counts:
    """True positives, false positives and false negatives, with the rates they give."""

    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        return precision_recall(self.tp, self.fp, self.fn)[0]

    @property
    def recall(self) -> float:
        return precision_recall(self.tp, self.fp, self.fn)[1]

    @property
    def f1(self) -> float:
        return f_beta(self.tp, self.fp, self.fn)

    def f_beta(self, beta: float) -> float:
        return f_beta(self.tp, self.fp, self.fn, beta)

    def rates(self) -> dict[str, float]:
        d = {"tp": self.tp, "fp": self.fp, "fn": self.fn}
        return {**d, "precision": self.precision, "recall": self.recall, "f1": self.f1}


@dataclass(frozen=True)
class FamilyScore(Counts):
    family: str = ""


@dataclass(frozen=True)
class Match:
    finding: Finding
    entry: GroundTruthEntry
    distance: int  # lines between the ranges, 0 when they overlap
    exact_cwe: bool  # the CWE is the entry's own or listed as acceptable, not only same family


@dataclass(frozen=True)
class Unmatched:
    """A false positive. ``reason``: ``decoy`` (``entry`` is the decoy), ``duplicate``
    (would match a bug already credited to another finding) or ``no-match``."""

    finding: Finding
    reason: str
    entry: GroundTruthEntry | None = None


@dataclass(frozen=True)
class Score(Counts):
    """The outcome of grading one findings list against one ground truth."""

    decoys_hit: int = 0  # distinct decoys hit by at least one finding
    decoys_total: int = 0
    duplicates_dropped: int = 0
    tolerance: int = DEFAULT_TOLERANCE
    per_family: tuple[FamilyScore, ...] = ()
    matches: tuple[Match, ...] = ()
    unmatched: tuple[Unmatched, ...] = ()
    missed: tuple[GroundTruthEntry, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        """JSON-able summary with the pairs, false positives and missed entries."""
        return {
            **self.rates(),
            "decoys_hit": self.decoys_hit,
            "decoys_total": self.decoys_total,
            "duplicates_dropped": self.duplicates_dropped,
            "tolerance": self.tolerance,
            "per_family": {f.family: f.rates() for f in self.per_family},
            "matches": [
                {
                    "entry_id": m.entry.id,
                    "distance": m.distance,
                    "exact_cwe": m.exact_cwe,
                    "finding": m.finding.to_dict(),
                }
                for m in self.matches
            ],
            "false_positives": [
                {
                    "reason": u.reason,
                    "entry_id": u.entry.id if u.entry else None,
                    "finding": u.finding.to_dict(),
                }
                for u in self.unmatched
            ],
            "missed": [e.to_dict() for e in self.missed],
        }


# ---------------------------------------------------------------------------- matching


def _cwe_ok(f: Finding, e: GroundTruthEntry, table: FamilyTable) -> tuple[bool, bool]:
    """(acceptable, exact) for a finding's CWE (or kind) against an entry."""
    e_family = table.of_cwe(e.cwe) if e.cwe else table.of_kind(e.kind)
    if f.cwe is not None:
        if f.cwe == e.cwe or f.cwe in e.acceptable_cwes:
            return True, True
        if e.cwe is None and not e.acceptable_cwes and e_family is None:
            return True, False  # the entry names no class at all: location decides
        fam = table.of_cwe(f.cwe)
        return fam is not None and fam == e_family, False
    fam = table.of_kind(f.kind)
    if e.cwe is None and not e.acceptable_cwes and e_family is None:
        return True, False
    if fam is None:
        return False, False
    return fam == e_family or any(table.of_cwe(c) == fam for c in e.acceptable_cwes), False


def _distance(f: Finding, e: GroundTruthEntry, tolerance: int) -> int:
    f_end = min(f.end_line, f.start_line + tolerance)
    return max(0, e.start_line - f_end, f.start_line - e.end_line)


# (sort key: distance, inexact CWE, start-line gap, entry index), entry index, exact CWE
_Candidate = tuple[tuple[int, int, int, int], int, bool]


def _candidates(
    findings: list[Finding], entries: list[GroundTruthEntry], tolerance: int, table: FamilyTable
) -> dict[int, list[_Candidate]]:
    """finding index → [(sort key, entry index, exact)] of entries it may match, nearest first."""
    by_file: dict[str, list[int]] = defaultdict(list)
    for j, e in enumerate(entries):
        by_file[e.file].append(j)
    out: dict[int, list[_Candidate]] = {}
    for i, f in enumerate(findings):
        cands = []
        for j in by_file.get(f.file.removeprefix("./"), ()):
            e = entries[j]
            d = _distance(f, e, tolerance)
            if d > tolerance:
                continue
            ok, exact = _cwe_ok(f, e, table)
            if ok:
                cands.append(
                    ((d, 0 if exact else 1, abs(f.start_line - e.start_line), j), j, exact)
                )
        cands.sort()
        out[i] = cands
    return out


def _max_matching(n_findings: int, cands: dict[int, list[_Candidate]]) -> dict[int, int]:
    """Greedy by distance, then augmenting paths (Kuhn) for a maximum one-to-one matching."""
    edges = sorted((key, i, j) for i, cs in cands.items() for key, j, _ in cs)
    f_to_e: dict[int, int] = {}
    e_to_f: dict[int, int] = {}
    for _key, i, j in edges:
        if i not in f_to_e and j not in e_to_f:
            f_to_e[i], e_to_f[j] = j, i

    def augment(i: int, seen: set[int]) -> bool:
        for _key, j, _ in cands.get(i, ()):
            if j in seen:
                continue
            seen.add(j)
            if j not in e_to_f or augment(e_to_f[j], seen):
                f_to_e[i], e_to_f[j] = j, i
                return True
        return False

    for i in range(n_findings):
        if i not in f_to_e and cands.get(i):
            augment(i, set())
    return f_to_e


def grade(
    findings: list[Finding],
    entries: list[GroundTruthEntry],
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    families: FamilyTable | None = None,
    drop_duplicates: bool = True,
) -> Score:
    """Match findings to ground-truth entries one-to-one and count TP / FP / FN per family."""
    table = families or default_families()
    kept = dedupe(findings) if drop_duplicates else list(findings)
    vuln = [e for e in entries if e.vulnerable]
    decoys = [e for e in entries if not e.vulnerable]

    cands = _candidates(kept, vuln, tolerance, table)
    pairs = _max_matching(len(kept), cands)
    decoy_cands = _candidates(kept, decoys, tolerance, table)

    fam_counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    matches: list[Match] = []
    unmatched: list[Unmatched] = []
    decoys_hit: set[int] = set()
    for i, f in enumerate(kept):
        if i in pairs:
            e = vuln[pairs[i]]
            exact = next(x for _k, j, x in cands[i] if j == pairs[i])
            matches.append(Match(f, e, _distance(f, e, tolerance), exact))
            fam_counts[table.label(e.cwe, e.kind)][0] += 1
            continue
        fam_counts[table.label(f.cwe, f.kind)][1] += 1
        # A leftover finding nearer a decoy than any bug was fooled by the decoy; nearer a
        # bug already credited, it repeats that bug.
        if decoy_cands[i] and (not cands[i] or decoy_cands[i][0][0][:3] <= cands[i][0][0][:3]):
            j = decoy_cands[i][0][1]
            decoys_hit.add(j)
            unmatched.append(Unmatched(f, "decoy", decoys[j]))
        elif cands[i]:
            unmatched.append(Unmatched(f, "duplicate", vuln[cands[i][0][1]]))
        else:
            unmatched.append(Unmatched(f, "no-match"))
    matched_entries = set(pairs.values())
    missed = [e for j, e in enumerate(vuln) if j not in matched_entries]
    for e in missed:
        fam_counts[table.label(e.cwe, e.kind)][2] += 1

    return Score(
        tp=len(matches),
        fp=len(unmatched),
        fn=len(missed),
        decoys_hit=len(decoys_hit),
        decoys_total=len(decoys),
        duplicates_dropped=len(findings) - len(kept),
        tolerance=tolerance,
        per_family=tuple(
            FamilyScore(tp=v[0], fp=v[1], fn=v[2], family=k) for k, v in sorted(fam_counts.items())
        ),
        matches=tuple(matches),
        unmatched=tuple(unmatched),
        missed=tuple(missed),
    )
