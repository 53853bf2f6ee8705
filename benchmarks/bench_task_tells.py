"""Benchmark: how well reading-free detectors predict the labels of generated tasks.

An attacker who never reads code for meaning has four cheap signals: a grep for risky sinks,
the file name, the line position and the comments. Each is scored here as a detector on
held-out tasks against the ground truth, next to chance (the same number of flags placed at
random), so a detector that beats chance by much is a tell the generator must not have.

* ``grep:*`` — generic security-grep regexes (SQL built with ``%``/``format``/``+``/f-strings,
  ``shell=True``/``exec``, ``pickle``/``yaml.load``/``eval``, MD5/SHA-1, non-crypto random,
  long literal secrets, HTTP requests to a variable, ``open``/``sendFile`` of a joined path,
  HTML built by interpolation), written the way a reviewer's grep is, not against the
  generator's templates; ``grep:any`` is their union.
* ``file-name`` — learned on training seeds: a file is flagged when files of its base name held
  a bug often enough (the threshold that maximises F1 on the training seeds).
* ``line-position`` — learned: ``(base name, line)`` pairs that were inside bugs in training.
* ``comment`` — learned: comment and docstring texts that sat next to bugs in training.
* ``line-shape`` — learned: a template matcher over lines with identifiers, strings and
  numbers abstracted (the shapes that sat inside bugs in training).
* ``logistic`` — learned: a logistic regression over every reading-free line feature
  (:func:`line_features`: the line's shape, tokens and identifiers, its neighbours and
  enclosing definition, position, file size and name, comments); docs/reward.md, "Tells".

Line-level detectors count a flag as a hit when it lies within ``--tol`` lines of a bug's
range (decoys are negatives); recall is the share of bugs with at least one hit. The file
detector works per file (a file is positive when it holds a bug). Chance draws the detector's
number of flags uniformly over the same units, per task, and is averaged over draws.

    python benchmarks/bench_task_tells.py [--n 12] [--train 12] [--sizes small,medium,large]
        [--langs python,js,mixed] [--tol 3] [--train-seed 10000] [--test-seed 20000]
        [--ablate GROUP,...] [--by-kind] [--curve] [--show KIND,...]

``--ablate`` fits the logistic detector without some feature groups (``FEATURE_GROUPS``) and
``--by-kind`` prints its recall per bug kind: which features and kinds carry its F1;
``--curve`` its test F1 at every flagging share (the best is its F1 without the noise of
picking the share on training seeds), and ``--show KIND`` each bug and decoy of a kind with the
lines it flagged.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import re
import statistics
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from deeprepo.rl import GeneratedTask, generate_task, line_shape

CODE_EXT = (".py", ".js", ".ts")

# What a security grep looks for; one pattern per family, for Python and JavaScript alike.
GREPS: dict[str, re.Pattern[str]] = {
    "sql-format": re.compile(
        r"(?i)\b(select|insert|update|delete)\b.*(\"\s*%|'\s*%|\.format\(|\"\s*\+|'\s*\+|\+\s*\w+\s*\+|\$\{)"
        r"|\bf[\"'].*\b(SELECT|INSERT|UPDATE|DELETE|WHERE|ORDER BY)\b.*\{"
    ),
    "shell": re.compile(
        r"shell\s*=\s*True|os\.system\(|os\.popen\(|\bexec(Sync)?\(|spawn\(.*shell"
    ),
    "deserialize": re.compile(
        r"pickle\.loads?\(|yaml\.load\(|yaml\.unsafe_load|\beval\(|unserialize\(|new Function\(|vm\.run"
    ),
    "weak-hash": re.compile(r"(?i)\bmd5\b|\bsha1\b|createHash\(\s*[\"'](md5|sha1)"),
    "random": re.compile(
        r"\brandom\.(random|randint|choice|choices|randrange|uniform|sample|shuffle)\(|Math\.random\("
    ),
    "secret-literal": re.compile(
        r"(?i)(secret|passw(or)?d|token|api_?key|private_?key|auth)\w*[\"']?\s*[:=]\s*[\"'][A-Za-z0-9_\-+/=.]{16,}[\"']"
        r"|Bearer [A-Za-z0-9_\-.]{16,}"
    ),
    "http-variable": re.compile(
        r"requests\.(get|post|put|request)\(\s*[a-z_]\w*\s*[,)]|urlopen\(\s*[a-z_]\w*|"
        r"\bfetch\(\s*[a-z_]\w*\s*[,)]|axios\.(get|post)\(\s*[a-z_]\w*|https?\.get\(\s*[a-z_]\w*"
    ),
    "path-join-open": re.compile(
        r"open\(.*join\(|send_file\(|sendFile\(|readFile(Sync)?\(.*join\(|createReadStream\(.*join\("
        r"|path\.join\([^()]*,\s*[a-z_]\w*\s*\)"
    ),
    "html-interp": re.compile(r"(f[\"']|`).*<[a-zA-Z][^>]*>.*(\{|\$\{)"),
    "subprocess": re.compile(
        r"subprocess\.(run|call|Popen|check_output)\(|child_process|execFile\("
    ),
    "sql-execute-var": re.compile(r"\.execute\(\s*[a-z_]\w*\s*[,)]|\.query\(\s*[a-z_]\w*\s*[,)]"),
}
COMMENT_RE = re.compile(r"^\s*(?:#|//|/\*\*?|\*)\s?(.*?)\s*(?:\*/)?$")
DOCSTRING_RE = re.compile(r'^\s*(?:"""|\'\'\')(.*?)(?:"""|\'\'\')?\s*$')


