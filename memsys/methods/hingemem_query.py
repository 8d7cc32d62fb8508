"""HingeMem's query-adaptive retrieval: retrieval plans, node matching, rerank, adaptive stop.

Part of :mod:`memsys.methods.hingemem` (papers/hingemem.txt §3.3, Eq. 6, Fig. 3, Appendix A.1
and C): the query-analysis prompt (:data:`QUERY_PROMPT`, :data:`QUERY_SCHEMA`) or its rule-based
substitute (:func:`analyse_rules`) gives a :class:`QueryPlan`; :class:`RetrievalIndex` finds the
nodes a plan names and scores hyperedges; :func:`adaptive_stop` decides how many to keep.
The formulas and readings are in the docstring of :mod:`memsys.methods.hingemem`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memsys.embed import Embedder
from memsys.methods.hingemem_graph import (
    ELEMENTS,
    GRANULARITIES,
    LongTermMemory,
    normalize_name,
    parse_time_key,
    time_interval,
)
from memsys.methods.hingemem_lite import resolve_expression, topic_phrases
from memsys.nlp import PERSON_LABELS, PLACE_LABELS, TIME_LABELS

QUERY_TYPES = ("recall", "precision", "judgement")

QUERY_PROMPT = """\
You are a query analyzer. Read the query and output a structured search plan as JSON. The four \
elements you can search by are person, location, topic and time.

Query types (choose one):
- recall: the answer needs coverage: enumerating, counting or summarizing a timeline (e.g. \
"What activities does she enjoy?", "How many times did they meet?").
- precision: the answer is the single most relevant piece of evidence (e.g. "When did he move \
to Boston?", "What did she name her dog?").
- judgement: yes/no or existence decisions, or weighing evidence (e.g. "Has he ever been to \
Paris?", "Would she enjoy a pottery class?").

Rules: leave an element out of "constraints" when the query does not name it clearly; never \
invent values. Times are ISO 8601 timestamps with a granularity (year, month, day, hour, minute, \
approx), resolved against the reference date when it is known. "priority" lists only elements \
present in "constraints" that discriminate the answer, most important first.

