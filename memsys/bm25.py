"""BM25 over memory items (Okapi BM25 from ``rank-bm25``), with one shared tokenizer.

Lexical and dense retrieval are interchangeable behind :func:`top_k`-style calls so a method
picks its retriever by config. Tokens are lowercased word characters; no stemming or stop-word
list, so scores depend on nothing that needs downloaded data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

_WORD = re.compile(r"\w+")


def bm25_tokens(text: str) -> list[str]:
    """Lowercased word tokens.

    >>> bm25_tokens("When did Caroline go to the LGBTQ support group?")[:4]
    ['when', 'did', 'caroline', 'go']
    """
    return _WORD.findall(text.lower())


class BM25Index:
    """Okapi BM25 (k1 = 1.5, b = 0.75, rank-bm25's defaults) over a fixed list of texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        corpus = [bm25_tokens(text) or [""] for text in texts]
        self._bm25 = BM25Okapi(corpus) if texts else None

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every text for ``query``."""
        if self._bm25 is None:
            return np.zeros(0)
        return np.asarray(self._bm25.get_scores(bm25_tokens(query)), dtype=np.float64)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` best (index, score) pairs, best first; ties broken by position."""
        scores = self.scores(query)
        order = np.lexsort((np.arange(len(scores)), -scores))[:k]
        return [(int(i), float(scores[i])) for i in order]