@dataclass
class Flags:
    """Line flags per task: task index → {(file, line)}."""

    lines: dict[int, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))


@dataclass(frozen=True)
class Score:
    flags: int
    precision: float
    recall: float

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def code_lines(task: GeneratedTask) -> list[tuple[str, int, str]]:
    out = []
    for path, text in task.files.items():
        if path.endswith(CODE_EXT):
            for i, line in enumerate(text.split("\n"), 1):
                if line.strip():
                    out.append((path, i, line))
    return out


def bug_ranges(task: GeneratedTask, tol: int) -> dict[str, list[tuple[int, int, int]]]:
    """file → [(lo, hi, bug index)] with the tolerance applied."""
    out: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for k, e in enumerate(task.bugs):
        out[e.file].append((e.start_line - tol, e.end_line + tol, k))
    return out


def score_lines(
    tasks: list[GeneratedTask], flags: dict[int, set[tuple[str, int]]], tol: int
) -> Score:
    n_flags = hits = found = total = 0
    for t, task in enumerate(tasks):
        ranges = bug_ranges(task, tol)
        seen: set[int] = set()
        for f, line in flags.get(t, ()):
            n_flags += 1
            ks = [k for lo, hi, k in ranges.get(f, ()) if lo <= line <= hi]
            if ks:
                hits += 1
                seen.update(ks)
        found += len(seen)
        total += len(task.bugs)
    return Score(n_flags, hits / n_flags if n_flags else 0.0, found / total if total else 0.0)


def chance_lines(
    tasks: list[GeneratedTask], flags: dict[int, set[tuple[str, int]]], tol: int, draws: int = 5
) -> Score:
    """Same number of flags per task, uniformly over the task's non-blank code lines."""
    rng = random.Random(0)
    scores = []
    universe = [[(f, i) for f, i, _ in code_lines(t)] for t in tasks]
    for _ in range(draws):
        drawn = {
            t: set(rng.sample(universe[t], min(len(flags.get(t, ())), len(universe[t]))))
            for t in range(len(tasks))
        }
        scores.append(score_lines(tasks, drawn, tol))
    return Score(
        scores[0].flags,
        statistics.fmean(s.precision for s in scores),
        statistics.fmean(s.recall for s in scores),
    )


# --- detectors --------------------------------------------------------------------------------


def grep_flags(
    tasks: list[GeneratedTask], pattern: re.Pattern[str]
) -> dict[int, set[tuple[str, int]]]:
    out: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for t, task in enumerate(tasks):
        for f, i, line in code_lines(task):
            if pattern.search(line):
                out[t].add((f, i))
    return out


def base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _best_threshold(
    keys_train: Callable[[float], dict[int, set[tuple[str, int]]]],
    train: list[GeneratedTask],
    tol: int,
) -> float:
    best, best_f1 = 1.0, -1.0
    for thr in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        f1 = score_lines(train, keys_train(thr), tol).f1
        if f1 > best_f1:
            best, best_f1 = thr, f1
    return best


