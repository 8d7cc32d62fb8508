"""Bootstrap statistics for per-question scores: a CI of a mean, a paired test of two methods.

Both resample whole conversations (their questions share a memory) with the ratio estimator, or
questions where :func:`resampling_unit` says so: docs/scoring.md, "Intervals and p-values". The
seed is fixed so a table rebuilt from the same files prints the same intervals."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

#: The units a bootstrap can resample: whole conversations (the default), or single questions.
INTERVAL_UNITS = ("conversation", "question")
#: Fewest conversations a cluster bootstrap resamples: with G clusters there are only C(2G − 1, G)
#: distinct resamples (126 for G = 5), too few to estimate the spread. Below it a cell resamples
#: questions, and says so.
MIN_CLUSTERS = 5


def _scores(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    """A non-empty 1-D float array of finite scores."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of scores")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array


def _cluster_index(clusters: Sequence[Hashable], size: int) -> np.ndarray:
    """Each score's cluster as an index 0..G−1, clusters numbered in order of first appearance
    (so distinct labels number the scores 0..n−1 and draw exactly as unclustered scores do)."""
    if len(clusters) != size:
        raise ValueError(f"clusters must give one label per score: {len(clusters)} vs {size}")
    numbers: dict[Hashable, int] = {}
    return np.array([numbers.setdefault(label, len(numbers)) for label in clusters], dtype=np.intp)


