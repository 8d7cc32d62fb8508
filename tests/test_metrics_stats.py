"""Bootstrap CI and paired bootstrap p-value: determinism, coverage, edge cases, and the cluster
(conversation) bootstrap: hand-computed resamples, the fallback rule, and identity with the
question bootstrap when every question is its own cluster."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from benchmarks.metrics.stats import (
    MIN_CLUSTERS,
    ConfidenceInterval,
    _resampled_means,
    bootstrap_ci,
    paired_bootstrap_pvalue,
    resampling_unit,
)


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
        (lambda: bootstrap_ci([0.1, 0.2], clusters=["a"]), "one label per score"),
        (lambda: paired_bootstrap_pvalue([0.1], [0.2], clusters=["a", "b"]), "one label"),
        (lambda: resampling_unit(["a"], "dialogue"), "unit must be one of"),
    ],
)
def test_invalid_input(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_vectorized_speed() -> None:
    scores = np.random.default_rng(1).random(2000)
    conversations = [f"conv-{i % 10}" for i in range(2000)]
    start = time.perf_counter()
    bootstrap_ci(scores)
    paired_bootstrap_pvalue(scores, scores[::-1].copy())
    bootstrap_ci(scores, clusters=conversations)
    paired_bootstrap_pvalue(scores, scores[::-1].copy(), clusters=conversations)
    assert time.perf_counter() - start < 2.0


# ---------------------------------------------------------------------------------------------
# Cluster bootstrap


def question_bootstrap_as_committed(values: np.ndarray, seed: int) -> tuple[float, float]:
    """The interval the committed tables were built with, before clusters: n questions drawn
    with replacement per resample, 1000 resamples, 95% percentile interval."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(1000, values.size))].mean(axis=1)
    tail = (1 - 0.95) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


@pytest.mark.parametrize(("size", "seed"), [(1, 0), (7, 3), (499, 0), (1986, 11)])
def test_distinct_labels_give_exactly_the_question_bootstrap(size: int, seed: int) -> None:
    values = np.random.default_rng(size).random(size)
    labels = [f"q{i}" for i in range(size)]
    expected = question_bootstrap_as_committed(values, seed)
    for clusters in (None, labels, list(range(size))):
        interval = bootstrap_ci(values, clusters=clusters, seed=seed)
        assert (interval.low, interval.high) == expected  # identical, not close
    other = np.random.default_rng(size + 1).random(size)
    assert paired_bootstrap_pvalue(
        values, other, clusters=labels, seed=seed
    ) == paired_bootstrap_pvalue(values, other, seed=seed)


def test_a_cluster_resample_holds_whole_conversations() -> None:
    # A = three 1.0s, B = one 0.0: resamples AA, AB, BA, BB have means 1, 3/4, 3/4, 0.
    means = _resampled_means(np.array([1.0, 1.0, 1.0, 0.0]), ["A", "A", "A", "B"], 8000, 0)
    assert set(np.unique(means)) == {0.0, 0.75, 1.0}
    shares = [np.mean(means == value) for value in (0.0, 0.75, 1.0)]
    assert shares == pytest.approx([0.25, 0.5, 0.25], abs=0.02)
    # Interleaved labels are the same two clusters: where a question sits in the list is moot.
    interleaved = _resampled_means(np.array([1.0, 0.0, 1.0, 1.0]), ["A", "B", "A", "A"], 8000, 0)
    assert set(np.unique(interleaved)) == {0.0, 0.75, 1.0}


def test_one_conversation_has_a_zero_width_interval() -> None:
    # One cluster: every resample is that cluster, so its spread cannot be estimated at all
    # (why resampling_unit falls back to questions below MIN_CLUSTERS).
    interval = bootstrap_ci([0.0, 1.0, 1.0, 0.5], clusters=["conv-1"] * 4)
    assert interval == ConfidenceInterval(mean=0.625, low=0.625, high=0.625)


def test_shared_memories_widen_the_interval() -> None:
    # Ten conversations of 100 questions; each conversation's memory sets its success rate.
    rng = np.random.default_rng(7)
    rates = rng.uniform(0.2, 0.8, size=10)
    values = (rng.random((10, 100)) < rates[:, None]).astype(float).ravel()
    conversations = np.repeat([f"conv-{i}" for i in range(10)], 100).tolist()
    questions = bootstrap_ci(values)
    clustered = bootstrap_ci(values, clusters=conversations)
    assert clustered.mean == questions.mean
    assert clustered.high - clustered.low > 2 * (questions.high - questions.low)


def test_paired_test_with_all_the_difference_in_one_conversation() -> None:
    # Five conversations of 8 questions; A beats B on every question of conv-0 only, so
    # delta = 1/5. A resample drawing conv-0 k times has mean k/5: extreme unless k = 1,
    # P(k = 1) = 5 * 1/5 * (4/5)^4 = 0.4096, so p is about 1 - 0.4096.
    a, b = [1.0] * 8 + [0.0] * 32, [0.0] * 40
    conversations = [f"conv-{i // 8}" for i in range(40)]
    p = paired_bootstrap_pvalue(a, b, clusters=conversations, n_resamples=20_000)
    assert p == pytest.approx(1 - 0.4096, abs=0.01)
    assert paired_bootstrap_pvalue(a, b) < 0.01  # questions as independent draws: "significant"
    # The same difference spread over every conversation is significant either way.
    spread = [1.0 if i % 8 < 2 else 0.0 for i in range(40)]
    assert paired_bootstrap_pvalue(spread, b, clusters=conversations) < 0.01


def test_resampling_unit_falls_back_below_the_minimum() -> None:
    enough = [f"conv-{i}" for i in range(MIN_CLUSTERS)] * 3
    assert resampling_unit(enough) == "conversation"
    assert resampling_unit(enough, "question") == "question"
    assert resampling_unit(enough[: MIN_CLUSTERS - 1] * 3) == "question"
    assert resampling_unit([]) == "question"