def position_detector(
    train: list[GeneratedTask], test: list[GeneratedTask], tol: int
) -> dict[int, set[tuple[str, int]]]:
    seen: dict[tuple[str, int], int] = defaultdict(int)
    bad: dict[tuple[str, int], int] = defaultdict(int)
    for task in train:
        in_bug = {(e.file, ln) for e in task.bugs for ln in range(e.start_line, e.end_line + 1)}
        for f, i, _ in code_lines(task):
            seen[(base(f), i)] += 1
            if (f, i) in in_bug:
                bad[(base(f), i)] += 1
    rate = {k: bad[k] / n for k, n in seen.items() if n >= 2 and bad[k]}

    def flags(tasks: list[GeneratedTask], thr: float) -> dict[int, set[tuple[str, int]]]:
        out: dict[int, set[tuple[str, int]]] = defaultdict(set)
        for t, task in enumerate(tasks):
            for f, i, _ in code_lines(task):
                if rate.get((base(f), i), 0.0) >= thr:
                    out[t].add((f, i))
        return out

    thr = _best_threshold(lambda x: flags(train, x), train, tol)
    return flags(test, thr)


def comment_text(line: str) -> str | None:
    m = DOCSTRING_RE.match(line)
    if m and m.group(1).strip():
        return m.group(1).strip().lower()
    if "#" in line and not line.lstrip().startswith(("#", "//")):
        tail = line.split("#", 1)[1].strip()  # trailing comment (rough: ignores '#' in strings)
        return tail.lower() or None
    m = COMMENT_RE.match(line)
    if m and m.group(1).strip():
        return m.group(1).strip().lower()
    return None


def shape_detector(
    train: list[GeneratedTask], test: list[GeneratedTask], tol: int
) -> dict[int, set[tuple[str, int]]]:
    """A template matcher: line shapes (identifiers, strings, numbers abstracted) that sat
    inside bugs in training."""
    seen: dict[str, int] = defaultdict(int)
    bad: dict[str, int] = defaultdict(int)
    for task in train:
        in_bug = {(e.file, ln) for e in task.bugs for ln in range(e.start_line, e.end_line + 1)}
        for f, i, line in code_lines(task):
            sh = line_shape(line)
            seen[sh] += 1
            bad[sh] += (f, i) in in_bug
    rate = {sh: bad[sh] / n for sh, n in seen.items() if n >= 2 and bad[sh]}

    def flags(tasks: list[GeneratedTask], thr: float) -> dict[int, set[tuple[str, int]]]:
        out: dict[int, set[tuple[str, int]]] = defaultdict(set)
        for t, task in enumerate(tasks):
            for f, i, line in code_lines(task):
                if rate.get(line_shape(line), 0.0) >= thr:
                    out[t].add((f, i))
        return out

    thr = _best_threshold(lambda x: flags(train, x), train, tol)
    return flags(test, thr)


def comment_detector(
    train: list[GeneratedTask], test: list[GeneratedTask], tol: int
) -> dict[int, set[tuple[str, int]]]:
    seen: dict[str, int] = defaultdict(int)
    bad: dict[str, int] = defaultdict(int)
    for task in train:
        ranges = bug_ranges(task, tol)
        for f, i, line in code_lines(task):
            c = comment_text(line)
            if c is None:
                continue
            seen[c] += 1
            if any(lo <= i <= hi for lo, hi, _ in ranges.get(f, ())):
                bad[c] += 1
    rate = {c: bad[c] / n for c, n in seen.items() if n >= 2 and bad[c]}

    def flags(tasks: list[GeneratedTask], thr: float) -> dict[int, set[tuple[str, int]]]:
        out: dict[int, set[tuple[str, int]]] = defaultdict(set)
        for t, task in enumerate(tasks):
            for f, i, line in code_lines(task):
                c = comment_text(line)
                if c is not None and rate.get(c, 0.0) >= thr:
                    out[t].add((f, i))
        return out

    thr = _best_threshold(lambda x: flags(train, x), train, tol)
    return flags(test, thr)


