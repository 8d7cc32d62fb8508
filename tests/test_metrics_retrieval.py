"""Evidence recall (LongMemEval's ranking metrics: test_metrics_longmemeval_official.py)."""

from __future__ import annotations

import math

import pytest

from benchmarks.metrics.retrieval import evidence_recall, summarize_evidence_recall

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
