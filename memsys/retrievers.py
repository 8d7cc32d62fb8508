"""Rank a fixed list of memory items for a query, lexically (BM25) or densely (embeddings).

Methods choose a retriever by config and get the same call either way; the dense one embeds
through the shared, cached embedder, so items embedded once (by any method) are never embedded
again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from memsys.bm25 import BM25Index
from memsys.embed import Embedder, VectorIndex

RetrieverKind = Literal["bm25", "dense"]
RETRIEVER_KINDS: tuple[str, ...] = ("bm25", "dense")


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` best (item index, score) pairs, best first."""
        ...


class DenseRetriever:
    """Inner product of sentence embeddings, exact search: cosine similarity when the embedder
    normalizes (the default), the dot product when it does not (a model trained for it)."""

    def __init__(self, texts: Sequence[str], embedder: Embedder) -> None:
        self._embedder = embedder
        vectors = embedder.encode(list(texts))
        self._index = (
            VectorIndex.build([str(i) for i in range(len(texts))], vectors) if len(texts) else None
        )

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        if self._index is None or k <= 0:
            return []
        (hits,) = self._index.search(self._embedder.encode([query]), k)
        return [(int(item_id), score) for item_id, score in hits]


def build_retriever(kind: str, texts: Sequence[str], embedder: Embedder) -> Retriever:
    """A retriever of ``kind`` over ``texts``."""
    if kind == "bm25":
        return BM25Index(texts)
    if kind == "dense":
        return DenseRetriever(texts, embedder)
    raise ValueError(f"unknown retriever {kind!r}; expected one of {RETRIEVER_KINDS}")