def file_scores(
    train: list[GeneratedTask], test: list[GeneratedTask]
) -> tuple[Score, Score, Score]:
    """The file-name detector, its chance, and the same number of the largest files, per file
    (bigger files hold more code, so they hold more bugs: the size row says how much of the
    name's lead is size alone)."""
    seen: dict[str, int] = defaultdict(int)
    bad: dict[str, int] = defaultdict(int)
    for task in train:
        buggy = {e.file for e in task.bugs}
        for f in task.files:
            if f.endswith(CODE_EXT):
                seen[base(f)] += 1
                bad[base(f)] += f in buggy
    rate = {b: bad[b] / n for b, n in seen.items() if n >= 2}

    def score(tasks: list[GeneratedTask], pick: Callable[[int, list[str]], set[str]]) -> Score:
        n_flags = hits = found = total = 0
        for t, task in enumerate(tasks):
            files = [f for f in task.files if f.endswith(CODE_EXT)]
            buggy = {e.file for e in task.bugs}
            chosen = pick(t, files)
            n_flags += len(chosen)
            hits += len(chosen & buggy)
            found += len(chosen & buggy)
            total += len(buggy)
        return Score(n_flags, hits / n_flags if n_flags else 0.0, found / total if total else 0.0)

    def by_name(thr: float) -> Callable[[int, list[str]], set[str]]:
        return lambda _t, files: {f for f in files if rate.get(base(f), 0.0) >= thr}

    thr = max(
        (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
        key=lambda x: score(train, by_name(x)).f1,
    )
    det = score(test, by_name(thr))
    counts = [
        len(by_name(thr)(t, [f for f in task.files if f.endswith(CODE_EXT)]))
        for t, task in enumerate(test)
    ]
    rng = random.Random(0)
    draws = []
    for _ in range(20):
        draws.append(
            score(
                test,
                lambda t, files: set(rng.sample(sorted(files), min(counts[t], len(files)))),
            )
        )
    chance = Score(
        det.flags,
        statistics.fmean(s.precision for s in draws),
        statistics.fmean(s.recall for s in draws),
    )

    def largest(t: int, files: list[str]) -> set[str]:
        by_size = sorted(files, key=lambda f: (-test[t].files[f].count("\n"), f))
        return set(by_size[: counts[t]])

    return det, chance, score(test, largest)


# --- the learned detector ---------------------------------------------------------------------

_DIM = 1 << 20
# The string and identifier patterns of ``line_shape``, here to read features out of a line.
_STR_RE = re.compile(r"""[rbfu]*("|'|`)(?:\\.|(?!\1).)*\1""")
_ID_RE = re.compile(r"[A-Za-z_$][\w$]*")
_WORD_RE = re.compile(r"[a-z]+|[A-Z][a-z]*|\d+")
_DEF_RE = re.compile(
    r"^\s*(?:async\s+)?(?:def|function|class)\b|=>\s*\{?\s*$|^\s*\w+\s*\([^)]*\)\s*\{$"
)


def _h(feature: str) -> int:
    return zlib.crc32(feature.encode()) % _DIM


def _subwords(line: str) -> set[str]:
    return {w.lower() for ident in _ID_RE.findall(line) for w in _WORD_RE.findall(ident)}


def _bucket(x: float) -> int:
    return int(math.log2(x + 1))


# Feature groups by prefix, for ``--ablate`` (which group carries the detector's F1).
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "shape": ("s:", "t:", "b:"),
    "ids": ("id:", "str:"),
    "neighbours": ("p2:", "p1:", "n1:", "n2:"),
    "def": ("def:", "ddist:", "did:"),
    "layout": ("ind:", "len:"),
    "position": ("pos:", "line:"),
    "size": ("size:",),
    "name": ("fn:", "fw:", "dir:", "ext:"),
    "comment": ("comment", "cw:"),
}
_ABLATED: list[tuple[str, ...]] = []
_CURVE: list[str] = []  # ``--curve``: the logistic detector's test F1 per flagging share


