"""Graph memories' shared machinery: JSON (de)serialization, type counts, personalized PageRank.

FraCom's propositional graph and CAST's HippoRAG-style semantic graph are networkx graphs whose
nodes and edges carry a ``kind`` attribute. They are stored as networkx node-link JSON (no
pickle), counted by kind for the statistics tables, and — for CAST — ranked by personalized
PageRank. :class:`PageRank` builds the row-normalized transition matrix once per graph and then
answers each query by scipy sparse power iteration, with networkx's semantics (``alpha`` is the
probability of following an edge; dangling nodes jump back to the personalization vector;
convergence when the L1 change is below ``len(nodes) * tol``), so its scores match
``networkx.pagerank(graph, alpha, personalization)``, which rebuilds that matrix on every call
(``scripts/bench_ppr.py`` measures both).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp


def graph_to_json(graph: nx.Graph) -> dict[str, Any]:
    """A graph as node-link JSON (node and edge attributes kept)."""
    return nx.node_link_data(graph, edges="edges")


def graph_from_json(data: Mapping[str, Any]) -> nx.Graph:
    """Inverse of :func:`graph_to_json`."""
    return nx.node_link_graph(dict(data), edges="edges")


def count_kinds(graph: nx.Graph) -> dict[str, dict[str, int]]:
    """Nodes and edges per ``kind`` attribute (``"?"`` where a node or edge has none).

    >>> g = nx.Graph()
    >>> g.add_edge("p", "a", kind="argument")
    >>> g.nodes["p"]["kind"] = "proposition"
    >>> count_kinds(g)
    {'nodes': {'?': 1, 'proposition': 1}, 'edges': {'argument': 1}}
    """
    nodes = Counter(kind for _, kind in graph.nodes(data="kind", default="?"))
    edges = Counter(kind for _, _, kind in graph.edges(data="kind", default="?"))
    return {"nodes": dict(sorted(nodes.items())), "edges": dict(sorted(edges.items()))}


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