def _resampled_means(
    values: np.ndarray, clusters: Sequence[Hashable] | None, n_resamples: int, seed: int
) -> np.ndarray:
    """Means of ``n_resamples`` resamples of ``values``: G clusters drawn with replacement, each
    resample's mean its drawn clusters' score sum over their question count (the ratio
    estimator; with one score per cluster, the plain mean of n scores drawn with replacement)."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    if clusters is None:
        indices = rng.integers(0, values.size, size=(n_resamples, values.size))
        return values[indices].mean(axis=1)
    index = _cluster_index(clusters, values.size)
    sums = np.bincount(index, weights=values)
    counts = np.bincount(index)
    drawn = rng.integers(0, sums.size, size=(n_resamples, sums.size))
    return sums[drawn].sum(axis=1) / counts[drawn].sum(axis=1)


def resampling_unit(conversations: Sequence[Hashable], unit: str = "conversation") -> str:
    """The unit a cell's bootstrap resamples: ``unit``, except that a conversation bootstrap
    over fewer than :data:`MIN_CLUSTERS` conversations falls back to questions.

    The one rule every table and ``metrics.json`` apply, so that a cell and the header that
    describes it agree; the caller reports the unit it returns with the conversation count.

    Args:
        conversations: the conversation (memory) of each question in the cell.
        unit: the unit asked for, one of :data:`INTERVAL_UNITS`.

    Returns:
        ``"conversation"`` or ``"question"``.

    >>> resampling_unit(["conv-1", "conv-2", "conv-3", "conv-4", "conv-5", "conv-1"])
    'conversation'
    >>> resampling_unit(["conv-1"] * 40), resampling_unit(["a", "b", "c", "d", "e"], "question")
    ('question', 'question')
    """
    if unit not in INTERVAL_UNITS:
        raise ValueError(f"unit must be one of {list(INTERVAL_UNITS)}, got {unit!r}")
    if unit == "conversation" and len(set(conversations)) >= MIN_CLUSTERS:
        return "conversation"
    return "question"


@dataclass(frozen=True)
class ConfidenceInterval:
    """A mean with its bootstrap interval ``[low, high]``."""

    mean: float
    low: float
    high: float


def bootstrap_ci(
    scores: Sequence[float] | np.ndarray,
    *,
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile bootstrap interval of a mean over questions, resampling clusters of them.

    Args:
        scores: one score per question.
        clusters: one label per score (its conversation); the G distinct clusters are drawn
            with replacement, G per resample. ``None`` resamples the questions themselves, as
            do distinct labels (the same draws, the same interval).
        confidence: coverage of the interval, in (0, 1).
        n_resamples: bootstrap samples, drawn with replacement.
        seed: seed of numpy's ``default_rng``; fixed so tables are reproducible.

    Returns:
        The sample mean and the ``(1 − confidence) / 2`` and ``(1 + confidence) / 2`` quantiles
        (numpy's default linear interpolation) of the resampled means.

    >>> interval = bootstrap_ci([0.0, 1.0] * 50)
    >>> interval.mean, interval.low < 0.5 < interval.high
    (0.5, True)
    >>> bootstrap_ci([0.3, 0.3, 0.3])
    ConfidenceInterval(mean=0.3, low=0.3, high=0.3)

    Conversation A's three questions score 1, B's one scores 0: a resample draws AA, AB, BA or
    BB, so its mean is 1, 3/4 or 0 with probabilities 1/4, 1/2, 1/4, and the 95% interval spans
    all of [0, 1] (the question bootstrap's is [0.25, 1]):

    >>> bootstrap_ci([1.0, 1.0, 1.0, 0.0], clusters=["A", "A", "A", "B"])
    ConfidenceInterval(mean=0.75, low=0.0, high=1.0)
    >>> bootstrap_ci([1.0, 1.0, 1.0, 0.0])
    ConfidenceInterval(mean=0.75, low=0.25, high=1.0)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    values = _scores(scores, "scores")
    means = _resampled_means(values, clusters, n_resamples, seed)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return ConfidenceInterval(mean=float(values.mean()), low=float(low), high=float(high))


def paired_bootstrap_pvalue(
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    *,
    clusters: Sequence[Hashable] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> float:
    """Two-sided paired bootstrap p-value for "methods A and B have the same mean score".

    With per-question differences ``d = a − b`` and observed mean ``δ = mean(d)``, the clusters
    of questions are resampled B times (the same questions for both methods, so the pairing is
    kept), giving means ``δ*_1 .. δ*_B`` (ratio estimator, as in :func:`bootstrap_ci`). Centred
    at ``δ`` they approximate the null distribution, and

        p = (1 + #{b : |δ*_b − δ| >= |δ|}) / (B + 1)

    (the +1 counts the observed sample, so p is never 0; with ``δ = 0``, p = 1).

    Args:
        scores_a: method A's score per question.
        scores_b: method B's score on the same questions, in the same order.
        clusters: one label per question (its conversation), or ``None`` to resample questions.
        n_resamples: B.
        seed: seed of numpy's ``default_rng``.

    Returns:
        The p-value in (0, 1].

    >>> paired_bootstrap_pvalue([1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    1.0
    >>> paired_bootstrap_pvalue([1.0] * 40, [0.0] * 40) < 0.01
    True

    All of the difference in one of five conversations of 8 questions (δ = 1/5): a resample
    that draws that conversation k times has mean k/5, which is as far from δ as 0 is unless
    k = 1, and P(k = 1) = 5 · (1/5) · (4/5)^4 ≈ 0.41; so p ≈ 0.59, where resampling the 40
    questions one by one finds the difference significant:

    >>> a, b = [1.0] * 8 + [0.0] * 32, [0.0] * 40
    >>> conversations = [f"conv-{i // 8}" for i in range(40)]
    >>> round(paired_bootstrap_pvalue(a, b, clusters=conversations, n_resamples=4000), 2)
    0.59
    >>> paired_bootstrap_pvalue(a, b) < 0.01
    True
    """
    a = _scores(scores_a, "scores_a")
    b = _scores(scores_b, "scores_b")
    if a.size != b.size:
        raise ValueError(f"paired scores differ in length: {a.size} vs {b.size}")
    differences = a - b
    observed = differences.mean()
    means = _resampled_means(differences, clusters, n_resamples, seed)
    extreme = np.count_nonzero(np.abs(means - observed) >= abs(observed))
    return float((1 + extreme) / (n_resamples + 1))
