"""A LoCoMo run's records rescored under the audited key (:mod:`benchmarks.data.locomo_audit`),
beside the published key they were scored under, from the records alone: evidence recall from
the turn ids the reader got, answer coverage from the context it got, LoCoMo's F1 from the
prediction. The judge is not re-asked: its verdicts stay on the published key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.data.locomo_audit import Erratum, audited_key
from benchmarks.metrics.coverage import answer_coverage
from benchmarks.metrics.qa import f1_locomo
from benchmarks.metrics.retrieval import evidence_recall


def audited_scores(record: Mapping[str, Any], errata: Mapping[str, Erratum]) -> dict[str, Any]:
    """``evidence_recall``, ``answer_coverage`` and ``f1_locomo`` of one record under the audited
    key, and the erratum's ``error_type`` (None: undisputed). The audit covers categories 1-4, so an
    adversarial question keeps its published F1; a score undefined under the audited key is None
    (docs/scoring.md, "LoCoMo's audited key")."""
    key = audited_key(record["question_id"], record["answer"], record["evidence"], errata)
    adversarial = record.get("adversarial_answer") is not None
    answered = key.answer is not None and not adversarial
    context = record.get("context")
    prediction = record.get("prediction")
    f1 = record.get("scores", {}).get("f1_locomo") if adversarial else None
    return {
        "error_type": key.error_type,
        "evidence_recall": (
            evidence_recall(key.evidence, record["retrieved_turn_ids"]) if key.evidence else None
        ),
        "answer_coverage": (
            answer_coverage(context, [key.answer]) if answered and context is not None else None
        ),
        "f1_locomo": (
            f1_locomo(prediction, key.answer, record["category"])
            if answered and prediction is not None
            else f1
        ),
    }
