"""HingeMem: boundary-guided long-term memory with query-adaptive retrieval.

Paper: Zhong, Gao and Wang, "HingeMem: Boundary Guided Long-Term Memory with Query Adaptive
Retrieval for Scalable Dialogues", WWW '26 (papers/hingemem.txt). Implemented: §3.2.1 boundary
extraction (Eq. 1-3, prompt of Appendix A.1), §3.2.2 memory construction (node merging,
salience, Jaccard hyperedge merging at 0.8, common/rare topics; Eq. 4-5), §3.3.1 retrieval plans
(query-analysis prompt of Appendix A.1), §3.3.2 hyperedge rerank (Eq. 6), §3.3.3 adaptive stop
(Fig. 3, Appendix C: Delta = 0.1, 0.8·max, softmax 0.8·max), and the Table 3 ablations as options.
Helpers: :mod:`~memsys.methods.hingemem_graph` (memory model, options), :mod:`~.hingemem_extract`
(LLM extraction and clustering, prompts), :mod:`~.hingemem_lite` (the lite extractor) and
:mod:`~.hingemem_query` (plans, scoring, stop).

Construction. ``extraction: llm`` asks the backbone once per session for the element JSON; a
reply that is not valid JSON or breaks the schema is asked once more as a new request with a
reminder appended, and then that session falls back to the lite extractor (counted in
``memory.stats``). ``extraction: lite`` makes no LLM call: persons = speakers + spaCy PERSON
entities, locations = GPE/LOC/FAC entities, times = DATE/TIME entities resolved against the
session date (relative phrases included), topics = noun-chunk keywords; a new hyperedge starts
when a turn brings a new (non-speaker) person, time or location, an explicit marker ("by the
way"), or a topic shift, once the current one has ``min_segment_turns`` turns. Nodes merge by
identifier across sessions, hyperedges merge at Jaccard > ``merge_jaccard`` (recursively), then
salience is computed and common/rare topics are chosen (LLM, or by frequency in lite).

Retrieval. A :class:`~.hingemem_query.QueryPlan` (LLM, or rules in lite) gives the query type,
element constraints and priority. Candidates = the ``semantic_top_k`` hyperedges whose
description embeds nearest the question ∪ (node indexing) every hyperedge holding a matched
node. With the priority weights w_e (rank r of k elements: (k - r)/(k(k+1)/2)) the score is::

    score(h) = cos(q, d_h) + node_match_weight · Σ_e w_e·[h holds a matched node of e]   (NI)
             + salience_weight · Σ_e w_e·mean salience of h's nodes of e                (Q_S)
             + topic_weight · (Σ_rare a_t cos(d_h, t) - Σ_common a_t cos(d_h, t))         (Q_T)

(Q_T detailed in :class:`~.hingemem_query.TopicContrast`); candidates are sorted by score and cut
by the adaptive stop of the plan's type, or at ``top_k`` without it, then at ``max_items``.
Items are the kept hyperedges: "(persons: ...; time: ...; locations: ...; topics: ...)" and the
description; turn ids = the source turns of the span(s), timestamp = the (first) session date,
position = the conversation index of the first turn.

Readings taken where the paper is vague (config values where they are choices):

* Spans: the LLM's start turns are read as the boundaries; each memory covers its start to the
  turn before the next start (first from turn 1, last to the end), so every turn is in a memory.
* A hyperedge naming no time gets the session date (day) as its time node
  (``session_time_node``); sessions are natural boundaries (§3.2.1), so a lite session's first
  hyperedge has reason ``change_time``. Lite descriptions are the span's turns (no abstraction).
* Lite topic shift: the turn's keywords are all new to the hyperedge and the cosine between the
  turn's embedding and the mean of the hyperedge's turns is < ``topic_shift_threshold`` (0.5:
  between the 10th and 25th percentiles, 0.47 and 0.54, of the cosine between a turn and the
  mean of the four turns before it over LoCoMo conv-26, MiniLM); each
  lite hyperedge keeps its ``topics_per_edge`` most frequent keywords. Single-token PERSON
  entities at a sentence start count only when the name also appears elsewhere; a first name
  prefix of exactly one speaker's name ("Mel") is that speaker.
* Time identifiers are ISO 8601 at the node's granularity; ``approx`` is read as month; query
  times match time nodes whose intervals overlap. Unreadable LLM timestamps are dropped (counted).
* Salience (§3.2.2 names three dimensions, no formula): the mean of log-scaled frequency,
  degree and co-occurrence diversity (:mod:`~.hingemem_graph`).
* Eq. 6 as printed adds a topic term that depends on the query only, which cannot reorder
  hyperedges; it is read as the hyperedge's closeness to rare minus common topics, with topic
  weights from the query (the text's "proximity of the hyperedges to rare and common topics").
  Its scale (``topic_weight``), the salience scale (``salience_weight``) and the topic softmax
  temperature are not given: 0.1, 0.1 and 0.1.
* "Initial score = similarity" leaves node indexing nothing to change in a score-based cut, so
  a structural match adds ``node_match_weight`` (0.1) times the priority weight of each matched
  element. Lite node matching: persons by name, locations/topics by name cosine >= 0.7.
* Priority (lite rules): the element the question asks for (when → time, where → location,
  who → person) first, then constrained elements in the order time, location, topic, person.
* Recall stop: keep while score >= max/2 and each drop <= Delta (the first larger drop ends the
  list); judgement: softmax at temperature 1 over the candidates; a non-positive max keeps one.
* Ablations (Table 3): ① ``memory: text`` (turns, dense top-10, no extraction), ② no node
  indexing, no rerank, fixed top-10 (description RAG), ③ + node indexing, ④ + rerank, ⑤ all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from hashlib import sha256
from typing import Any

import numpy as np

from memsys.base import EXTRACTION_MODES, MemorySystem, Services, check_choices
from memsys.llm.backbone import Backbone
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import SamplingParams
from memsys.methods.hingemem_extract import (
    BOUNDARY_PROMPT,
    BOUNDARY_SCHEMA,
    TOPIC_PROMPT,
    TOPIC_SCHEMA,
    ask_json_many,
    boundary_messages,
    constrained,
    reply_to_memory,
    topic_messages,
)
from memsys.methods.hingemem_graph import (
    ELEMENTS,
    ConstructionOptions,
    Hyperedge,
    LongTermMemory,
    Node,
    compute_salience,
    frequency_topics,
    merge_hyperedges,
    merge_nodes,
)
from memsys.methods.hingemem_lite import LiteExtractor
from memsys.methods.hingemem_query import (
    QUERY_SCHEMA,
    QueryPlan,
    RetrievalIndex,
    adaptive_stop,
    analyse_rules,
    plan_from_reply,
    priority_weights,
    query_messages,
)
from memsys.types import Conversation, MemoryItem, Question, Retrieval, Session

MEMORY_KINDS = ("boundary", "text")


@dataclass(frozen=True)
class RetrievalOptions:
    """Query-adaptive retrieval settings; the first three are the Table 3 ablation switches."""

    node_indexing: bool = True
    rerank: bool = True
    adaptive_stop: bool = True
    top_k: int = 10
    semantic_top_k: int = 50
    max_items: int = 50
    node_match_threshold: float = 0.7
    node_match_weight: float = 0.1
    salience_weight: float = 0.1
    topic_weight: float = 0.1
    topic_temperature: float = 0.1
    recall_delta: float = 0.1
    recall_ratio: float = 0.5
    precision_ratio: float = 0.8
    judgement_ratio: float = 0.8
    judgement_temperature: float = 1.0
    query_analysis: str | None = None  # llm | rules; None follows ``extraction``
    analysis_max_tokens: int = 256


@dataclass(frozen=True)
class RetrievalTrace:
    """One retrieval explained: the plan, the ranked candidates with scores, how many were kept."""

    plan: QueryPlan
    ranked: tuple[int, ...]
    scores: tuple[float, ...]
    kept: int
    items: tuple[MemoryItem, ...]


class HingeMem(MemorySystem[LongTermMemory]):
    """Element-boundary hyperedges with query-adaptive retrieval (module docstring)."""

    construction_version = 1

    def __init__(
        self,
        services: Services,
        *,
        extraction: str = "lite",
        memory: str = "boundary",
        construction: dict[str, Any] | None = None,
        retrieval: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(services)
        check_choices(
            ("extraction", extraction, EXTRACTION_MODES), ("memory", memory, MEMORY_KINDS)
        )
        self.extraction = extraction
        self.memory_kind = memory
        self.construction = ConstructionOptions(**dict(construction or {}))
        self.retrieval = RetrievalOptions(**dict(retrieval or {}))
        analysis = self.retrieval.query_analysis or ("llm" if extraction == "llm" else "rules")
        if analysis not in ("llm", "rules"):
            raise ValueError(f"retrieval.query_analysis must be llm or rules, got {analysis!r}")
        self.query_analysis = analysis
        self.uses_llm = extraction == "llm" and memory == "boundary"
        self.analysis_counts: Counter[str] = Counter()
        self._plans: dict[tuple[str, datetime | None], QueryPlan] = {}
        self._query_parser = JSONReplyParser(QUERY_SCHEMA)

    # --- construction -------------------------------------------------------------------------

    def construction_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"memory": self.memory_kind}
        if self.memory_kind == "boundary":
            prompts = BOUNDARY_PROMPT + TOPIC_PROMPT if self.uses_llm else ""
            config |= {
                "extraction": self.extraction,
                "options": asdict(self.construction),
                "nlp": self.services.nlp.identity,
                "prompts_sha256": sha256(prompts.encode()).hexdigest()[:16],
            }
        return config

    def construct(self, conversation: Conversation) -> LongTermMemory:
        positions = {turn.turn_id: i for i, turn in enumerate(conversation.turns)}
        sessions = [session for session in conversation.sessions if session.turns]
        anchor = max((s.timestamp for s in sessions if s.timestamp), default=None)
        if self.memory_kind == "text":
            edges = [
                Hyperedge(
                    {e: [] for e in ELEMENTS},
                    f"{turn.speaker}: {turn.text}",
                    [],
                    [turn.turn_id],
                    turn.timestamp,
                    positions[turn.turn_id],
                    [turn.session_id],
                )
                for turn in conversation.turns
            ]
            return LongTermMemory({}, edges, anchor_date=anchor, stats={"memory": "text"})
        nodes, edges, stats = self._extract(sessions)
        for edge in edges:
            edge.position = min(positions[turn_id] for turn_id in edge.turn_ids)
        merged_nodes = merge_nodes(nodes)
        merged_edges = merge_hyperedges(edges, self.construction.merge_jaccard)
        for uid, salience in compute_salience(merged_nodes, merged_edges).items():
            merged_nodes[uid].salience = salience
        common, rare, topic_stats = self._topics(merged_nodes, merged_edges)
        stats |= {"hyperedges_before_merge": len(edges), "topic_clustering": topic_stats}
        return LongTermMemory(merged_nodes, merged_edges, common, rare, anchor, stats)

    def _extract(
        self, sessions: Sequence[Session]
    ) -> tuple[list[Node], list[Hyperedge], dict[str, Any]]:
        lite = LiteExtractor(self.services.nlp, self.services.embedder, self.construction)
        nodes: list[Node] = []
        edges: list[Hyperedge] = []
        stats: dict[str, Any] = {"mode": self.extraction, "sessions": len(sessions)}
        if self.extraction == "lite":
            for session in sessions:
                session_nodes, session_edges = lite.extract(session)
                nodes += session_nodes
                edges += session_edges
            return nodes, edges, {"extraction": stats}
        backbone = self._backbone()
        parser = JSONReplyParser(BOUNDARY_SCHEMA)
        params = SamplingParams(
            max_tokens=self.construction.max_tokens,
            json_schema=constrained(BOUNDARY_SCHEMA, self.construction.grammar_max_items),
        )

        def check(index: int, value: Any) -> str | None:
            try:
                reply_to_memory(value, sessions[index], self.construction.session_time_node)
            except (AttributeError, KeyError, TypeError, ValueError) as error:
                return f"unusable boundary memories: {error!r}"
            return None

        prompts = [boundary_messages(session) for session in sessions]
        answers = ask_json_many(backbone, prompts, params, parser, check)
        outcome: Counter[str] = Counter()
        for session, answer in zip(sessions, answers, strict=True):
            if answer.value is not None:
                session_nodes, session_edges, dropped = reply_to_memory(
                    answer.value, session, self.construction.session_time_node
                )
                outcome["llm_first_try" if answer.attempts == 1 else "llm_after_retry"] += 1
                outcome["times_dropped"] += dropped
            else:
                session_nodes, session_edges = lite.extract(session)
                outcome["fallback_lite"] += 1
                outcome["request_failed"] += (answer.error or "").startswith("request failed")
            nodes += session_nodes
            edges += session_edges
        stats |= {
            key: outcome[key]
            for key in (
                "llm_first_try",
                "llm_after_retry",
                "fallback_lite",
                "request_failed",
                "times_dropped",
            )
        }
        stats["parser"] = parser.counts()
        return nodes, edges, {"extraction": stats}

    def _topics(
        self, nodes: dict[str, Node], edges: Sequence[Hyperedge]
    ) -> tuple[list[str], list[str], dict[str, Any]]:
        k = self.construction.topics_per_list
        common, rare = frequency_topics(nodes, edges, k)
        topics = [node.name for node in nodes.values() if node.element == "topic"]
        if self.extraction == "lite" or len(topics) < 6:
            return common, rare, {"source": "frequency"}
        ranked = frequency_topics(nodes, edges, self.construction.max_clustering_topics)[0]
        by_lower = {name.lower(): name for name in ranked}

        def pick(names: Any) -> list[str]:
            return list(
                dict.fromkeys(by_lower[n.lower()] for n in map(str, names) if n.lower() in by_lower)
            )[:k]

        def check(index: int, value: Any) -> str | None:
            if not pick(value["common_topics"]) or not pick(value["rare_topics"]):
                return "each list needs at least one topic from INPUT_TOPICS"
            return None

        params = SamplingParams(
            max_tokens=self.construction.topic_max_tokens,
            json_schema=constrained(TOPIC_SCHEMA, self.construction.grammar_max_items),
        )
        parser = JSONReplyParser(TOPIC_SCHEMA)
        (answer,) = ask_json_many(self._backbone(), [topic_messages(ranked)], params, parser, check)
        if answer.value is None:
            return common, rare, {"source": "frequency_fallback", "error": answer.error}
        source = "llm" if answer.attempts == 1 else "llm_after_retry"
        return (
            pick(answer.value["common_topics"]),
            pick(answer.value["rare_topics"]),
            {"source": source},
        )

    def _backbone(self) -> Backbone:
        if self.services.backbone is None:
            raise ValueError(
                "HingeMem with an LLM step needs a backbone (services.backbone is None)"
            )
        return self.services.backbone

    # --- retrieval ----------------------------------------------------------------------------

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Embed the batch's questions; parse them (rules) or ask the LLM for their plans."""
        self.services.embedder.encode([question.question for question in questions])
        if self.query_analysis == "rules":
            self.services.nlp.parse([question.question for question in questions])
            return
        todo = [q for q in questions if (q.question, q.question_date) not in self._plans]
        self._plan_with_llm(todo)

    def _plan_with_llm(self, questions: Sequence[Question]) -> None:
        if not questions:
            return
        backbone = self._backbone().with_stage("retrieval")
        params = SamplingParams(
            max_tokens=self.retrieval.analysis_max_tokens, json_schema=constrained(QUERY_SCHEMA)
        )
        prompts = [query_messages(q.question, q.question_date) for q in questions]
        answers = ask_json_many(backbone, prompts, params, self._query_parser)
        for question, answer in zip(questions, answers, strict=True):
            if answer.value is None:
                self.analysis_counts["rules_fallback"] += 1
                continue
            self.analysis_counts["llm" if answer.attempts == 1 else "llm_after_retry"] += 1
            anchor = question.question_date or datetime(1970, 1, 1)
            self._plans[(question.question, question.question_date)] = plan_from_reply(
                answer.value, anchor
            )

    def plan(self, memory: LongTermMemory, question: Question) -> QueryPlan:
        """The retrieval plan of ``question`` (LLM answers are made in :meth:`prepare_queries`)."""
        key = (question.question, question.question_date)
        if self.query_analysis == "llm" and key not in self._plans:
            self._plan_with_llm([question])
        if key in self._plans:
            return self._plans[key]
        anchor = question.question_date or memory.anchor_date or datetime(1970, 1, 1)
        (doc,) = self.services.nlp.parse([question.question])
        persons = [node.key for node in memory.nodes.values() if node.element == "person"]
        plan = analyse_rules(question.question, doc, anchor, persons)
        if self.query_analysis == "llm":
            return QueryPlan(
                plan.query_type, plan.names, plan.times, plan.priority, "rules_fallback"
            )
        return plan

    def index(self, memory: LongTermMemory) -> RetrievalIndex:
        """The memory's retrieval index, built once and kept with it (never serialized)."""
        if "index" not in memory.runtime:
            memory.runtime["index"] = RetrievalIndex(
                memory, self.services.embedder, self.retrieval.topic_temperature
            )
        return memory.runtime["index"]

    def explain(self, memory: LongTermMemory, question: Question) -> RetrievalTrace:
        """Plan, candidates, scores and the stop decision for one question."""
        options = self.retrieval
        plan = self.plan(memory, question)
        edges = memory.hyperedges
        if not edges:
            return RetrievalTrace(plan, (), (), 0, ())
        index = self.index(memory)
        query = self.services.embedder.encode([question.question])[0]
        scores = index.descriptions @ query
        candidates = set(np.argsort(-scores, kind="stable")[: options.semantic_top_k].tolist())
        weights = priority_weights(plan.ranked_elements())
        if options.node_indexing:
            matched = index.match(plan, options.node_match_threshold)
            candidates |= {
                i for uids in matched.values() for uid in uids for i in index.holders.get(uid, [])
            }
            scores = scores + options.node_match_weight * index.match_scores(matched, weights)
        if options.rerank:
            scores = scores + options.salience_weight * index.salience_scores(weights)
            scores = scores + options.topic_weight * index.contrast.term(query, index.descriptions)
        ranked = sorted(candidates, key=lambda i: (-scores[i], edges[i].position))
        ranked_scores = [float(scores[i]) for i in ranked]
        if options.adaptive_stop:
            kept = adaptive_stop(
                ranked_scores,
                plan.query_type,
                delta=options.recall_delta,
                recall_ratio=options.recall_ratio,
                precision_ratio=options.precision_ratio,
                judgement_ratio=options.judgement_ratio,
                judgement_temperature=options.judgement_temperature,
            )
        else:
            kept = options.top_k
        kept = min(kept, options.max_items, len(ranked))
        items = tuple(
            self._item(memory, edges[i], s)
            for i, s in zip(ranked[:kept], ranked_scores, strict=False)
        )
        return RetrievalTrace(plan, tuple(ranked), tuple(ranked_scores), kept, items)

    def retrieve(self, memory: LongTermMemory, question: Question) -> Retrieval:
        return Retrieval(self.explain(memory, question).items)

    @staticmethod
    def _item(memory: LongTermMemory, edge: Hyperedge, score: float) -> MemoryItem:
        labels = (
            ("person", "persons"),
            ("time", "time"),
            ("location", "locations"),
            ("topic", "topics"),
        )
        parts = []
        for element, label in labels:
            names = [memory.nodes[f"{element}:{key}"].name for key in edge.nodes.get(element, [])]
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        text = f"({'; '.join(parts)})\n{edge.description}" if parts else edge.description
        kind = "hyperedge" if parts else "turn"
        return MemoryItem(text, tuple(edge.turn_ids), edge.timestamp, edge.position, score, kind)

    # --- serialization ------------------------------------------------------------------------

    def dump_memory(self, memory: LongTermMemory) -> dict[str, Any]:
        return memory.to_json()

    def load_memory(self, payload: dict[str, Any]) -> LongTermMemory:
        return LongTermMemory.from_json(payload)

    @staticmethod
    def statistics(memory: LongTermMemory) -> dict[str, Any]:
        """Table 4's counts for one memory, with how it was built."""
        return {**memory.counts(), "stats": memory.stats}
