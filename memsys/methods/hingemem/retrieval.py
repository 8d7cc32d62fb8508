"""HingeMem's query-adaptive retrieval (papers/hingemem.txt §3.3): the plan, what to retrieve,
and how much to keep; :mod:`.rerank` is Eq. 6's score between the last two.

Plans (§3.3.1, the query-analysis prompt of Appendix A.1, :data:`.prompts.QUERY_PROMPT`): the
query type that sets the depth, the element constraints that route, and their priority; the LLM's
reply is read by :func:`plan_from_reply`, and :func:`analyse_rules` is the lite substitute (spaCy
entities, resolved dates, noun-chunk keywords, question-word cues).

What to retrieve (§3.3.1): the nodes a plan names, the hyperedges that hold them, and the
candidate set handed to the rerank. "From a structural perspective, ... HingeMem identifies the
corresponding nodes. This enables the system to obtain hyperedges that encompass these nodes.
From a semantic perspective, HingeMem matches the query with the similarity of the embeddings of
the hyperedges' descriptions. Consequently, HingeMem derives a set of candidate hyperedges"
(§3.3.1), and node indexing is built "on semantic retrieval" (§4.3.1). The structural set is
routed: the hyperedges holding a matched node of every constrained element, taken in the plan's
priority order (an element whose nodes would leave nothing is skipped). Candidate rules
(``candidate_rule``):

- ``semantic_union`` (default): the semantic neighbours ∪ the routed hyperedges;
- ``intersect``: the routed hyperedges alone (the semantic neighbours when nothing routes);
- ``bonus``: the semantic neighbours only; routing enters the score (``node_match_weight``);
- ``union``: the semantic neighbours ∪ every holder of any matched node (the earliest reading).

How much to keep, the adaptive stop (§3.3.3, Figure 3, Appendix C): how many of the reranked
candidates a question of each retrieval type keeps. Rules, not caps, decide the depth.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memsys.embed import Embedder
from memsys.nlp import PERSON_LABELS, PLACE_LABELS, TIME_LABELS
from memsys.types import MemoryItem

from .lite import resolve_expression, topic_phrases
from .memory import (
    ELEMENTS,
    GRANULARITIES,
    LongTermMemory,
    normalize_name,
    parse_time_key,
    time_interval,
)
from .rerank import TopicContrast, mean_salience

QUERY_TYPES = ("recall", "precision", "judgement")
CANDIDATE_RULES = ("semantic_union", "intersect", "bonus", "union")


@dataclass(frozen=True)
class RetrievalOptions:
    """Query-adaptive retrieval settings (docs/methods/hingemem.md, "Named values").

    ``node_indexing``, ``rerank`` and ``adaptive_stop`` are the Table 3 ablation switches; the
    Eq. 6 weights default to the paper's (1, 1); ``candidate_rule`` is how node indexing joins
    semantic retrieval (module docstring); ``node_match_weight`` (read by the ``bonus`` rule only)
    and ``max_items`` are harness additions. The YAML's ``retrieval`` group, checked by
    :meth:`memsys.methods.hingemem.HingeMemOptions.check`.
    """

    node_indexing: bool = True
    rerank: bool = True
    adaptive_stop: bool = True
    candidate_rule: str = "semantic_union"
    top_k: int = 10
    semantic_top_k: int = 50
    max_items: int | None = None
    node_match_threshold: float = 0.7
    node_match_weight: float = 1.0
    salience_weight: float = 1.0
    topic_weight: float = 1.0
    topic_term: str = "query"
    topic_temperature: float = 0.1
    recall_delta: float = 0.1
    recall_ratio: float = 0.5
    precision_ratio: float = 0.8
    judgement_ratio: float = 0.8
    judgement_temperature: float = 1.0
    query_analysis: str | None = None  # llm | rules; None follows ``extraction``
    analysis_max_tokens: int = 256


# --- plans ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryPlan:
    """What to retrieve (constraints per element, their priority) and how much (the type).

    ``names`` holds person, location and topic constraints; ``times`` ``(timestamp,
    granularity)`` pairs; ``source`` says who made the plan (``llm``, ``rules`` or
    ``rules_fallback`` after an unusable LLM answer).
    """

    query_type: str
    names: Mapping[str, tuple[str, ...]]
    times: tuple[tuple[datetime, str], ...]
    priority: tuple[str, ...]
    source: str = "rules"

    def ranked_elements(self) -> list[str]:
        """Priority first, then the other constrained elements (time, location, topic, person)."""
        constrained = [e for e in ("time", "location", "topic", "person") if self.has(e)]
        return list(dict.fromkeys([*self.priority, *constrained]))

    def has(self, element: str) -> bool:
        return bool(self.times) if element == "time" else bool(self.names.get(element))


def plan_from_reply(value: Mapping[str, Any], anchor: datetime) -> QueryPlan:
    """A plan from a schema-valid query-analysis reply; unreadable times are dropped."""
    constraints = value.get("constraints") or {}
    names = {
        element: tuple(str(name) for name in constraints.get(element) or [] if str(name).strip())
        for element in ("person", "location", "topic")
    }
    times = []
    for item in constraints.get("time") or []:
        text = str(item.get("timestamp", ""))
        parsed = parse_time_key(text) or resolve_expression(text, anchor)
        if parsed:
            granularity = item.get("granularity")
            times.append((parsed[0], granularity if granularity in GRANULARITIES else parsed[1]))
    query_type = "judgement" if value["query_type"] == "judgment" else value["query_type"]
    priority = tuple(dict.fromkeys(value.get("priority") or []))
    return QueryPlan(query_type, names, tuple(times), priority, "llm")


_AUXILIARIES = frozenset(
    str.split(
        "is are was were am do does did has have had can could will would should shall may might"
    )
)
_RECALL_CUES = re.compile(
    r"\bhow (?:many|often)\b|\blist\b|\bin common\b|\b(?:what|which) (?:kinds|types|sorts) of\b"
    r"|\ball\b|\bevery\b|\bboth\b|^(?:what|who) (?:are|were)\b"
)
_ASKED = (
    (
        "time",
        re.compile(r"^when\b|\b(?:what|which) (?:year|month|day|date|time)\b|\bhow long ago\b"),
    ),
    ("location", re.compile(r"^where\b|\b(?:what|which) (?:city|country|place|state|town)\b")),
    ("person", re.compile(r"^(?:who|whom|whose)\b")),
)


def query_type_rules(question: str, doc: Any) -> str:
    """Recall for counting/enumerating cues or a plural ``what/which`` head; judgement for a
    question opening with an auxiliary verb and offering no alternatives; else precision."""
    text = " ".join(question.lower().split())
    if _RECALL_CUES.search(text):
        return "recall"
    words = text.split()
    if words and words[0] in _AUXILIARIES and " or " not in text:
        return "judgement"
    for token in doc:
        if token.lower_ in ("what", "which") and token.dep_ == "det" and token.head.tag_ == "NNS":
            return "recall"
    return "precision"


def analyse_rules(
    question: str, doc: Any, anchor: datetime, known_persons: Collection[str] = ()
) -> QueryPlan:
    """The rule-based plan: type by :func:`query_type_rules`, constraints from NER, resolved dates
    and noun-chunk keywords, priority = the asked element, then the constrained ones.

    Persons are PERSON entities plus proper nouns that name one of ``known_persons`` (the
    memory's person identifiers; spaCy's small model misses many first names in questions).
    """
    persons, locations, times = [], [], []
    for entity in doc.ents:
        if entity.label_ in PERSON_LABELS:
            persons.append(entity.text)
        elif entity.label_ in PLACE_LABELS:
            locations.append(entity.text)
        elif entity.label_ in TIME_LABELS:
            resolved = resolve_expression(entity.text, anchor)
            if resolved:
                times.append(resolved)
    for token in doc:
        if (
            token.pos_ == "PROPN"
            and token.ent_type_ not in PLACE_LABELS | TIME_LABELS
            and person_matches(normalize_name("person", token.text), known_persons)
        ):
            persons.append(token.text)
    taken = {normalize_name("topic", name) for name in persons + locations}
    topics = [
        surface
        for key, surface in topic_phrases(doc)
        if key not in taken and not person_matches(normalize_name("person", key), known_persons)
    ]
    names = {
        "person": tuple(dict.fromkeys(persons)),
        "location": tuple(dict.fromkeys(locations)),
        "topic": tuple(dict.fromkeys(topics)),
    }
    text = " ".join(question.lower().split())
    asked = [element for element, pattern in _ASKED if pattern.search(text)]
    plan = QueryPlan(query_type_rules(question, doc), names, tuple(times), ())
    priority = tuple(dict.fromkeys(asked + plan.ranked_elements()))
    return QueryPlan(plan.query_type, names, plan.times, priority)


def person_matches(key: str, person_keys: Collection[str]) -> list[str]:
    """The person identifiers a name identifier matches: equal, all of its words among the
    identifier's words, or (one word of 3+ letters) a prefix of one of them ("mel" → "melanie").

    >>> person_matches("mel", ["melanie", "caroline", "dr mel smith"])
    ['melanie', 'dr mel smith']
    """
    if not key:
        return []
    words = set(key.split())
    found = []
    for candidate in person_keys:
        parts = candidate.split()
        if (
            key == candidate
            or words <= set(parts)
            or (len(key) >= 3 and len(words) == 1 and any(p.startswith(key) for p in parts))
        ):
            found.append(candidate)
    return found


# --- what to retrieve ----------------------------------------------------------------------------


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


# --- how much to keep ----------------------------------------------------------------------------


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


# --- one retrieval explained ---------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalTrace:
    """One retrieval explained: the plan, the ranked candidates with scores, how many were kept,
    how many hyperedges element routing reached, whether the stop rules (not the end of the
    candidate list) set the depth, whether the top candidate is not the most similar one, and
    (``rest``) the order the ranking metrics score past the candidates."""

    plan: QueryPlan
    ranked: tuple[int, ...]
    scores: tuple[float, ...]
    kept: int
    items: tuple[MemoryItem, ...]
    structural: int = 0
    hyperedges: int = 0
    stop_decided: bool = False
    top_moved: bool = False
    #: For the ranking metrics only: every hyperedge that is no candidate, by the same score.
    rest: tuple[int, ...] = ()

    def share(self, count: int) -> float:
        """``count`` as a share of the memory's hyperedges."""
        return round(count / self.hyperedges, 4) if self.hyperedges else 0.0

    def summary(self) -> dict[str, Any]:
        """What the run records per question (the ablation table's depth distributions)."""
        return {
            "group": self.plan.query_type,
            "routed": self.structural > 0,
            "candidates": len(self.ranked),
            "candidate_fraction": self.share(len(self.ranked)),
            "routed_fraction": self.share(self.structural),
            "kept": self.kept,
            "stop_decided": self.stop_decided,
            "top_moved": self.top_moved,
        }