Output JSON of this shape:
{"query_type": "recall | precision | judgement", "constraints": {"person": ["..."], \
"location": ["..."], "topic": ["..."], "time": [{"timestamp": "<ISO 8601>", "granularity": \
"<granularity>"}]}, "priority": ["<element>"]}"""

_NAMES = {"type": "array", "items": {"type": "string"}}
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query_type": {"enum": [*QUERY_TYPES, "judgment"]},
        "constraints": {
            "type": "object",
            "properties": {
                "person": _NAMES,
                "location": _NAMES,
                "topic": _NAMES,
                "time": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "timestamp": {"type": "string"},
                            "granularity": {"enum": list(GRANULARITIES)},
                        },
                        "required": ["timestamp"],
                    },
                },
            },
        },
        "priority": {"type": "array", "items": {"enum": list(ELEMENTS)}},
    },
    "required": ["query_type", "constraints", "priority"],
}


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


def query_messages(question: str, reference: datetime | None) -> list[dict[str, str]]:
    """The query-analysis request."""
    date = reference.date().isoformat() if reference else "unknown"
    return [
        {"role": "system", "content": QUERY_PROMPT},
        {"role": "user", "content": f"Reference date: {date}\nQuery: {question}\nOutput JSON:"},
    ]


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


def priority_weights(elements: Sequence[str]) -> dict[str, float]:
    """Linearly decaying weights summing to 1: rank r of k gets (k - r) / (k(k+1)/2).

    >>> priority_weights(["time", "topic"])
    {'time': 0.6666666666666666, 'topic': 0.3333333333333333}
    """
    total = len(elements) * (len(elements) + 1) / 2
    return {element: (len(elements) - rank) / total for rank, element in enumerate(elements)}


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
    """How many of ``scores`` (sorted best first) to keep (§3.3.3, Fig. 3).

    recall: keep while a score is >= ``recall_ratio``·max and the drop from the previous one is
    <= ``delta``; precision: scores >= ``precision_ratio``·max; judgement: softmax probabilities
    >= ``judgement_ratio``·max probability. With a non-positive maximum only the best is kept.

    >>> adaptive_stop([0.9, 0.85, 0.8, 0.6, 0.55], "recall")
    3
    >>> adaptive_stop([1.0, 0.85, 0.8, 0.79], "precision"), adaptive_stop([1.0, 0.9, 0.78, 0.7], "judgement")
    (3, 3)
    """
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
        # softmax(s_i)/softmax(s_max) = exp((s_i - s_max)/T) >= ratio
        floor = top + judgement_temperature * math.log(judgement_ratio)
        return sum(1 for score in scores if score >= floor - tolerance)
    return sum(1 for score in scores if score >= precision_ratio * top - tolerance)


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
    """The topic term of Eq. 6: how much closer a hyperedge is to the rare topics than to the
    common ones, with topic weights that follow the query.

    Each list's vectors lose the other list's subspace (the overlap); a topic's weight is
    1 - its highest cosine with the other list's topics (clipped to [0, 1]); for a query q the
    weights become a weighted softmax a_t ∝ w_t·exp(cos(q, t)/T); the term of hyperedge h is
    Σ_rare a_t cos(h, t) - Σ_common a_t cos(h, t).
    """

    def __init__(self, common: np.ndarray, rare: np.ndarray, temperature: float) -> None:
        self.temperature = temperature
        self.common = _residual(common, _basis(rare))
        self.rare = _residual(rare, _basis(common))
        cross = common @ rare.T if len(common) and len(rare) else None
        self.common_weights = (
            np.clip(1 - cross.max(axis=1), 0, 1) if cross is not None else np.ones(len(common))
        )
        self.rare_weights = (
            np.clip(1 - cross.max(axis=0), 0, 1) if cross is not None else np.ones(len(rare))
        )

    def _side(
        self, topics: np.ndarray, weights: np.ndarray, query: np.ndarray, edges: np.ndarray
    ) -> np.ndarray:
        if len(topics) == 0:
            return np.zeros(len(edges))
        logits = (topics @ query) / self.temperature
        attention = weights * np.exp(logits - logits.max())
        if attention.sum() <= 0:
            return np.zeros(len(edges))
        return edges @ topics.T @ (attention / attention.sum())

    def term(self, query: np.ndarray, edges: np.ndarray) -> np.ndarray:
        """The topic term of every hyperedge (rows of ``edges``) for ``query``."""
        rare = self._side(self.rare, self.rare_weights, query, edges)
        return rare - self._side(self.common, self.common_weights, query, edges)


class RetrievalIndex:
    """A memory's vectors and node lookups, built on first retrieval and kept with the memory."""

    def __init__(
        self, memory: LongTermMemory, embedder: Embedder, topic_temperature: float
    ) -> None:
        self.memory = memory
        self.embedder = embedder
        edges = memory.hyperedges
        self.descriptions = embedder.encode([edge.description for edge in edges])
        self.holders: dict[str, list[int]] = {}
        for index, edge in enumerate(edges):
            for uid in edge.uids():
                self.holders.setdefault(uid, []).append(index)
        self._named: dict[str, tuple[list[str], np.ndarray]] = {}
        self.contrast = TopicContrast(
            embedder.encode(memory.common_topics),
            embedder.encode(memory.rare_topics),
            topic_temperature,
        )

    def _node_vectors(self, element: str) -> tuple[list[str], np.ndarray]:
        if element not in self._named:
            nodes = [node for node in self.memory.nodes.values() if node.element == element]
            self._named[element] = (
                [n.uid for n in nodes],
                self.embedder.encode([n.name for n in nodes]),
            )
        return self._named[element]

    def match(self, plan: QueryPlan, threshold: float) -> dict[str, set[str]]:
        """Node uids each constrained element names: persons by identifier (or a name part, or a
        prefix of at least 3 letters), locations and topics by identifier or by name cosine >=
        ``threshold``, times by overlapping intervals."""
        nodes = self.memory.nodes
        matched: dict[str, set[str]] = {element: set() for element in ELEMENTS}
        person_keys = [node.key for node in nodes.values() if node.element == "person"]
        for name in plan.names.get("person", ()):
            for key in person_matches(normalize_name("person", name), person_keys):
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
        for timestamp, granularity in plan.times:
            low, high = time_interval(timestamp, granularity)
            for node in nodes.values():
                if node.element == "time":
                    parsed = parse_time_key(node.key)
                    if parsed:
                        start, end = time_interval(parsed[0], node.granularity or parsed[1])
                        if start < high and low < end:
                            matched["time"].add(node.uid)
        return matched

    def match_scores(
        self, matched: Mapping[str, set[str]], weights: Mapping[str, float]
    ) -> np.ndarray:
        """Per hyperedge, Σ_e w_e·[it holds a node matched for element e]."""
        scores = np.zeros(len(self.memory.hyperedges))
        for element, uids in matched.items():
            hit = {index for uid in uids for index in self.holders.get(uid, [])}
            if hit and weights.get(element):
                scores[sorted(hit)] += weights[element]
        return scores

    def salience_scores(self, weights: Mapping[str, float]) -> np.ndarray:
        """Per hyperedge, Σ_e w_e·(mean salience of its nodes of element e, 0 when it has none)."""
        nodes = self.memory.nodes
        scores = np.zeros(len(self.memory.hyperedges))
        for index, edge in enumerate(self.memory.hyperedges):
            for element, weight in weights.items():
                keys = edge.nodes.get(element, [])
                if keys:
                    scores[index] += weight * float(
                        np.mean([nodes[f"{element}:{k}"].salience for k in keys])
                    )
        return scores
