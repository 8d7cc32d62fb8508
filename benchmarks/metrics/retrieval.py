"""Evidence recall, the retrieval score that needs no LLM: does a method hand the reader the
turns that hold the answer, separately from whether the reader then answers well. Pure functions
on plain turn ids. LongMemEval's ranking metrics live in
:mod:`benchmarks.metrics.longmemeval_official`.
"""

from __future__ import annotations

from collections.abc import Collection


def evidence_recall(evidence: Collection[str], retrieved: Collection[str]) -> float:
    """Share of a question's evidence turns among the retrieved ones, ``|E ∩ R| / |E|``.

    Args:
        evidence: the gold evidence turn ids E (duplicates count once).
        retrieved: the turn ids R covered by what the method hands the reader.

    Returns:
        Recall in [0, 1].

    Raises:
        ValueError: the question has no evidence (skip it: a run records no recall for it,
            and :func:`benchmarks.metrics.aggregate.evidence_recalls` leaves it out).

    >>> evidence_recall(["D1:3", "D2:5"], {"D1:3", "D1:4"})
    0.5
    """
    gold = set(evidence)
    if not gold:
        raise ValueError("question has no evidence; recall is undefined")
    return len(gold & set(retrieved)) / len(gold)