def line_features(path: str, lines: list[str], i: int) -> list[str]:
    """What a reading-free attacker sees of line ``i`` (0-based) of ``path``: its shape, its
    tokens and identifiers, the shapes of its neighbours and of the enclosing definition, its
    position and indentation, the file's size and name, and any comment (less the groups
    that ``--ablate`` removes)."""
    feats = _line_features(path, lines, i)
    if not _ABLATED:
        return feats
    drop = tuple(p for g in _ABLATED for p in g)
    return [f for f in feats if not f.startswith(drop)]


def _line_features(path: str, lines: list[str], i: int) -> list[str]:
    line = lines[i]
    shape = line_shape(line)
    toks = shape.split()
    out = [
        f"s:{shape}",
        f"ind:{(len(line) - len(line.lstrip())) // 2}",
        f"len:{_bucket(len(line))}",
    ]
    out += [f"t:{t}" for t in toks] + [f"b:{a} {b}" for a, b in itertools.pairwise(toks)]
    out += [f"id:{w}" for w in _subwords(_STR_RE.sub(" ", line))]
    out += [f"str:{w}" for m in _STR_RE.finditer(line) for w in _subwords(m.group(0))]
    for d, tag in ((-2, "p2"), (-1, "p1"), (1, "n1"), (2, "n2")):
        j = i + d
        near = line_shape(lines[j]) if 0 <= j < len(lines) else "<edge>"
        out.append(f"{tag}:{near}")
    for j in range(i - 1, max(i - 40, -1), -1):
        if _DEF_RE.search(lines[j]):
            out += [f"def:{line_shape(lines[j])}", f"ddist:{_bucket(i - j)}"]
            out += [f"did:{w}" for w in _subwords(lines[j])]
            break
    n = len(lines)
    out += [f"pos:{10 * i // max(n, 1)}", f"line:{_bucket(i)}", f"size:{_bucket(n)}"]
    name = base(path)
    out += [f"fn:{name}", *(f"fw:{w}" for w in _subwords(name.rsplit(".", 1)[0]))]
    out += [f"dir:{w}" for w in _subwords("/".join(path.split("/")[:-1]))]
    out.append(f"ext:{name.rsplit('.', 1)[-1]}")
    c = comment_text(line)
    if c is not None:
        out += ["comment", *(f"cw:{w}" for w in _WORD_RE.findall(c))]
    return out


@dataclass
class LineMatrix:
    """Hashed binary features of every non-blank code line of some tasks (CSR layout)."""

    keys: list[tuple[int, str, int]]  # (task index, file, 1-based line)
    indptr: Any  # numpy int64 array, len(keys) + 1
    indices: Any  # numpy int32 array
    labels: Any  # numpy float64 array: 1.0 inside a bug's range


def featurize(tasks: list[GeneratedTask]) -> LineMatrix:
    import numpy as np

    keys: list[tuple[int, str, int]] = []
    ptr, idx, lab = [0], [], []
    for t, task in enumerate(tasks):
        in_bug = {(e.file, ln) for e in task.bugs for ln in range(e.start_line, e.end_line + 1)}
        for path, text in task.files.items():
            if not path.endswith(CODE_EXT):
                continue
            lines = text.split("\n")
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                feats = {_h(f) for f in line_features(path, lines, i)}
                idx.extend(feats)
                ptr.append(len(idx))
                keys.append((t, path, i + 1))
                lab.append(1.0 if (path, i + 1) in in_bug else 0.0)
    return LineMatrix(
        keys, np.array(ptr, dtype=np.int64), np.array(idx, dtype=np.int32), np.array(lab)
    )


def _scores(m: LineMatrix, w: Any, bias: float) -> Any:
    import numpy as np

    sums = np.add.reduceat(w[m.indices], m.indptr[:-1]) if len(m.indices) else np.zeros(0)
    return 1.0 / (1.0 + np.exp(-(sums + bias)))


def fit_logistic(
    m: LineMatrix, epochs: int = 60, l2: float = 1e-6, lr: float = 0.5
) -> tuple[Any, float]:
    """Class-balanced logistic regression by full-batch AdaGrad on the hashed features."""
    import numpy as np

    y = m.labels
    pos = max(float(y.sum()), 1.0)
    weight = np.where(y > 0, len(y) / (2 * pos), len(y) / (2 * max(len(y) - pos, 1.0)))
    row = np.repeat(np.arange(len(y)), np.diff(m.indptr))
    w, bias = np.zeros(_DIM), 0.0
    g2, b2 = np.full(_DIM, 1e-8), 1e-8
    for _ in range(epochs):
        err = (_scores(m, w, bias) - y) * weight / len(y)
        grad = np.bincount(m.indices, weights=err[row], minlength=_DIM) + l2 * w
        g2 += grad * grad
        w -= lr * grad / np.sqrt(g2)
        gb = float(err.sum())
        b2 += gb * gb
        bias -= lr * gb / math.sqrt(b2)
    return w, bias


