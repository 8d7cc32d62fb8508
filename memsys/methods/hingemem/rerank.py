"""HingeMem's hyperedge rerank, Eq. 6 (papers/hingemem.txt §3.3.2):
``ξ'_i = ξ_i + Q_S(N(h_i) | p) + Q_T(q | C_common, C_rare)``.

Q_S weighs each element's mean node salience by the plan's priority p; Q_T compares the query
with the rare and the common topics. As printed, Q_T depends on the query alone: it shifts every
candidate's score alike, so it cannot reorder them, but it moves the ratio rules of the adaptive
stop (a query near the common topics keeps more, one near the rare topics fewer: "assess the
quantity of recalls for common topics while emphasizing specific key pieces of memory for rare
topics", §3.2.2). ``hyperedge`` scoring, each hyperedge's own closeness to the rare vs the common
topics, is the harness's earlier reading, kept as an option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .memory import LongTermMemory

TOPIC_TERMS = ("query", "hyperedge")


def priority_weights(elements: Sequence[str]) -> dict[str, float]:
    """Linearly decaying weights summing to 1: rank r of k gets (k - r) / (k(k+1)/2).

    >>> priority_weights(["time", "topic"])
    {'time': 0.6666666666666666, 'topic': 0.3333333333333333}
    """
    total = len(elements) * (len(elements) + 1) / 2
    return {element: (len(elements) - rank) / total for rank, element in enumerate(elements)}


def mean_salience(memory: LongTermMemory, element: str) -> np.ndarray:
    """Per hyperedge, the mean salience of its nodes of ``element`` (0 when it has none)."""
    nodes = memory.nodes
    means = np.zeros(len(memory.hyperedges))
    for index, edge in enumerate(memory.hyperedges):
        keys = edge.nodes.get(element, [])
        if keys:
            means[index] = float(np.mean([nodes[f"{element}:{key}"].salience for key in keys]))
    return means


def salience_scores(
    memory: LongTermMemory,
    weights: Mapping[str, float],
    means: Callable[[str], np.ndarray] | None = None,
) -> np.ndarray:
    """Q_S per hyperedge: Σ_e w_e·(mean salience of its nodes of element e, 0 when it has none).

    ``means`` gives :func:`mean_salience` per element, computed once per memory by a caller
    that retrieves often (:class:`~memsys.methods.hingemem.retrieval.RetrievalIndex`).
    """
    scores = np.zeros(len(memory.hyperedges))
    for element, weight in weights.items():
        scores += weight * (means(element) if means else mean_salience(memory, element))
    return scores


def _basis(vectors: np.ndarray) -> np.ndarray:
    if len(vectors) == 0:
        return np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.float32)
    _, singular, rows = np.linalg.svd(vectors, full_matrices=False)
    return rows[singular > 1e-6]


def _residual(vectors: np.ndarray, basis: np.ndarray) -> np.ndarray:
    if len(vectors) == 0 or len(basis) == 0:
        return vectors
    rest = vectors - (vectors @ basis.T) @ basis
    norms = np.linalg.norm(rest, axis=1, keepdims=True)
    return np.where(norms > 1e-6, rest / np.maximum(norms, 1e-12), 0.0)


class TopicContrast:
    """Q_T: the rare and common "terms" of a query and the distance between them.

    Each list's vectors lose the other list's subspace (the overlap, §3.3.2); a topic's weight is
    1 - its highest cosine with the other list's topics (clipped to [0, 1], the "cross-similarity"
    weights); for a query q the weighted softmax a_t ∝ w_t·exp(cos(q, t)/T) aggregates a list into
    a term. ``query_term`` is distance(q, rare term) - distance(q, common term) with distance =
    1 - cosine, i.e. Σ_common a_t cos(q, t) - Σ_rare a_t cos(q, t).
    """

    def __init__(self, common: np.ndarray, rare: np.ndarray) -> None:
        self.common = _residual(common, _basis(rare))
        self.rare = _residual(rare, _basis(common))
        cross = common @ rare.T if len(common) and len(rare) else None
        self.common_weights = (
            np.clip(1 - cross.max(axis=1), 0, 1) if cross is not None else np.ones(len(common))
        )
        self.rare_weights = (
            np.clip(1 - cross.max(axis=0), 0, 1) if cross is not None else np.ones(len(rare))
        )

    @staticmethod
    def _attention(
        topics: np.ndarray, weights: np.ndarray, query: np.ndarray, temperature: float
    ) -> np.ndarray | None:
        if len(topics) == 0:
            return None
        logits = (topics @ query) / temperature
        attention = weights * np.exp(logits - logits.max())
        return attention / attention.sum() if attention.sum() > 0 else None

    def _side(
        self, topics: np.ndarray, weights: np.ndarray, query: np.ndarray, rows: np.ndarray, t: float
    ) -> np.ndarray:
        attention = self._attention(topics, weights, query, t)
        if attention is None:
            return np.zeros(len(rows))
        return rows @ topics.T @ attention

    def query_term(self, query: np.ndarray, temperature: float) -> float:
        """Eq. 6's Q_T(q | C_common, C_rare), one number for the query."""
        rows = query[None, :]
        common = self._side(self.common, self.common_weights, query, rows, temperature)
        rare = self._side(self.rare, self.rare_weights, query, rows, temperature)
        return float(common[0] - rare[0])

    def hyperedge_term(
        self, query: np.ndarray, edges: np.ndarray, temperature: float
    ) -> np.ndarray:
        """The per-hyperedge reading: Σ_rare a_t cos(h, t) - Σ_common a_t cos(h, t)."""
        rare = self._side(self.rare, self.rare_weights, query, edges, temperature)
        return rare - self._side(self.common, self.common_weights, query, edges, temperature)
