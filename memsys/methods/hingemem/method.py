"""HingeMem: boundary-guided long-term memory with query-adaptive retrieval.

Paper: Zhong, Gao and Wang, "HingeMem: Boundary Guided Long-Term Memory with Query Adaptive
Retrieval for Scalable Dialogues", WWW '26 (papers/hingemem.txt). The fidelity card,
``docs/methods/hingemem.md``, maps every section, equation and prompt to code and states each
reading taken where the paper is vague. Modules: :mod:`.memory` (the memory: nodes, hyperedges,
salience, Jaccard merging; Eq. 2-5), :mod:`.prompts` (Appendix A.1's three prompts and their
schemas), :mod:`.extract` (the boundary extraction's reply read into memory; Eq. 1),
:mod:`.lite` (the extractor that makes no LLM call), :mod:`.retrieval` (plans, candidates:
semantic ∪ routed by default, and the adaptive stop) and :mod:`.rerank` (Eq. 6). This module
holds the options (:class:`HingeMemOptions`), builds memories and runs retrieval: plan →
candidates (semantic ∪ routed) → score (ξ = description cosine, + Q_S + Q_T) → sort → adaptive
stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from hashlib import sha256
from typing import Any

import numpy as np

from memsys.base import MemorySystem, MethodOptions, Services, check_choices
from memsys.llm.backbone import Backbone
from memsys.llm.structured import ExtractionReport, Rejected, ask_json_many
from memsys.types import Conversation, MemoryItem, Question, Retrieval, Session
from memsys.usage import PARSER

from .extract import reply_to_memory
from .lite import LiteExtractor
from .memory import (
    ELEMENTS,
    PERSON_READINGS,
    ConstructionOptions,
    Hyperedge,
    LongTermMemory,
    Node,
    compute_salience,
    frequency_topics,
    merge_hyperedges,
    merge_nodes,
)
from .prompts import (
    BOUNDARY_PROMPT,
    BOUNDARY_SCHEMA,
    QUERY_SCHEMA,
    TOPIC_PROMPT,
    TOPIC_SCHEMA,
    boundary_messages,
    constrained,
    query_messages,
    topic_messages,
)
from .rerank import TOPIC_TERMS, priority_weights, salience_scores
from .retrieval import (
    CANDIDATE_RULES,
    QueryPlan,
    RetrievalIndex,
    RetrievalOptions,
    RetrievalTrace,
    adaptive_stop,
    analyse_rules,
    candidate_set,
    plan_from_reply,
)

MEMORY_KINDS = ("boundary", "text")


@dataclass(frozen=True, kw_only=True)
class HingeMemOptions(MethodOptions):
    """HingeMem's options, the keys of ``conf/method/hingemem.yaml``: ``extraction``, ``memory``
    (``text``: one item per turn, Table 3 row 1) and the ``construction`` and ``retrieval`` groups
    (readings: docs/methods/hingemem.md, "Named values")."""

    memory: str = "boundary"
    construction: ConstructionOptions = field(default_factory=ConstructionOptions)
    retrieval: RetrievalOptions = field(default_factory=RetrievalOptions)

    def check(self) -> None:
        check_choices(("memory", self.memory, MEMORY_KINDS))
        if self.construction.persons not in PERSON_READINGS:
            raise ValueError(
                f"construction.persons must be one of {PERSON_READINGS}, "
                f"got {self.construction.persons!r}"
            )
        check_choices(
            ("retrieval.candidate_rule", self.retrieval.candidate_rule, CANDIDATE_RULES),
            ("retrieval.topic_term", self.retrieval.topic_term, TOPIC_TERMS),
        )
        if self.query_analysis not in ("llm", "rules"):
            raise ValueError(
                f"retrieval.query_analysis must be llm or rules, got {self.query_analysis!r}"
            )

    @property
    def uses_llm(self) -> bool:
        """An LLM builds boundary memories only (the ``text`` memory is the turns themselves)."""
        return self.extraction == "llm" and self.memory == "boundary"

    @property
    def query_analysis(self) -> str:
        """Who plans a retrieval: ``retrieval.query_analysis``, else the LLM where it extracts."""
        return self.retrieval.query_analysis or ("llm" if self.extraction == "llm" else "rules")


class HingeMem(MemorySystem[LongTermMemory]):
    """Element-boundary hyperedges with query-adaptive retrieval (module docstring)."""

    #: 3: LLM replies asked again by the shared helper (memsys.llm.structured: a new request
    #: with the rejected reply and a note), failed requests retried too; stats from its report.
    construction_version = 3

    options_type = HingeMemOptions
    options: HingeMemOptions

    def __init__(self, services: Services, **options: Any) -> None:
        super().__init__(services, HingeMemOptions(**options))
        #: The LLM query analysis's cost and fallbacks (to the rules' plan), over every question.
        self.query_report = ExtractionReport()
        self._plans: dict[tuple[str, datetime | None], QueryPlan] = {}
        self._unplanned: set[tuple[str, datetime | None]] = set()

    # --- construction -------------------------------------------------------------------------

    def construction_services(self) -> frozenset[str]:
        """The parser too, for the boundary memory: spaCy finds its nodes (the text memory
        parses nothing)."""
        declared = super().construction_services()
        return declared | {PARSER} if self.options.memory == "boundary" else declared

    def construction_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"memory": self.options.memory}
        if self.options.memory == "boundary":
            prompts = BOUNDARY_PROMPT + TOPIC_PROMPT if self.uses_llm else ""
            config |= {
                "extraction": self.options.extraction,
                "options": asdict(self.options.construction),
                "prompts_sha256": sha256(prompts.encode()).hexdigest()[:16],
            }
        return config

    def construct(self, conversation: Conversation) -> LongTermMemory:
        positions = {turn.turn_id: i for i, turn in enumerate(conversation.turns)}
        sessions = [session for session in conversation.sessions if session.turns]
        anchor = max((s.timestamp for s in sessions if s.timestamp), default=None)
        if self.options.memory == "text":
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
        merged_edges = merge_hyperedges(edges, self.options.construction.merge_jaccard)
        for uid, salience in compute_salience(merged_nodes, merged_edges).items():
            merged_nodes[uid].salience = salience
        common, rare, topic_stats = self._topics(merged_nodes, merged_edges)
        stats |= {"hyperedges_before_merge": len(edges), "topic_clustering": topic_stats}
        return LongTermMemory(merged_nodes, merged_edges, common, rare, anchor, stats)

    def _extract(
        self, sessions: Sequence[Session]
    ) -> tuple[list[Node], list[Hyperedge], dict[str, Any]]:
        lite = LiteExtractor(self.services.nlp, self.services.embedder, self.options.construction)
        nodes: list[Node] = []
        edges: list[Hyperedge] = []
        stats: dict[str, Any] = {"mode": self.options.extraction, "sessions": len(sessions)}
        if self.options.extraction == "lite":
            for session in sessions:
                session_nodes, session_edges = lite.extract(session)
                nodes += session_nodes
                edges += session_edges
            return nodes, edges, {"extraction": stats}
        options = self.options.construction
        report = ExtractionReport()

        def accept(index: int, value: Any) -> tuple[list[Node], list[Hyperedge], int] | Rejected:
            try:
                return reply_to_memory(value, sessions[index], options.session_time_node)
            except (AttributeError, KeyError, TypeError, ValueError) as error:
                return Rejected(f"its boundary memories were unusable ({error!r})")

        replies = ask_json_many(
            self._backbone(),
            [boundary_messages(session) for session in sessions],
            schema=BOUNDARY_SCHEMA,
            grammar=constrained(BOUNDARY_SCHEMA, options.grammar_max_items),
            accept=accept,
            max_tokens=options.max_tokens,
            report=report,
        )
        times_dropped = 0
        for session, reply in zip(sessions, replies, strict=True):
            if reply is None:  # asked twice: the lite extractor (counted in the report)
                session_nodes, session_edges = lite.extract(session)
            else:
                session_nodes, session_edges, dropped = reply
                times_dropped += dropped
            nodes += session_nodes
            edges += session_edges
        stats |= {"times_dropped": times_dropped, "llm": report.to_json()}
        return nodes, edges, {"extraction": stats}

    def _topics(
        self, nodes: dict[str, Node], edges: Sequence[Hyperedge]
    ) -> tuple[list[str], list[str], dict[str, Any]]:
        k = self.options.construction.topics_per_list
        common, rare = frequency_topics(nodes, edges, k)
        topics = [node.name for node in nodes.values() if node.element == "topic"]
        if self.options.extraction == "lite" or len(topics) < 6:
            return common, rare, {"source": "frequency"}
        ranked = frequency_topics(nodes, edges, self.options.construction.max_clustering_topics)[0]
        by_lower = {name.lower(): name for name in ranked}

        def pick(names: Any) -> list[str]:
            return list(
                dict.fromkeys(by_lower[n.lower()] for n in map(str, names) if n.lower() in by_lower)
            )[:k]

        def accept(index: int, value: Any) -> tuple[list[str], list[str]] | Rejected:
            chosen = pick(value["common_topics"]), pick(value["rare_topics"])
            if not chosen[0] or not chosen[1]:
                return Rejected("each list needs at least one topic from INPUT_TOPICS")
            return chosen

        report = ExtractionReport()
        (reply,) = ask_json_many(
            self._backbone(),
            [topic_messages(ranked)],
            schema=TOPIC_SCHEMA,
            grammar=constrained(TOPIC_SCHEMA, self.options.construction.grammar_max_items),
            accept=accept,
            max_tokens=self.options.construction.topic_max_tokens,
            report=report,
        )
        if reply is None:
            return common, rare, {"source": "frequency_fallback", "llm": report.to_json()}
        return reply[0], reply[1], {"source": "llm", "llm": report.to_json()}

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
        if self.options.query_analysis == "rules":
            self.services.nlp.parse([question.question for question in questions])
            return
        self._plan_with_llm(questions)

    def _plan_with_llm(self, questions: Sequence[Question]) -> None:
        """Ask for the plans not yet asked for; a question whose reply stays unusable is asked
        once and counted once (its plan falls back to the rules)."""
        todo = list(
            {
                (q.question, q.question_date): q
                for q in questions
                if (q.question, q.question_date) not in self._plans
                and (q.question, q.question_date) not in self._unplanned
            }.values()
        )
        if not todo:
            return

        def accept(index: int, value: Any) -> QueryPlan:
            return plan_from_reply(value, todo[index].question_date or datetime(1970, 1, 1))

        plans = ask_json_many(
            self._backbone().with_stage("retrieval"),
            [query_messages(q.question, q.question_date) for q in todo],
            schema=QUERY_SCHEMA,
            grammar=constrained(QUERY_SCHEMA),
            accept=accept,
            max_tokens=self.options.retrieval.analysis_max_tokens,
            report=self.query_report,
        )
        for question, plan in zip(todo, plans, strict=True):
            key = (question.question, question.question_date)
            if plan is None:  # asked twice: the rules' plan (counted in the report)
                self._unplanned.add(key)
            else:
                self._plans[key] = plan

    def plan(self, memory: LongTermMemory, question: Question) -> QueryPlan:
        """The retrieval plan of ``question`` (LLM answers are made in :meth:`prepare_queries`)."""
        key = (question.question, question.question_date)
        if self.options.query_analysis == "llm":
            self._plan_with_llm([question])
        if key in self._plans:
            return self._plans[key]
        anchor = question.question_date or memory.anchor_date or datetime(1970, 1, 1)
        (doc,) = self.services.nlp.parse([question.question])
        persons = [node.key for node in memory.nodes.values() if node.element == "person"]
        plan = analyse_rules(question.question, doc, anchor, persons)
        if self.options.query_analysis == "llm":
            return QueryPlan(
                plan.query_type, plan.names, plan.times, plan.priority, "rules_fallback"
            )
        return plan

    def index(self, memory: LongTermMemory) -> RetrievalIndex:
        """The memory's retrieval index, built once and kept with it (never serialized)."""
        if "index" not in memory.runtime:
            memory.runtime["index"] = RetrievalIndex(memory, self.services.embedder)
        return memory.runtime["index"]

    def candidates(
        self, index: RetrievalIndex, plan: QueryPlan, similarity: np.ndarray
    ) -> tuple[set[int], set[int], np.ndarray]:
        """What to retrieve: the candidates under ``candidate_rule``, the structural hyperedges
        element routing reached, and the score bonus (nonzero under the ``bonus`` rule only)."""
        options = self.options.retrieval
        nearest = set(np.argsort(-similarity, kind="stable")[: options.semantic_top_k].tolist())
        bonus = np.zeros(len(similarity))
        if not options.node_indexing:
            return nearest, set(), bonus
        routes = index.match(plan, options.node_match_threshold)
        elements = plan.ranked_elements()
        pool, structural = candidate_set(options.candidate_rule, nearest, routes, elements)
        if options.candidate_rule == "bonus":
            weights = priority_weights(elements)
            bonus = options.node_match_weight * index.match_scores(routes, weights)
        return pool, structural, bonus

    def rerank(self, memory: LongTermMemory, plan: QueryPlan, query: np.ndarray) -> np.ndarray:
        """Eq. 6's Q_S + Q_T per hyperedge, with their named weights."""
        options = self.options.retrieval
        index = self.index(memory)
        weights = priority_weights(plan.ranked_elements())
        salience = salience_scores(memory, weights, index.mean_salience)
        if options.topic_term == "query":
            topic = index.contrast.query_term(query, options.topic_temperature)
        else:
            topic = index.contrast.hyperedge_term(
                query, index.descriptions, options.topic_temperature
            )
        return options.salience_weight * salience + options.topic_weight * topic

    def depth(self, ranked_scores: Sequence[float], query_type: str) -> tuple[int, bool]:
        """How many ranked candidates to keep, and whether the stop rules set that depth (they
        cut the list before its end and no cap cut further)."""
        options = self.options.retrieval
        cap = min(options.max_items or len(ranked_scores), len(ranked_scores))
        if not options.adaptive_stop:
            return min(options.top_k, cap), False
        by_rules = adaptive_stop(
            ranked_scores,
            query_type,
            delta=options.recall_delta,
            recall_ratio=options.recall_ratio,
            precision_ratio=options.precision_ratio,
            judgement_ratio=options.judgement_ratio,
            judgement_temperature=options.judgement_temperature,
        )
        return min(by_rules, cap), by_rules < cap

    def explain(self, memory: LongTermMemory, question: Question) -> RetrievalTrace:
        """Plan, candidates, scores and the stop decision for one question."""
        plan = self.plan(memory, question)
        edges = memory.hyperedges
        if not edges:
            return RetrievalTrace(plan, (), (), 0, ())
        index = self.index(memory)
        query = self.services.embedder.encode([question.question])[0]
        similarity = index.descriptions @ query  # ξ, the initial score
        candidates, structural, scores = self.candidates(index, plan, similarity)
        scores = scores + similarity
        if self.options.retrieval.rerank:
            scores = scores + self.rerank(memory, plan, query)
        ranked = sorted(candidates, key=lambda i: (-scores[i], edges[i].position))
        rest = sorted(
            (i for i in range(len(edges)) if i not in candidates),
            key=lambda i: (-scores[i], edges[i].position),
        )
        most_similar = min(candidates, key=lambda i: (-similarity[i], edges[i].position))
        ranked_scores = [float(scores[i]) for i in ranked]
        kept, stop_decided = self.depth(ranked_scores, plan.query_type)
        items = tuple(
            self._item(memory, edges[i], s)
            for i, s in zip(ranked[:kept], ranked_scores, strict=False)
        )
        return RetrievalTrace(
            plan,
            tuple(ranked),
            tuple(ranked_scores),
            kept,
            items,
            len(structural),
            len(edges),
            stop_decided,
            ranked[0] != most_similar,
            tuple(rest),
        )

    def retrieve(self, memory: LongTermMemory, question: Question) -> Retrieval:
        """The candidates kept by the stop rule; for the ranking metrics, every candidate, then
        every other hyperedge by the same score (the paper ranks the candidates alone; the rest
        is the harness's reading, in the fidelity card)."""
        trace = self.explain(memory, question)
        edges = memory.hyperedges
        deeper = (t for i in (*trace.ranked, *trace.rest) for t in edges[i].turn_ids)
        return Retrieval(trace.items, trace.summary(), ranking=tuple(deeper))

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

    def stored_texts(self, memory: LongTermMemory) -> list[str]:
        """Each hyperedge's description (its nodes are the names it joins)."""
        return [edge.description for edge in memory.hyperedges]

    @staticmethod
    def statistics(memory: LongTermMemory) -> dict[str, Any]:
        """Table 4's counts for one memory, with how it was built."""
        return {**memory.counts(), "stats": memory.stats}