def _flags_at(m: LineMatrix, p: Any, thr: float) -> dict[int, set[tuple[str, int]]]:
    out: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for k in (p >= thr).nonzero()[0]:
        t, f, ln = m.keys[int(k)]
        out[t].add((f, ln))
    return out


# The shares of lines the logistic detector may flag (one is picked on training seeds).
_SHARES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2)


def learned_detector(
    train: list[GeneratedTask], test: list[GeneratedTask], tol: int
) -> dict[int, set[tuple[str, int]]]:
    """Logistic regression on :func:`line_features`: fitted on two thirds of the training
    tasks, its flagging threshold chosen for the best ±tol F1 on the last third, then refitted
    on all of them. The test tasks are never seen before they are scored."""
    import numpy as np

    m = featurize(train)
    task_of = np.array([t for t, _f, _ln in m.keys], dtype=np.int64)
    in_val = task_of % 3 == 2 if len(train) >= 3 else np.ones(len(task_of), dtype=bool)
    fit, val = _rows(m, ~in_val) if len(train) >= 3 else m, _rows(m, in_val)
    val_tasks = sorted({m.keys[int(k)][0] for k in in_val.nonzero()[0]})
    renumber = {t: k for k, t in enumerate(val_tasks)}
    val = LineMatrix(
        [(renumber[t], f, ln) for t, f, ln in val.keys], val.indptr, val.indices, val.labels
    )
    pv = _scores(val, *fit_logistic(fit))
    held = [train[t] for t in val_tasks]
    cands = sorted(set(np.quantile(pv, [1 - q for q in _SHARES]).tolist()))
    thr = max(cands, key=lambda x: score_lines(held, _flags_at(val, pv, x), tol).f1)
    q = float((pv >= thr).mean())  # the share of lines flagged, carried over to the test set
    mt = featurize(test)
    pt = _scores(mt, *fit_logistic(m))
    if _CURVE:  # diagnostic: the test F1 at each share, which the detector never sees
        for share in _SHARES:
            f = _flags_at(mt, pt, float(np.quantile(pt, 1 - share)))
            sc = score_lines(test, f, tol)
            _CURVE.append(f"| {share:.3f} | {sc.precision:.3f} | {sc.recall:.3f} | {sc.f1:.3f} |")
    return _flags_at(mt, pt, float(np.quantile(pt, 1 - q)) if len(pt) else 1.0)


def _rows(m: LineMatrix, mask: Any) -> LineMatrix:
    """The rows of ``m`` where ``mask`` holds."""
    import numpy as np

    rows = mask.nonzero()[0]
    lens = np.diff(m.indptr)[rows]
    starts = m.indptr[rows]
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    take = np.repeat(starts - ptr[:-1], lens) + np.arange(int(ptr[-1]))
    return LineMatrix([m.keys[int(k)] for k in rows], ptr, m.indices[take], m.labels[rows])


# --- running ----------------------------------------------------------------------------------


def generate(seeds: Iterable[int], sizes: list[str], langs: list[str]) -> list[GeneratedTask]:
    return [generate_task(s, size, lang) for size in sizes for lang in langs for s in seeds]


