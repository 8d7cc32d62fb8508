"""Bootstrap statistics for per-question scores: a CI of a mean, a paired test of two methods.

Every table cell that is a mean over questions carries a 95% interval, and a claim that one
method beats another on the same questions carries a p-value (METRICS.md). Questions are the
resampling unit; the seed is fixed so that a table rebuilt from the same result files prints the
same intervals. All resamples are drawn and averaged at once with numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _scores(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    """A non-empty 1-D float array of finite scores."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of scores")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array


def _resampled_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Means of ``n_resamples`` samples of ``values`` drawn with replacement."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, values.size, size=(n_resamples, values.size))
    return values[indices].mean(axis=1)


@dataclass(frozen=True)
class ConfidenceInterval:
    """A mean with its bootstrap interval ``[low, high]``."""

    mean: float
    low: float
    high: float


def bootstrap_ci(
    scores: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile bootstrap interval of a mean over questions.

    Args:
        scores: one score per question.
        confidence: coverage of the interval, in (0, 1).
        n_resamples: bootstrap samples of the questions, drawn with replacement.
        seed: seed of numpy's ``default_rng``; fixed so tables are reproducible.

    Returns:
        The sample mean and the ``(1 − confidence) / 2`` and ``(1 + confidence) / 2`` quantiles
        (numpy's default linear interpolation) of the resampled means.

    >>> interval = bootstrap_ci([0.0, 1.0] * 50)
    >>> interval.mean, interval.low < 0.5 < interval.high
    (0.5, True)
    >>> bootstrap_ci([0.3, 0.3, 0.3])
    ConfidenceInterval(mean=0.3, low=0.3, high=0.3)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    values = _scores(scores, "scores")
    means = _resampled_means(values, n_resamples, seed)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return ConfidenceInterval(mean=float(values.mean()), low=float(low), high=float(high))


def paired_bootstrap_pvalue(
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> float:
    """Two-sided paired bootstrap p-value for "methods A and B have the same mean score".

    With per-question differences ``d = a − b`` and observed mean ``δ = mean(d)``, the questions
    are resampled B times (the same questions for both methods, so the pairing is kept), giving
    means ``δ*_1 .. δ*_B``. Centred at ``δ`` they approximate the null distribution, and

        p = (1 + #{b : |δ*_b − δ| >= |δ|}) / (B + 1)

    (the +1 counts the observed sample, so p is never 0; with ``δ = 0``, p = 1).

    Args:
        scores_a: method A's score per question.
        scores_b: method B's score on the same questions, in the same order.
        n_resamples: B.
        seed: seed of numpy's ``default_rng``.

    Returns:
        The p-value in (0, 1].

    >>> paired_bootstrap_pvalue([1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    1.0
    >>> paired_bootstrap_pvalue([1.0] * 40, [0.0] * 40) < 0.01
    True
    """
    a = _scores(scores_a, "scores_a")
    b = _scores(scores_b, "scores_b")
    if a.size != b.size:
        raise ValueError(f"paired scores differ in length: {a.size} vs {b.size}")
    differences = a - b
    observed = differences.mean()
    means = _resampled_means(differences, n_resamples, seed)
    extreme = np.count_nonzero(np.abs(means - observed) >= abs(observed))
    return float((1 + extreme) / (n_resamples + 1))
