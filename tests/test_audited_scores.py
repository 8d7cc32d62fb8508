"""Records rescored under LoCoMo's audited key."""

from __future__ import annotations

from benchmarks.data.locomo_audit import Erratum
from benchmarks.metrics.audited import audited_scores

ERRATA = {
    "conv-26:q1": Erratum("conv-26:q1", "WRONG_CITATION", "q?", "2022", "2022", ("D1:14",)),
    "conv-26:q2": Erratum("conv-26:q2", "HALLUCINATION", "q?", "Psychology", "counseling", ()),
    "conv-26:q3": Erratum("conv-26:q3", "AMBIGUOUS", "q?", "breeder", None, ("D2:1", "D11:4")),
}


def _record(question_id: str, **fields) -> dict:
    record = {
        "question_id": question_id,
        "category": "single_hop",
        "answer": "2022",
        "adversarial_answer": None,
        "evidence": ["D1:12"],
        "retrieved_turn_ids": ["D1:12"],
        "context": "Melanie: I painted that lake sunrise in 2022.",
        "prediction": "in 2022",
        "scores": {"f1_locomo": 0.5},
    }
    return {**record, **fields}


def test_a_wrong_citation_moves_evidence_recall_only() -> None:
    scores = audited_scores(_record("conv-26:q1"), ERRATA)
    assert scores == {
        "error_type": "WRONG_CITATION",
        "evidence_recall": 0.0,
        "answer_coverage": 1.0,
        "f1_locomo": 2 / 3,
    }


def test_a_hallucinated_answer_is_scored_against_the_auditors_reading() -> None:
    record = _record(
        "conv-26:q2",
        answer="Psychology",
        context="I'm keen on counseling",
        prediction="counseling",
        evidence=[],
    )
    scores = audited_scores(record, ERRATA)
    assert scores["answer_coverage"] == 1.0 and scores["f1_locomo"] == 1.0
    assert scores["evidence_recall"] is None  # the audit lists no evidence


def test_ambiguous_has_no_answer_score_and_undisputed_keeps_the_published_key() -> None:
    ambiguous = audited_scores(_record("conv-26:q3", retrieved_turn_ids=["D2:1"]), ERRATA)
    assert ambiguous["answer_coverage"] is None and ambiguous["f1_locomo"] is None
    assert ambiguous["evidence_recall"] == 0.5
    plain = audited_scores(_record("conv-26:q0", context=None), ERRATA)
    assert plain["error_type"] is None and plain["evidence_recall"] == 1.0
    assert plain["answer_coverage"] is None  # no context recorded


def test_an_adversarial_question_keeps_its_published_f1() -> None:
    record = _record("conv-26:q9", category="adversarial", adversarial_answer="x", evidence=[])
    assert audited_scores(record, ERRATA)["f1_locomo"] == 0.5
