"""Bootstrap CI and paired bootstrap p-value: determinism, coverage, edge cases."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from benchmarks.metrics.stats import ConfidenceInterval, bootstrap_ci, paired_bootstrap_pvalue


def test_ci_is_reproducible_and_seeded() -> None:
    scores = np.random.default_rng(0).random(200)
    assert bootstrap_ci(scores) == bootstrap_ci(scores.tolist())
    assert bootstrap_ci(scores, seed=1) != bootstrap_ci(scores, seed=2)


def test_ci_brackets_the_mean_with_normal_width() -> None:
    scores = np.random.default_rng(3).integers(0, 2, size=400).astype(float)
    interval = bootstrap_ci(scores, n_resamples=2000)
    assert interval.low < interval.mean < interval.high
    # Normal approximation: 2 * 1.96 * sqrt(p (1 - p) / n) with p ~ 0.5 is about 0.098.
    assert 0.08 < interval.high - interval.low < 0.12
    narrow = bootstrap_ci(scores, confidence=0.5, n_resamples=2000)
    assert interval.low < narrow.low < narrow.high < interval.high


def test_ci_of_constant_scores_has_zero_width() -> None:
    assert bootstrap_ci([1.0] * 10) == ConfidenceInterval(mean=1.0, low=1.0, high=1.0)
    assert bootstrap_ci([0.25]) == ConfidenceInterval(mean=0.25, low=0.25, high=0.25)


def test_pvalue_extremes() -> None:
    assert paired_bootstrap_pvalue([0.5, 0.2, 0.9], [0.5, 0.2, 0.9]) == 1.0
    # Every resample keeps the difference at 1: only the +1 term remains.
    assert paired_bootstrap_pvalue([1.0] * 50, [0.0] * 50, n_resamples=999) == 1 / 1000


def test_pvalue_is_symmetric_and_seeded() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random(100), rng.random(100)
    assert paired_bootstrap_pvalue(a, b) == paired_bootstrap_pvalue(b, a)
    assert paired_bootstrap_pvalue(a, b, seed=4) == paired_bootstrap_pvalue(a, b, seed=4)


def test_pvalue_separates_real_from_null_differences() -> None:
    rng = np.random.default_rng(9)
    base = rng.integers(0, 2, size=300).astype(float)
    same_mean = rng.permutation(base)
    better = np.where(rng.random(300) < 0.3, 1.0, base)
    assert paired_bootstrap_pvalue(better, base) < 0.01
    assert paired_bootstrap_pvalue(same_mean, base) == 1.0  # identical means: delta = 0


def test_pvalue_definition_on_a_tiny_sample() -> None:
    # d = (1, 0): delta = 0.5. Resample means are 1, 0.5 or 0; |d* - 0.5| >= 0.5 unless
    # the resample is one of each (probability 1/2). Expect p near (1 + B/2) / (B + 1).
    p = paired_bootstrap_pvalue([1.0, 0.0], [0.0, 0.0], n_resamples=4000)
    assert 0.47 < p < 0.53


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bootstrap_ci([]), "non-empty"),
        (lambda: bootstrap_ci([[0.1, 0.2]]), "1-D"),
        (lambda: bootstrap_ci([0.1, float("nan")]), "finite"),
        (lambda: bootstrap_ci([0.1], confidence=1.0), "confidence"),
        (lambda: bootstrap_ci([0.1], n_resamples=0), "n_resamples"),
        (lambda: paired_bootstrap_pvalue([0.1, 0.2], [0.1]), "differ in length"),
        (lambda: paired_bootstrap_pvalue([0.1], [float("inf")]), "finite"),
    ],
)
def test_invalid_input(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_vectorized_speed() -> None:
    scores = np.random.default_rng(1).random(2000)
    start = time.perf_counter()
    bootstrap_ci(scores)
    paired_bootstrap_pvalue(scores, scores[::-1].copy())
    assert time.perf_counter() - start < 2.0