def row(name: str, det: Score, chance: Score) -> str:
    lift = det.precision / chance.precision if chance.precision else float("inf")
    return (
        f"| {name:<22} | {det.flags:>6} | {det.precision:5.3f} | {det.recall:5.3f} | {det.f1:5.3f} "
        f"| {chance.precision:5.3f} | {chance.f1:5.3f} | {lift:5.2f} | {det.f1 - chance.f1:+6.3f} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=12, help="held-out tasks per (size, lang)")
    ap.add_argument("--train", type=int, default=12, help="training tasks per (size, lang)")
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--langs", default="python,js,mixed")
    ap.add_argument("--tol", type=int, default=3, help="lines of slack around a bug's range")
    ap.add_argument("--train-seed", type=int, default=10_000, help="first training seed")
    ap.add_argument("--test-seed", type=int, default=20_000, help="first held-out seed")
    ap.add_argument(
        "--ablate",
        default="",
        help=f"feature groups the logistic detector goes without ({','.join(FEATURE_GROUPS)})",
    )
    ap.add_argument(
        "--by-kind", action="store_true", help="the logistic detector's recall per bug kind"
    )
    ap.add_argument(
        "--curve",
        action="store_true",
        help="the logistic detector's held-out F1 at every flagging share it may pick (diagnostic:"
        " its F1 moves with the share picked on the training seeds)",
    )
    ap.add_argument(
        "--show",
        default="",
        help="kinds whose bugs and decoys are printed with the logistic detector's flags (diagnostic)",
    )
    args = ap.parse_args(argv)
    for g in filter(None, args.ablate.split(",")):
        if g not in FEATURE_GROUPS:
            ap.error(f"unknown feature group {g!r}; choose from {', '.join(FEATURE_GROUPS)}")
        _ABLATED.append(FEATURE_GROUPS[g])
    if args.curve:
        _CURVE.append("| share | prec | rec | F1 |\n|---:|---:|---:|---:|")
    sizes, langs = args.sizes.split(","), args.langs.split(",")
    t0 = time.perf_counter()
    train_seeds = range(args.train_seed, args.train_seed + args.train)
    test_seeds = range(args.test_seed, args.test_seed + args.n)
    if set(train_seeds) & set(test_seeds):
        ap.error("the training and held-out seed ranges overlap; move --test-seed")
    train = generate(train_seeds, sizes, langs)
    test = generate(test_seeds, sizes, langs)
    gen_s = time.perf_counter() - t0
    tol = args.tol
    n_bugs = sum(len(t.bugs) for t in test)
    n_lines = sum(len(code_lines(t)) for t in test)
    print(
        f"held-out: {len(test)} tasks ({','.join(sizes)} × {','.join(langs)}), {n_bugs} bugs, "
        f"{sum(len(t.decoys) for t in test)} decoys, {n_lines} non-blank code lines; "
        f"training: {len(train)} tasks; tolerance ±{tol} lines; generated in {gen_s:.1f} s"
    )
    print()
    print(
        "| detector               |  flags |  prec |   rec |    F1 | ch.P  | ch.F1 |  lift | ΔF1    |"
    )
    print(
        "|------------------------|-------:|------:|------:|------:|------:|------:|------:|-------:|"
    )
    union: dict[int, set[tuple[str, int]]] = defaultdict(set)
    for name, pat in GREPS.items():
        fl = grep_flags(test, pat)
        for t, s in fl.items():
            union[t] |= s
        print(row(f"grep:{name}", score_lines(test, fl, tol), chance_lines(test, fl, tol)))
    print(row("grep:any", score_lines(test, union, tol), chance_lines(test, union, tol)))
    det, chance, size = file_scores(train, test)
    print(row("file-name (per file)", det, chance))
    print(row("file-size (per file)", size, chance))
    fl = position_detector(train, test, tol)
    print(row("line-position", score_lines(test, fl, tol), chance_lines(test, fl, tol)))
    fl = comment_detector(train, test, tol)
    print(row("comment", score_lines(test, fl, tol), chance_lines(test, fl, tol)))
    fl = shape_detector(train, test, tol)
    print(row("line-shape (learned)", score_lines(test, fl, tol), chance_lines(test, fl, tol)))
    fl = learned_detector(train, test, tol)
    print(row("logistic (learned)", score_lines(test, fl, tol), chance_lines(test, fl, tol)))
    if _CURVE:
        print()
        print("\n".join(_CURVE))
    if args.by_kind:
        print()
        print(by_kind(test, fl, tol))
    for kind in filter(None, args.show.split(",")):
        print()
        print(show_kind(test, fl, kind, tol))
    reuse, per_k, n_big = shape_reuse(test)
    clean_hits = _clean_file_hits(test)
    print()
    print(
        f"template reuse: {reuse:.0%} of a task's distinct line shapes appear in another task; "
        f"the largest task has {per_k:.0f} distinct shapes per 1,000 of its {n_big} code lines"
    )
    print(
        f"clean code files using a risky API (any grep hit, no bug or decoy in the file): "
        f"{clean_hits[0]} of {clean_hits[1]} ({clean_hits[0] / max(clean_hits[1], 1):.0%})"
    )
    return 0


def by_kind(tasks: list[GeneratedTask], flags: dict[int, set[tuple[str, int]]], tol: int) -> str:
    """Per bug kind: bugs, the share the flags find, and flags on that kind's decoys (a kind
    whose bugs are found and whose decoys are not is a tell of that kind)."""
    bugs: dict[str, int] = defaultdict(int)
    found: dict[str, int] = defaultdict(int)
    decoys: dict[str, int] = defaultdict(int)
    decoy_hit: dict[str, int] = defaultdict(int)
    for t, task in enumerate(tasks):
        fl = flags.get(t, set())
        for e in task.ground_truth:
            hit = any((e.file, ln) in fl for ln in range(e.start_line - tol, e.end_line + tol + 1))
            if e.vulnerable:
                bugs[e.kind] += 1
                found[e.kind] += hit
            else:
                decoys[e.kind] += 1
                decoy_hit[e.kind] += hit
    out = ["| kind | bugs | found | decoys | decoys flagged |", "|---|---:|---:|---:|---:|"]
    for k in sorted(bugs, key=lambda k: -found[k] / bugs[k]):
        out.append(
            f"| {k} | {bugs[k]} | {found[k] / bugs[k]:.2f} | {decoys[k]} "
            f"| {decoy_hit[k] / decoys[k] if decoys[k] else 0:.2f} |"
        )
    return "\n".join(out)


def show_kind(
    tasks: list[GeneratedTask], flags: dict[int, set[tuple[str, int]]], kind: str, tol: int
) -> str:
    """Every bug and decoy of ``kind`` with the lines around it, ``>`` before a flagged line
    (a diagnostic: what the detector sees in the entries it finds and misses)."""
    out = []
    for t, task in enumerate(tasks):
        fl = flags.get(t, set())
        for e in task.ground_truth:
            if e.kind != kind:
                continue
            lines = task.files[e.file].split("\n")
            lo, hi = e.start_line - tol, e.end_line + tol
            hit = any((e.file, ln) in fl for ln in range(lo, hi + 1))
            label = "BUG" if e.vulnerable else "decoy"
            out.append(f"--- {label} {'found' if hit else 'missed'} {e.file}:{e.start_line}")
            for ln in range(max(lo - 3, 1), min(hi + 3, len(lines)) + 1):
                mark = ">" if (e.file, ln) in fl else " "
                inside = "|" if e.start_line <= ln <= e.end_line else " "
                out.append(f"{mark}{inside}{ln:5} {lines[ln - 1]}")
    return "\n".join(out)


def shape_reuse(tasks: list[GeneratedTask]) -> tuple[float, float, int]:
    """Mean share of a task's distinct line shapes found in the next task of the same language,
    and, for the largest task, its distinct shapes per 1,000 code lines and its line count."""
    shapes = [{line_shape(ln) for _f, _i, ln in code_lines(t)} for t in tasks]
    shares = []
    for k, t in enumerate(tasks):
        nxt = next((j for j in range(k + 1, len(tasks)) if tasks[j].lang == t.lang), None)
        if nxt is not None and shapes[k]:
            shares.append(len(shapes[k] & shapes[nxt]) / len(shapes[k]))
    big = max(range(len(tasks)), key=lambda k: len(code_lines(tasks[k])))
    n_big = len(code_lines(tasks[big]))
    return statistics.fmean(shares), len(shapes[big]) * 1000 / n_big, n_big


def _clean_file_hits(tasks: list[GeneratedTask]) -> tuple[int, int]:
    hit = total = 0
    for task in tasks:
        labelled = {e.file for e in task.ground_truth}
        for path, text in task.files.items():
            if not path.endswith(CODE_EXT) or path in labelled:
                continue
            total += 1
            hit += any(p.search(text) for p in GREPS.values())
    return hit, total


if __name__ == "__main__":
    sys.exit(main())
