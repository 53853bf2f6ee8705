"""Statistics for comparing runs: means, bootstrap CIs and permutation tests, pure Python.

Conventions:

* :func:`std` is the *population* standard deviation (divide by n), as the summaries
  researchers already publish (``reward: avg - 0.785, std - 0.100``) use it.
* The difference is always ``b - a`` ("from a to b").
* Paired when both runs hold the same examples (at least two): the unit is the example,
  its value the mean over its rollouts, and the test works on per-example differences
  (bootstrap over examples, sign-flip permutations). Otherwise unpaired over rollouts
  (independent bootstrap of each side, label permutations).
* CIs are percentile bootstrap CIs. Permutation p-values are two-sided; when the number
  of distinct permutations is at most the number asked for, every one is enumerated and
  the p-value is exact, else it is the Monte Carlo ``(1 + hits) / (1 + permutations)``.
* Everything is seeded: the same inputs and seed give the same numbers.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_RESAMPLES = 10_000
DEFAULT_PERMUTATIONS = 10_000
MIN_ROLLOUTS = 10


def mean(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("mean of an empty sample")
    return math.fsum(xs) / len(xs)


def std(xs: Sequence[float]) -> float:
    """Population standard deviation (divide by n)."""
    m = mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / len(xs))


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of an already sorted sample."""
    if not sorted_xs:
        raise ValueError("quantile of an empty sample")
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def _ci(stats: list[float], level: float) -> tuple[float, float]:
    stats.sort()
    tail = (1.0 - level) / 2
    return quantile(stats, tail), quantile(stats, 1.0 - tail)


def bootstrap_diff_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Unpaired percentile-bootstrap CI of ``mean(b) - mean(a)``."""
    rng = random.Random(seed)
    na, nb = len(a), len(b)
    diffs = [
        math.fsum(rng.choices(b, k=nb)) / nb - math.fsum(rng.choices(a, k=na)) / na
        for _ in range(resamples)
    ]
    return _ci(diffs, level)


def paired_bootstrap_ci(
    d: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of paired differences ``d``."""
    rng = random.Random(seed)
    n = len(d)
    return _ci([math.fsum(rng.choices(d, k=n)) / n for _ in range(resamples)], level)


def _at_least(value: float, observed: float) -> bool:
    # Sums in another order differ in the last bits; ties must still count as ties.
    return abs(value) >= abs(observed) - 1e-12 * max(1.0, abs(observed))


def permutation_pvalue(
    a: Sequence[float],
    b: Sequence[float],
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> float:
    """Two-sided p-value of ``mean(b) - mean(a)`` under random relabelling."""
    na, nb = len(a), len(b)
    pool = [*a, *b]
    total = math.fsum(pool)
    observed = mean(b) - mean(a)

    def stat(sum_a: float) -> float:
        return (total - sum_a) / nb - sum_a / na

    if math.comb(na + nb, na) <= permutations:
        combos = itertools.combinations(pool, na)
        hits = count = 0
        for c in combos:
            count += 1
            hits += _at_least(stat(math.fsum(c)), observed)
        return hits / count
    rng = random.Random(seed)
    hits = sum(
        _at_least(stat(math.fsum(rng.sample(pool, na))), observed) for _ in range(permutations)
    )
    return (1 + hits) / (1 + permutations)


def paired_permutation_pvalue(
    d: Sequence[float], *, permutations: int = DEFAULT_PERMUTATIONS, seed: int = 0
) -> float:
    """Two-sided sign-flip p-value of the mean of paired differences ``d``."""
    n = len(d)
    observed = mean(d)
    if 2**n <= permutations:
        hits = sum(
            _at_least(
                math.fsum(x if s else -x for x, s in zip(d, signs, strict=True)) / n, observed
            )
            for signs in itertools.product((True, False), repeat=n)
        )
        return hits / float(1 << n)
    rng = random.Random(seed)
    hits = 0
    for _ in range(permutations):
        bits = rng.getrandbits(n)
        s = math.fsum(x if (bits >> i) & 1 else -x for i, x in enumerate(d))
        hits += _at_least(s / n, observed)
    return (1 + hits) / (1 + permutations)


@dataclass(frozen=True)
class DiffTest:
    """``b - a`` with its bootstrap CI and permutation p-value."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    paired: bool
    n_a: int  # rollouts in a
    n_b: int  # rollouts in b
    n_units: int  # examples when paired, else n_a + n_b rollouts
    level: float = 0.95

    @property
    def ci_includes_zero(self) -> bool:
        return self.ci_low <= 0.0 <= self.ci_high


def _example_means(values: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for v, i in zip(values, ids, strict=True):
        groups[i].append(v)
    return {i: mean(vs) for i, vs in groups.items()}


def diff_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    a_ids: Sequence[str] | None = None,
    b_ids: Sequence[str] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    level: float = 0.95,
) -> DiffTest:
    """Compare two samples, paired by example id when both hold the same examples."""
    if not a or not b:
        raise ValueError("both samples need at least one value")
    if a_ids is not None and b_ids is not None:
        ma, mb = _example_means(a, a_ids), _example_means(b, b_ids)
        if set(ma) == set(mb) and len(ma) >= 2:
            keys = sorted(ma)
            d = [mb[k] - ma[k] for k in keys]
            lo, hi = paired_bootstrap_ci(d, resamples=resamples, seed=seed, level=level)
            p = paired_permutation_pvalue(d, permutations=permutations, seed=seed + 1)
            return DiffTest(mean(d), lo, hi, p, True, len(a), len(b), len(keys), level)
    lo, hi = bootstrap_diff_ci(a, b, resamples=resamples, seed=seed, level=level)
    p = permutation_pvalue(a, b, permutations=permutations, seed=seed + 1)
    return DiffTest(mean(b) - mean(a), lo, hi, p, False, len(a), len(b), len(a) + len(b), level)


def separation_warning(test: DiffTest, *, min_rollouts: int = MIN_ROLLOUTS) -> str | None:
    """Why this comparison cannot separate the runs, or ``None`` when it can.

    Too small: fewer than ``min_rollouts`` rollouts on a side, or a CI that includes 0.
    """
    reasons = []
    n = min(test.n_a, test.n_b)
    if n < min_rollouts:
        reasons.append(
            f"only {n} rollouts on one side (fewer than {min_rollouts}); run more examples or "
            "rollouts (-n / -r)"
        )
    if test.ci_includes_zero:
        reasons.append(
            f"the {test.level:.0%} CI [{test.ci_low:+.3f}, {test.ci_high:+.3f}] includes 0 "
            f"(p = {test.p_value:.3g})"
        )
    if not reasons:
        return None
    return "sample too small to separate the runs: " + "; ".join(reasons)
