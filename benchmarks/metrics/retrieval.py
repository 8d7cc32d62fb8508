"""Retrieval scores that need no LLM: LoCoMo evidence recall, LongMemEval recall and nDCG at k.

They tell whether a memory method hands the reader the turns or sessions that hold the answer,
separately from whether the reader then answers well. Pure functions on plain ids; mapping
retrieved items to turn or session ids, and skipping questions (LongMemEval's ``_abs`` items),
is the caller's job, so that no dataset quirk hides in a scorer default.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np


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


def _top_k(ranked_ids: Sequence[str], k: int) -> Sequence[str]:
    """The first k ids of a ranking; rejects k < 1 and repeated ids (they would count twice)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if len(set(ranked_ids)) != len(ranked_ids):
        raise ValueError("ranked ids repeat; a ranking lists each id once")
    return ranked_ids[:k]


def recall_any_at_k(ranked_ids: Sequence[str], gold_ids: Collection[str], *, k: int) -> float:
    """LongMemEval's ``recall_any@k``: 1.0 when any gold id is in the top k, else 0.0.

    Args:
        ranked_ids: retrieved ids, best first, each once.
        gold_ids: the evidence ids (sessions or turns); empty gives 0.0, as in the official code.
        k: the cut-off.

    Returns:
        0.0 or 1.0.

    >>> recall_any_at_k(["s3", "s1", "s2"], {"s1", "s2"}, k=2)
    1.0
    """
    top = set(_top_k(ranked_ids, k))
    return float(any(gold in top for gold in gold_ids))


def recall_all_at_k(ranked_ids: Sequence[str], gold_ids: Collection[str], *, k: int) -> float:
    """LongMemEval's ``recall_all@k``: 1.0 when every gold id is in the top k, else 0.0.

    Args:
        ranked_ids: retrieved ids, best first, each once.
        gold_ids: the evidence ids; empty gives 1.0, as in the official code.
        k: the cut-off.

    Returns:
        0.0 or 1.0.

    >>> recall_all_at_k(["s3", "s1", "s2"], {"s1", "s2"}, k=2)
    0.0
    """
    top = set(_top_k(ranked_ids, k))
    return float(all(gold in top for gold in gold_ids))


def _dcg(relevances: np.ndarray) -> float:
    """LongMemEval's DCG: rank 1 undiscounted, rank r >= 2 divided by log2(r)."""
    if relevances.size == 0:
        return 0.0
    return float(
        relevances[0] + np.sum(relevances[1:] / np.log2(np.arange(2, relevances.size + 1)))
    )


def ndcg_any_at_k(ranked_ids: Sequence[str], gold_ids: Collection[str], *, k: int) -> float:
    """LongMemEval's ``ndcg_any@k``: binary-relevance nDCG with its DCG variant.

    The official DCG discounts rank r >= 2 by ``log2(r)`` (rank 1 and 2 both by 1), not the
    textbook ``log2(r + 1)``; the ideal DCG puts ``min(len(gold_ids), k)`` relevant ids first.
    That equals the official ideal when every gold id is in the corpus, which holds for
    LongMemEval's sessions and ``has_answer`` turns.

    Args:
        ranked_ids: retrieved ids, best first, each once.
        gold_ids: the evidence ids; empty gives 0.0, as in the official code.
        k: the cut-off.

    Returns:
        nDCG in [0, 1].

    >>> ndcg_any_at_k(["s3", "s1", "s2"], {"s1"}, k=3)
    1.0
    >>> round(ndcg_any_at_k(["s3", "s2", "s1"], {"s1"}, k=3), 4)
    0.6309
    """
    gold = set(gold_ids)
    top = _top_k(ranked_ids, k)
    ideal = _dcg(np.ones(min(len(gold), k)))
    if ideal == 0:
        return 0.0
    return _dcg(np.array([float(doc in gold) for doc in top])) / ideal
