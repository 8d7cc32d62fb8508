"""Graph memories as stored: networkx node-link JSON (no pickle) and node and edge counts by kind.

FraCom's propositional graph and CAST's HippoRAG-style semantic graph are networkx graphs whose
nodes and edges carry a ``kind`` attribute. Their memories are cached as node-link JSON
(:func:`graph_to_json`, :func:`graph_from_json`) and counted by kind for the statistics tables
(:func:`count_kinds`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import networkx as nx


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
