"""Evidence recall, the retrieval score that needs no LLM: does a method hand the reader the
turns that hold the answer, separately from whether the reader then answers well. Pure functions
on plain turn ids. LongMemEval's ranking metrics live in
:mod:`benchmarks.metrics.longmemeval_official`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass


def evidence_recall(evidence: Collection[str], retrieved: Collection[str]) -> float:
    """Share of a question's evidence turns among the retrieved ones, ``|E ∩ R| / |E|``.

    Args:
        evidence: the gold evidence turn ids E (duplicates count once).
        retrieved: the turn ids R covered by what the method hands the reader.

    Returns:
        Recall in [0, 1].

    Raises:
        ValueError: the question has no evidence (skip it; :func:`summarize_evidence_recall`
            does and counts it).

    >>> evidence_recall(["D1:3", "D2:5"], {"D1:3", "D1:4"})
    0.5
    """
    gold = set(evidence)
    if not gold:
        raise ValueError("question has no evidence; recall is undefined")
    return len(gold & set(retrieved)) / len(gold)


@dataclass(frozen=True)
class EvidenceRecall:
    """Per-question recalls (questions with evidence, in input order) and the skipped count."""

    recalls: tuple[float, ...]
    n_skipped: int

    @property
    def mean_recall(self) -> float:
        """Mean recall over scored questions; NaN when none had evidence."""
        return sum(self.recalls) / len(self.recalls) if self.recalls else math.nan

    @property
    def all_retrieved_share(self) -> float:
        """Share of scored questions whose evidence was retrieved in full; NaN when none."""
        if not self.recalls:
            return math.nan
        return sum(recall == 1.0 for recall in self.recalls) / len(self.recalls)


def summarize_evidence_recall(
    questions: Iterable[tuple[Collection[str], Collection[str]]],
) -> EvidenceRecall:
    """Evidence recall over many questions, skipping (and counting) those without evidence.

    Args:
        questions: ``(evidence_turn_ids, retrieved_turn_ids)`` per question.

    Returns:
        The per-question recalls, their mean, the share with all evidence retrieved and the
        number of questions skipped.

    >>> summary = summarize_evidence_recall([(["D1:1"], ["D1:1"]), (["D1:2", "D1:3"], ["D1:2"]),
    ...                                      ([], ["D1:1"])])
    >>> summary.recalls, summary.mean_recall, summary.all_retrieved_share, summary.n_skipped
    ((1.0, 0.5), 0.75, 0.5, 1)
    """
    recalls: list[float] = []
    n_skipped = 0
    for evidence, retrieved in questions:
        if not evidence:
            n_skipped += 1
            continue
        recalls.append(evidence_recall(evidence, retrieved))
    return EvidenceRecall(recalls=tuple(recalls), n_skipped=n_skipped)
