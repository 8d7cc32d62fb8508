"""A HippoRAG2-style semantic memory: passage and phrase nodes searched by personalized PageRank.

CAST's semantic index follows HippoRAG2 (Gutiérrez et al., 2025): OpenIE triples per passage,
phrase nodes for their subjects and objects, passage nodes, and a graph search by personalized
PageRank with dense passage retrieval beside it. It is a module of its own because it is a
memory of its own (HippoRAG is a baseline in CAST's paper) and depends on nothing CAST-specific;
it lives in CAST's folder because CAST is its only user.

Graph (networkx, edge ``kind``): ``contains`` passage–phrase (weight 1), ``relation``
phrase–phrase per triple (weight = number of triples), ``synonym`` phrase–phrase where the
phrases' embeddings have cosine ≥ a threshold (HippoRAG2: 0.8; weight = cosine). Phrase identity
is :func:`memsys.propositions.phrase_key`.

Seeding a query, two ways (the caller picks):

* **Query-to-triple linking** (HippoRAG2, :meth:`PassageGraphIndex.fact_seeds`): the query's
  embedding is compared with every distinct triple's (embedded as ``subject predicate object``),
  scores min-max normalized; the top ``link_top_k`` facts (after an optional recognition filter,
  which the caller runs) seed their subject and object phrase nodes with the fact's score divided
  by the number of passages containing the phrase, averaged over the facts that name the phrase.
* **Entity linking** (HippoRAG v1, :meth:`PassageGraphIndex.entity_seeds`): every query entity
  links to its phrase node (same key; else the nearest phrase by cosine, if ≥ ``link_threshold``),
  seeded with similarity / number of passages containing the phrase.

Search (:meth:`PassageGraphIndex.search`): every passage is also seeded with its min-max
normalized dense score × ``passage_node_weight`` (HippoRAG2: 0.05); PageRank with damping 0.5;
passages ranked by their PageRank score. With no phrase seed the dense ranking is returned (the
fallback of CAST §3.2 and of HippoRAG2 when its filter keeps no fact).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import networkx as nx
import numpy as np

from memsys.propositions import phrase_key

from .pagerank import PageRank

Triple = tuple[str, str, str]
#: Per passage: its phrases and its ``(subject, predicate, object)`` triples.
PassageFacts = tuple[list[str], list[Triple]]


class Encodes(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class SearchSettings:
    """How a query is seeded and how many passages come back."""

    top_k: int = 5
    link_threshold: float = 0.7
    link_top_k: int = 5
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


def distinct_facts(facts: Sequence[PassageFacts]) -> list[Triple]:
    """Every triple of every passage once (identity by the phrase keys of its parts), in order.

    >>> distinct_facts([([], [("Gina", "won", "a prize")]), ([], [("gina", "won", "prize")])])
    [('Gina', 'won', 'a prize')]
    """
    seen: dict[tuple[str, str, str], Triple] = {}
    for _, found in facts:
        for triple in found:
            key = (phrase_key(triple[0]), phrase_key(triple[1]), phrase_key(triple[2]))
            seen.setdefault(key, triple)
    return list(seen.values())


def fact_text(triple: Triple) -> str:
    """How a fact is embedded for query-to-triple linking."""
    return " ".join(triple)


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scores rescaled to [0, 1] (all ones where they are all equal)."""
    if scores.size == 0:
        return scores
    spread = float(scores.max() - scores.min())
    return (scores - scores.min()) / spread if spread else np.ones_like(scores)


class PassageGraphIndex:
    """A built graph with its passage, phrase and fact vectors and PageRank matrix."""

    def __init__(
        self,
        graph: nx.Graph,
        passage_vectors: np.ndarray,
        embedder: Encodes,
        facts: Sequence[Triple] = (),
    ) -> None:
        self.graph = graph
        self.embedder = embedder
        self.passage_vectors = passage_vectors
        self.phrases = phrase_nodes(graph)
        texts = [graph.nodes[n]["text"] for n in self.phrases]
        self.phrase_vectors = embedder.encode(texts) if texts else np.zeros((0, 1))
        self.facts = list(facts)
        self.fact_vectors = (
            embedder.encode([fact_text(f) for f in self.facts]) if self.facts else np.zeros((0, 1))
        )
        self.pagerank = PageRank(graph)
        self._passage_rows = [
            self.pagerank.index[f"passage:{i}"] for i in range(len(passage_vectors))
        ]

    def _specificity(self, node: str) -> int:
        """Passages containing a phrase node (HippoRAG's node specificity divisor)."""
        return max(1, sum(1 for n in self.graph.neighbors(node) if n.startswith("passage:")))

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
            seeds[node] = max(seeds.get(node, 0.0), score / self._specificity(node))
        return seeds

    def candidate_facts(self, query_vector: np.ndarray, top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` facts closest to the query: ``(fact index, min-max score)``."""
        if not self.facts:
            return []
        scores = min_max(self.fact_vectors @ query_vector)
        top = np.argsort(-scores, kind="stable")[:top_k]
        return [(int(i), float(scores[i])) for i in top]

    def fact_seeds(self, facts: Sequence[tuple[int, float]], link_top_k: int) -> dict[str, float]:
        """Phrase seeds of linked facts (HippoRAG2): each fact's subject and object get its score
        / passages containing the phrase, averaged over the facts naming the phrase; the
        ``link_top_k`` heaviest phrases are kept."""
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for index, score in facts:
            subject, _, obj = self.facts[index]
            for phrase in (subject, obj):
                node = f"phrase:{phrase_key(phrase)}"
                if node not in self.graph:
                    continue
                sums[node] = sums.get(node, 0.0) + score / self._specificity(node)
                counts[node] = counts.get(node, 0) + 1
        weights = {node: total / counts[node] for node, total in sums.items()}
        heaviest = sorted(weights.items(), key=lambda pair: -pair[1])[:link_top_k]
        return {node: weight for node, weight in heaviest if weight > 0}

    def search(
        self,
        query_vector: np.ndarray,
        phrase_seeds: dict[str, float],
        settings: SearchSettings,
        *,
        every: bool = False,
    ) -> list[tuple[int, float]]:
        """Top-k ``(passage index, score)``: PageRank from the phrase seeds (plus every passage's
        dense score × ``passage_node_weight``), else the dense ranking; ``every``: all passages
        (the top k first, the same ones)."""
        if len(self.passage_vectors) == 0:
            return []
        dense = self.passage_vectors @ query_vector
        scores = dense
        if phrase_seeds:
            seeds = dict(phrase_seeds)
            for position, score in enumerate(min_max(dense)):
                if score > 0:
                    seeds[f"passage:{position}"] = float(score) * settings.passage_node_weight
            ranks = self.pagerank.personalized(seeds, alpha=settings.damping)
            scores = ranks[self._passage_rows]
        top = np.argsort(-scores, kind="stable")[: None if every else settings.top_k]
        return [(int(i), float(scores[i])) for i in top]
