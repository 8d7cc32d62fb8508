"""HingeMem's adaptive stop (papers/hingemem.txt §3.3.3, Figure 3, Appendix C): how many of the
reranked candidates a question of each retrieval type keeps. Rules, not caps, decide the depth."""

from __future__ import annotations

import math
from collections.abc import Sequence

QUERY_TYPES = ("recall", "precision", "judgement")


def adaptive_stop(
    scores: Sequence[float],
    query_type: str,
    *,
    delta: float = 0.1,
    recall_ratio: float = 0.5,
    precision_ratio: float = 0.8,
    judgement_ratio: float = 0.8,
    judgement_temperature: float = 1.0,
) -> int:
    """How many of ``scores`` (sorted best first) to keep.

    recall: keep while a score is >= ``recall_ratio``·max and the drop from the previous one is
    <= ``delta`` (the first larger drop is the inflection point); precision: scores >=
    ``precision_ratio``·max; judgement: softmax probabilities >= ``judgement_ratio``·max
    probability. With a non-positive maximum only the best is kept (a ratio of it means nothing).

    >>> adaptive_stop([0.9, 0.85, 0.8, 0.6, 0.55], "recall")
    3
    >>> adaptive_stop([1.0, 0.85, 0.8, 0.79], "precision"), adaptive_stop([1.0, 0.9, 0.78, 0.7], "judgement")
    (3, 3)
    """
    if query_type not in QUERY_TYPES:
        raise ValueError(f"query type must be one of {QUERY_TYPES}, got {query_type!r}")
    if not scores:
        return 0
    top = scores[0]
    if top <= 0:
        return 1
    tolerance = 1e-9
    if query_type == "recall":
        kept = 1
        while (
            kept < len(scores)
            and scores[kept] >= recall_ratio * top - tolerance
            and scores[kept - 1] - scores[kept] <= delta + tolerance
        ):
            kept += 1
        return kept
    if query_type == "judgement":
        # softmax(s_i) / softmax(s_max) = exp((s_i - s_max) / T) >= ratio
        floor = top + judgement_temperature * math.log(judgement_ratio)
        return sum(1 for score in scores if score >= floor - tolerance)
    return sum(1 for score in scores if score >= precision_ratio * top - tolerance)
