"""HingeMem's "what to retrieve" (papers/hingemem.txt §3.3.1): the nodes a retrieval plan names,
the hyperedges that hold them, and the candidate set handed to the rerank.

"From a structural perspective, ... HingeMem identifies the corresponding nodes. This enables the
system to obtain hyperedges that encompass these nodes. From a semantic perspective, HingeMem
matches the query with the similarity of the embeddings of the hyperedges' descriptions.
Consequently, HingeMem derives a set of candidate hyperedges" (§3.3.1), and node indexing is built
"on semantic retrieval" (§4.3.1). The structural set is routed: the hyperedges holding a matched
node of every constrained element, taken in the plan's priority order (an element whose nodes
would leave nothing is skipped). Candidate rules (``candidate_rule``):

- ``semantic_union`` (default): the semantic neighbours ∪ the routed hyperedges;
- ``intersect``: the routed hyperedges alone (the semantic neighbours when nothing routes);
- ``bonus``: the semantic neighbours only; routing enters the score (``node_match_weight``);
- ``union``: the semantic neighbours ∪ every holder of any matched node (the earliest reading).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from memsys.embed import Embedder

from .graph import ELEMENTS, LongTermMemory, normalize_name, parse_time_key, time_interval
from .query import QueryPlan, person_matches
from .rerank import TopicContrast, mean_salience

CANDIDATE_RULES = ("semantic_union", "intersect", "bonus", "union")


@dataclass(frozen=True)
class Routes:
    """Per element, the node uids a plan matched and the hyperedges they lead to (a hyperedge
    with no time node is reached by a query time through its session date)."""

    nodes: Mapping[str, set[str]]
    edges: Mapping[str, set[int]] = field(default_factory=dict)

    def all_edges(self) -> set[int]:
        return {index for hit in self.edges.values() for index in hit}


def route(routes: Routes, elements: Iterable[str]) -> set[int] | None:
    """The hyperedges holding a matched node of every routable element, in priority order; an
    element that matched nothing, or would leave nothing, is skipped; ``None``: nothing routed.

    >>> route(Routes({}, {"time": {1, 2}, "person": {2, 3}, "topic": {9}}), ["time", "topic", "person"])
    {2}
    """
    candidates: set[int] | None = None
    for element in elements:
        hit = routes.edges.get(element)
        if not hit:
            continue
        narrowed = set(hit) if candidates is None else candidates & hit
        if narrowed:
            candidates = narrowed
    return candidates


def candidate_set(
    rule: str, nearest: set[int], routes: Routes, elements: Iterable[str]
) -> tuple[set[int], set[int]]:
    """The candidates under ``rule`` and the structural hyperedges among them (empty: nothing
    routed). ``bonus`` keeps the semantic candidates; its structure enters the score instead.

    >>> routes = Routes({}, {"time": {1, 2}, "person": {2, 3}})
    >>> [candidate_set(r, {0, 1}, routes, ["time", "person"]) for r in CANDIDATE_RULES]
    [({0, 1, 2}, {2}), ({2}, {2}), ({0, 1}, {1, 2, 3}), ({0, 1, 2, 3}, {1, 2, 3})]
    """
    if rule in ("bonus", "union"):
        structural = routes.all_edges()
        return (nearest if rule == "bonus" else nearest | structural), structural
    routed = route(routes, elements) or set()
    if rule == "semantic_union":
        return nearest | routed, routed
    return routed or nearest, routed


class RetrievalIndex:
    """A memory's vectors and node lookups, built on first retrieval and kept with the memory
    (it depends on the memory and the embedder only, never on retrieval options)."""

    def __init__(self, memory: LongTermMemory, embedder: Embedder) -> None:
        self.memory = memory
        self.embedder = embedder
        edges = memory.hyperedges
        self.descriptions = embedder.encode([edge.description for edge in edges])
        self.holders: dict[str, list[int]] = {}
        for index, edge in enumerate(edges):
            for uid in edge.uids():
                self.holders.setdefault(uid, []).append(index)
        nodes = memory.nodes.values()
        self.person_keys = [node.key for node in nodes if node.element == "person"]
        self.time_nodes = [  # (uid, interval) of every time node whose key reads as a time
            (node.uid, time_interval(parsed[0], node.granularity or parsed[1]))
            for node in nodes
            if node.element == "time" and (parsed := parse_time_key(node.key))
        ]
        self.undated_days = [  # (index, its day) of the hyperedges without a time node
            (index, time_interval(edge.timestamp, "day"))
            for index, edge in enumerate(edges)
            if not edge.nodes.get("time") and edge.timestamp
        ]
        self._named: dict[str, tuple[list[str], np.ndarray]] = {}
        self._salience: dict[str, np.ndarray] = {}
        self.contrast = TopicContrast(
            embedder.encode(memory.common_topics), embedder.encode(memory.rare_topics)
        )

    def _node_vectors(self, element: str) -> tuple[list[str], np.ndarray]:
        if element not in self._named:
            nodes = [node for node in self.memory.nodes.values() if node.element == element]
            self._named[element] = (
                [n.uid for n in nodes],
                self.embedder.encode([n.name for n in nodes]),
            )
        return self._named[element]

    def mean_salience(self, element: str) -> np.ndarray:
        """:func:`~memsys.methods.hingemem.rerank.mean_salience`, once per element."""
        if element not in self._salience:
            self._salience[element] = mean_salience(self.memory, element)
        return self._salience[element]

    def match(self, plan: QueryPlan, threshold: float) -> Routes:
        """The nodes each constrained element names: persons by identifier (or a name part, or a
        prefix of at least 3 letters), locations and topics by identifier or by name cosine >=
        ``threshold``, times by overlapping intervals; and the hyperedges they reach."""
        nodes = self.memory.nodes
        matched: dict[str, set[str]] = {element: set() for element in ELEMENTS}
        for name in plan.names.get("person", ()):
            for key in person_matches(normalize_name("person", name), self.person_keys):
                matched["person"].add(f"person:{key}")
        for element in ("location", "topic"):
            names = plan.names.get(element, ())
            if not names:
                continue
            uids, vectors = self._node_vectors(element)
            exact = {f"{element}:{normalize_name(element, name)}" for name in names}
            matched[element] |= exact & set(nodes)
            if len(uids):
                similar = self.embedder.encode(list(names)) @ vectors.T
                matched[element] |= {
                    uids[j] for j in np.nonzero(similar.max(axis=0) >= threshold)[0]
                }
        intervals = [time_interval(timestamp, granularity) for timestamp, granularity in plan.times]
        if intervals:
            matched["time"] = {uid for uid, span in self.time_nodes if _overlaps(span, intervals)}
        edges = {
            element: {index for uid in uids for index in self.holders.get(uid, [])}
            for element, uids in matched.items()
        }
        if intervals:
            edges["time"] |= {i for i, day in self.undated_days if _overlaps(day, intervals)}
        return Routes(matched, edges)

    def match_scores(self, routes: Routes, weights: Mapping[str, float]) -> np.ndarray:
        """Per hyperedge, Σ_e w_e·[it is reached through element e] (the node-match option)."""
        scores = np.zeros(len(self.memory.hyperedges))
        for element, hit in routes.edges.items():
            if hit and weights.get(element):
                scores[sorted(hit)] += weights[element]
        return scores


def _overlaps(interval: tuple, intervals: Iterable[tuple]) -> bool:
    start, end = interval
    return any(start < high and low < end for low, high in intervals)
