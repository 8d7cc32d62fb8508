"""Personalized PageRank over one fixed graph, many queries (CAST's HippoRAG-style search).

:class:`PageRank` builds the row-normalized transition matrix once per graph and then answers each
query by scipy sparse power iteration, with networkx's semantics (``alpha`` is the probability of
following an edge; dangling nodes jump back to the personalization vector; convergence when the
L1 change is below ``len(nodes) * tol``), so its scores match
``networkx.pagerank(graph, alpha, personalization)``, which rebuilds that matrix on every call
(``scripts/bench_ppr.py`` measures both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp


class PageRank:
    """Personalized PageRank over one fixed graph, many queries.

    >>> g = nx.path_graph(["a", "b", "c"])
    >>> ranks = PageRank(g).personalized({"a": 1.0}, alpha=0.5)
    >>> [round(float(ranks[i]) * 12, 3) for i in range(3)]  # 7/12, 4/12, 1/12
    [7.0, 4.0, 1.0]
    """

    def __init__(self, graph: nx.Graph, weight: str = "weight") -> None:
        self.nodes: list[Any] = list(graph.nodes)
        self.index = {node: i for i, node in enumerate(self.nodes)}
        adjacency = nx.to_scipy_sparse_array(
            graph, nodelist=self.nodes, weight=weight, dtype=float, format="csr"
        )
        out_weight = np.asarray(adjacency.sum(axis=1)).ravel()
        self.dangling = out_weight == 0
        inverse = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=~self.dangling)
        self._transposed = (sp.diags_array(inverse) @ adjacency).T.tocsr()

    def personalized(
        self,
        seeds: Mapping[Any, float],
        *,
        alpha: float = 0.5,
        tol: float = 1e-6,
        max_iter: int = 100,
    ) -> np.ndarray:
        """Scores of all nodes (in ``self.nodes`` order, summing to 1) for ``seeds`` (node → weight).

        Raises ``ValueError`` when no seed is a node of the graph with positive weight.
        """
        size = len(self.nodes)
        restart = np.zeros(size)
        for node, weight in seeds.items():
            if node in self.index and weight > 0:
                restart[self.index[node]] += weight
        total = restart.sum()
        if total <= 0:
            raise ValueError("personalized PageRank needs at least one seed node with weight > 0")
        restart /= total
        scores = restart.copy()
        for _ in range(max_iter):
            previous = scores
            leaked = previous[self.dangling].sum()
            scores = (
                alpha * (self._transposed @ previous + leaked * restart) + (1 - alpha) * restart
            )
            if np.abs(scores - previous).sum() < size * tol:
                break
        return scores
