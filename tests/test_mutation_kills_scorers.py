"""Scorer values a silent change would move, pinned where the scorers' own tests leave them open:
case folding in the set F1 and BLEU-1 (a ligature that only upper-casing merges), every score of
one question, the skipped count of evidence recall, the messages that say which input was bad,
the bootstrap's fixed seed and resample count, and scores given as booleans. Written for ``make
mutation`` (docs/development.md): each test pins a value a mutant would change."""

from __future__ import annotations

import warnings

import pytest

from benchmarks.metrics.qa import QAPrediction, bleu1, f1_set, score_prediction
from benchmarks.metrics.retrieval import evidence_recall, summarize_evidence_recall
from benchmarks.metrics.segmentation import score_segmentation
from benchmarks.metrics.stats import ConfidenceInterval, bootstrap_ci, paired_bootstrap_pvalue

# "ﬁ" (U+FB01) lower-cases to itself and upper-cases to "FI": only an upper-casing scorer
# would call it the word "fi".
LIGATURE = "\ufb01"

#: A mutant that loops forever fails here in seconds, not at mutmut's CPU limit.
pytestmark = pytest.mark.timeout(10)


def test_the_set_f1_and_bleu1_lower_case_rather_than_upper_case() -> None:
    assert f1_set(LIGATURE, "fi") == 0.0
    assert bleu1(LIGATURE, "fi") == 0.0
    assert f1_set("FI", "fi") == 1.0
    assert bleu1("FI", "fi") == 1.0


def test_every_score_of_one_question_uses_its_reference() -> None:
    scored = score_prediction(QAPrediction("q1", "single_hop", "may", "May"))
    assert scored == {"f1_locomo": 1.0, "f1_set": 1.0, "bleu1": 1.0}
    adversarial = score_prediction(QAPrediction("q2", "adversarial", "red", "x", "red"))
    assert adversarial == {"f1_locomo": 0.0, "f1_set": 1.0, "bleu1": 1.0}


def test_evidence_recall_counts_every_question_it_skips() -> None:
    summary = summarize_evidence_recall([([], ["D1:1"]), (["D1:1"], ["D1:1"]), ([], [])])
    assert (summary.recalls, summary.n_skipped) == ((1.0,), 2)
    with pytest.raises(ValueError, match=r"^question has no evidence; recall is undefined$"):
        evidence_recall([], ["D1:1"])


def test_a_class_absent_on_both_sides_scores_zero_with_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns of uninitialized output without ``out``
        scores = score_segmentation([([0, 0, 0], [0, 0, 0]), ([0, 1, 0], [0, 1, 0])])
    assert scores.f1.tolist() == [0.0, 1.0]
    assert scores.f1_macro.tolist() == [0.5, 1.0]


def test_segmentation_refuses_no_dialogues_by_name() -> None:
    with pytest.raises(ValueError, match=r"^no dialogues to score$"):
        score_segmentation([])


SCORES = [0.1, 0.9, 0.4, 0.7, 0.0, 1.0, 0.3, 0.6]


def test_the_bootstrap_interval_is_seed_zeros_by_default() -> None:
    assert bootstrap_ci(SCORES) == ConfidenceInterval(mean=0.5, low=0.2625, high=0.7375)
    assert bootstrap_ci(SCORES, seed=1) != bootstrap_ci(SCORES)


def test_one_resample_is_enough_to_draw_an_interval() -> None:
    interval = bootstrap_ci([1.0, 0.0, 1.0], n_resamples=1)
    assert interval.low == interval.high == pytest.approx(1 / 3)


@pytest.mark.parametrize("confidence", [0.0, 1.0])
def test_a_confidence_of_zero_or_one_is_refused(confidence: float) -> None:
    with pytest.raises(ValueError, match=r"^confidence must be in \(0, 1\)"):
        bootstrap_ci(SCORES, confidence=confidence)


def test_a_bad_score_list_is_named_in_the_message() -> None:
    with pytest.raises(ValueError, match=r"^scores must be finite$"):
        bootstrap_ci([0.5, float("nan")])
    with pytest.raises(ValueError, match=r"^scores_a must be a non-empty"):
        paired_bootstrap_pvalue([], [1.0])
    with pytest.raises(ValueError, match=r"^scores_b must be finite$"):
        paired_bootstrap_pvalue([1.0], [float("inf")])


def test_the_paired_pvalue_is_seed_zeros_over_1000_resamples_by_default() -> None:
    a = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    b = [0.0] * 5 + [1.0] * 5
    assert paired_bootstrap_pvalue(a, b) == 818 / 1001
    assert paired_bootstrap_pvalue(a, b, seed=1) != paired_bootstrap_pvalue(a, b)
    assert paired_bootstrap_pvalue([1.0] * 40, [0.0] * 40) == 1 / 1001


def test_scores_given_as_booleans_are_read_as_numbers() -> None:
    """Verdicts logged as booleans: numpy cannot subtract boolean arrays, floats it can."""
    assert paired_bootstrap_pvalue([True, False, True], [False, False, True]) == pytest.approx(
        paired_bootstrap_pvalue([1.0, 0.0, 1.0], [0.0, 0.0, 1.0])
    )
    assert bootstrap_ci([True, False]).mean == 0.5
