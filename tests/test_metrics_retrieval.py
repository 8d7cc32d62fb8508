"""Retrieval scores: LoCoMo evidence recall and LongMemEval recall / nDCG at k."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.metrics.retrieval import (
    evidence_recall,
    ndcg_any_at_k,
    recall_all_at_k,
    recall_any_at_k,
    summarize_evidence_recall,
)

# --- evidence recall -------------------------------------------------------------------------


def test_evidence_recall_hand_computed() -> None:
    assert evidence_recall(["D1:3", "D2:5"], ["D1:3", "D2:5", "D3:1"]) == 1.0
    assert evidence_recall(["D1:3", "D2:5", "D2:6"], ["D2:5"]) == pytest.approx(1 / 3)
    assert evidence_recall(["D1:3"], []) == 0.0


def test_evidence_recall_counts_repeated_evidence_once() -> None:
    # LoCoMo has one question with evidence ["D4:5", "D4:5", "D5:5"].
    assert evidence_recall(["D4:5", "D4:5", "D5:5"], ["D4:5"]) == 0.5


def test_evidence_recall_without_evidence_raises() -> None:
    with pytest.raises(ValueError, match="no evidence"):
        evidence_recall([], ["D1:1"])


def test_summary_skips_and_counts_questions_without_evidence() -> None:
    summary = summarize_evidence_recall(
        [
            (["D1:1", "D1:2"], ["D1:1", "D1:2"]),
            (["D1:1", "D1:2"], ["D1:2"]),
            ([], ["D1:2"]),
            (["D2:1"], []),
        ]
    )
    assert summary.recalls == (1.0, 0.5, 0.0)
    assert summary.n_skipped == 1
    assert summary.mean_recall == pytest.approx(0.5)
    assert summary.all_retrieved_share == pytest.approx(1 / 3)


def test_summary_of_nothing_is_nan() -> None:
    summary = summarize_evidence_recall([([], ["D1:1"])])
    assert summary.n_skipped == 1
    assert math.isnan(summary.mean_recall)
    assert math.isnan(summary.all_retrieved_share)


# --- LongMemEval recall@k and nDCG@k ---------------------------------------------------------

RANKED = ["s3", "s1", "s4", "s2", "s5"]
GOLD = {"s1", "s2"}


@pytest.mark.parametrize(
    ("k", "any_", "all_", "ndcg"),
    [
        # Relevances 0, 1, 0, 1, 0. DCG: rank 1 undiscounted, rank r >= 2 divided by log2(r).
        (1, 0.0, 0.0, 0.0),
        (2, 1.0, 0.0, 1 / 2),  # DCG = 1/log2(2) = 1; ideal 1 + 1 = 2
        (3, 1.0, 0.0, 1 / 2),
        (4, 1.0, 1.0, (1 + 1 / 2) / 2),  # DCG = 1 + 1/log2(4)
        (10, 1.0, 1.0, (1 + 1 / 2) / 2),  # k past the ranking
    ],
)
def test_longmemeval_metrics_hand_computed(k: int, any_: float, all_: float, ndcg: float) -> None:
    assert recall_any_at_k(RANKED, GOLD, k=k) == any_
    assert recall_all_at_k(RANKED, GOLD, k=k) == all_
    assert ndcg_any_at_k(RANKED, GOLD, k=k) == pytest.approx(ndcg, abs=1e-15)


def test_ndcg_uses_longmemeval_discount() -> None:
    # Gold at rank 3 of 3: 1/log2(3) (the textbook discount would give 1/log2(4) = 0.5).
    assert ndcg_any_at_k(["a", "b", "c"], {"c"}, k=3) == pytest.approx(1 / math.log2(3))
    # Ranks 1 and 2 share discount 1, so gold at rank 2 alone already scores 1.
    assert ndcg_any_at_k(["a", "b"], {"b"}, k=2) == 1.0


def test_ndcg_ideal_is_capped_at_k() -> None:
    # Three gold ids, k = 2: the ideal has two relevant ids; both top ids gold -> 1.
    assert ndcg_any_at_k(["a", "b", "c"], {"a", "b", "c"}, k=2) == 1.0
    # Gold ids absent from the ranking still count in the ideal (1 + 1 + 1/log2(3)).
    assert ndcg_any_at_k(["a", "x"], {"a", "b", "c"}, k=3) == pytest.approx(
        1 / (2 + 1 / math.log2(3))
    )


def test_empty_gold_follows_official_code() -> None:
    assert recall_any_at_k(RANKED, set(), k=3) == 0.0
    assert recall_all_at_k(RANKED, set(), k=3) == 1.0
    assert ndcg_any_at_k(RANKED, set(), k=3) == 0.0


def test_empty_ranking() -> None:
    assert recall_any_at_k([], GOLD, k=5) == 0.0
    assert recall_all_at_k([], GOLD, k=5) == 0.0
    assert ndcg_any_at_k([], GOLD, k=5) == 0.0


@pytest.mark.parametrize("scorer", [recall_any_at_k, recall_all_at_k, ndcg_any_at_k])
def test_invalid_rankings(scorer: Callable[..., float]) -> None:
    with pytest.raises(ValueError, match="k must be"):
        scorer(RANKED, GOLD, k=0)
    with pytest.raises(ValueError, match="repeat"):
        scorer(["s1", "s1"], GOLD, k=2)


@settings(max_examples=200, deadline=None)
@given(
    ranked=st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8),
    gold=st.sets(st.sampled_from("abcdefghij"), min_size=1, max_size=4),
    k=st.integers(1, 10),
)
def test_longmemeval_properties(ranked: list[str], gold: set[str], k: int) -> None:
    any_ = recall_any_at_k(ranked, gold, k=k)
    all_ = recall_all_at_k(ranked, gold, k=k)
    ndcg = ndcg_any_at_k(ranked, gold, k=k)
    assert all_ <= any_
    assert 0.0 <= ndcg <= 1.0 + 1e-12
    assert (ndcg > 0) == (any_ == 1.0)
    best_first = sorted(ranked, key=lambda doc: doc not in gold)
    if len(gold & set(ranked)) == len(gold):
        assert ndcg_any_at_k(best_first, gold, k=k) == pytest.approx(1.0)
