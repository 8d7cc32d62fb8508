"""A HippoRAG2-style semantic memory: passage and phrase nodes searched by personalized PageRank.

CAST's semantic index follows HippoRAG2 (Gutiérrez et al., 2025): OpenIE triples per passage,
phrase nodes for their subjects and objects, passage nodes, and a graph search by personalized
PageRank with dense passage retrieval beside it. It is kept apart from the method because it is
a memory of its own (HippoRAG is a baseline in CAST's paper) and depends on nothing CAST-specific.

Graph (networkx, edge ``kind``): ``contains`` passage–phrase (weight 1), ``relation``
phrase–phrase per triple (weight = number of triples), ``synonym`` phrase–phrase where the
phrases' embeddings have cosine ≥ a threshold (HippoRAG2: 0.8; weight = cosine). Phrase identity
is :func:`memsys.propositions.phrase_key`.

Search, per query: every query entity links to its phrase node (same key; else the nearest phrase
by cosine, if ≥ ``link_threshold``), seeded with similarity / number of passages containing the
phrase (HippoRAG's node specificity, which HippoRAG2's code keeps); every passage is seeded with
its min-max-normalized dense score × ``passage_node_weight`` (HippoRAG2: 0.05); PageRank with
damping 0.5; passages ranked by their PageRank score. Where no entity links, the dense ranking is
returned (the fallback of CAST §3.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import networkx as nx
import numpy as np

from memsys.graph import PageRank
from memsys.propositions import phrase_key

#: Per passage: its phrases and its ``(subject, predicate, object)`` triples.
PassageFacts = tuple[list[str], list[tuple[str, str, str]]]


class Encodes(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class SearchSettings:
    """How a query is seeded and how many passages come back."""

    top_k: int = 5
    link_threshold: float = 0.7
    passage_node_weight: float = 0.05
    damping: float = 0.5


def build_graph(
    facts: Sequence[PassageFacts], embedder: Encodes, synonym_threshold: float = 0.8
) -> nx.Graph:
    """The passage–phrase graph of ``facts`` (passage ``i`` is node ``passage:i``)."""
    graph: nx.Graph = nx.Graph()
    for position, (phrases, found) in enumerate(facts):
        passage = f"passage:{position}"
        graph.add_node(passage, kind="passage")
        for phrase in phrases:
            node = f"phrase:{phrase_key(phrase)}"
            if node not in graph:
                graph.add_node(node, kind="phrase", text=phrase)
            graph.add_edge(passage, node, kind="contains", weight=1.0)
        for subject, _, obj in found:
            a, b = f"phrase:{phrase_key(subject)}", f"phrase:{phrase_key(obj)}"
            if a == b or a not in graph or b not in graph:
                continue
            if graph.has_edge(a, b) and graph.edges[a, b]["kind"] == "relation":
                graph.edges[a, b]["weight"] += 1.0
            elif not graph.has_edge(a, b):
                graph.add_edge(a, b, kind="relation", weight=1.0)
    nodes = phrase_nodes(graph)
    if not nodes:
        return graph
    vectors = embedder.encode([graph.nodes[n]["text"] for n in nodes])
    for start in range(0, len(nodes), 512):
        similarity = vectors[start : start + 512] @ vectors.T
        for row, column in zip(*np.nonzero(similarity >= synonym_threshold), strict=True):
            a, b = nodes[start + row], nodes[column]
            if start + row < column and not graph.has_edge(a, b):
                graph.add_edge(a, b, kind="synonym", weight=float(similarity[row, column]))
    return graph


def phrase_nodes(graph: nx.Graph) -> list[str]:
    """The graph's phrase nodes, in insertion order."""
    return [node for node, kind in graph.nodes(data="kind") if kind == "phrase"]


class PassageGraphIndex:
    """A built graph with its passage and phrase vectors and PageRank matrix, for many queries."""

    def __init__(self, graph: nx.Graph, passage_vectors: np.ndarray, embedder: Encodes) -> None:
        self.graph = graph
        self.embedder = embedder
        self.passage_vectors = passage_vectors
        self.phrases = phrase_nodes(graph)
        texts = [graph.nodes[n]["text"] for n in self.phrases]
        self.phrase_vectors = embedder.encode(texts) if texts else np.zeros((0, 1))
        self.pagerank = PageRank(graph)
        self._passage_rows = [
            self.pagerank.index[f"passage:{i}"] for i in range(len(passage_vectors))
        ]

    def entity_seeds(self, entities: Sequence[str], link_threshold: float) -> dict[str, float]:
        """Phrase nodes the entities link to, weighted by similarity / passages containing them."""
        if not entities or not self.phrases:
            return {}
        similarity = self.embedder.encode(list(entities)) @ self.phrase_vectors.T
        seeds: dict[str, float] = {}
        for entity, row in zip(entities, similarity, strict=True):
            node = f"phrase:{phrase_key(entity)}"
            if node in self.graph:
                score = 1.0
            else:
                best = int(np.argmax(row))
                node, score = self.phrases[best], float(row[best])
                if score < link_threshold:
                    continue
            passages = sum(1 for n in self.graph.neighbors(node) if n.startswith("passage:"))
            seeds[node] = max(seeds.get(node, 0.0), score / max(1, passages))
        return seeds

    def seeds(
        self, query_vector: np.ndarray, entities: Sequence[str], settings: SearchSettings
    ) -> tuple[dict[str, float], np.ndarray]:
        """All PageRank seeds of a query (empty when no entity links) and its dense scores."""
        dense = self.passage_vectors @ query_vector
        seeds = self.entity_seeds(entities, settings.link_threshold)
        if seeds:
            spread = float(dense.max() - dense.min()) or 1.0
            for position, score in enumerate((dense - dense.min()) / spread):
                if score > 0:
                    seeds[f"passage:{position}"] = float(score) * settings.passage_node_weight
        return seeds, dense

    def search(
        self, query_vector: np.ndarray, entities: Sequence[str], settings: SearchSettings
    ) -> list[tuple[int, float]]:
        """Top-k ``(passage index, score)``: PageRank from linked entities, else dense."""
        if len(self.passage_vectors) == 0:
            return []
        seeds, dense = self.seeds(query_vector, entities, settings)
        scores = dense
        if seeds:
            ranks = self.pagerank.personalized(seeds, alpha=settings.damping)
            scores = ranks[self._passage_rows]
        top = np.argsort(-scores, kind="stable")[: settings.top_k]
        return [(int(i), float(scores[i])) for i in top]
