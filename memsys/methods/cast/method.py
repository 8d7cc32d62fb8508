"""CAST: character-and-scene episodic memory beside a semantic graph (Ma et al., ``papers/cast.txt``).

Implements §3.1 (views, participants, scenes, main and supporting characters, character
profiles), §3.3.1 (streams and role assignment), §3.3.2 and Algorithm 1 (greedy two-of-three
scene aggregation), §3.2 (semantic index the HippoRAG2 way: OpenIE triples, phrase and passage
nodes, query-to-triple linking, personalized PageRank, dense fallback; episodic index: scene
summaries embedded, kNN filtered by the question's persons, times and places), §3.3.3 and
Algorithm 2 (fusion), and the ablations of §4.3.2. The pieces live beside this orchestration:
:mod:`.memory` (the memory), :mod:`.episodic` (views → streams → scenes, scene search),
:mod:`.retrieval` (reading the question, fusion), :mod:`.prompts`, :mod:`.extraction`,
:mod:`.hipporag`; its options are :class:`CASTOptions`. ``extraction: lite`` replaces the LLM's
NER, OpenIE and place extraction by spaCy (:mod:`memsys.propositions`) and scene summaries by an
extractive one; ``query_analysis: lite`` reads the question with spaCy and skips HippoRAG2's LLM
recognition filter (HippoRAG2's own "w/o filter" setting).

Every reading taken where the paper is vague is a config value and is listed, with the code
that implements each paper component, in the fidelity card ``docs/methods/cast.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from memsys.base import EXTRACTION_MODES, MemorySystem, MethodOptions, Services, check_choices
from memsys.llm.backbone import Backbone
from memsys.llm.structured import ExtractionReport, PendingJSON
from memsys.nlp import PLACE_LABELS, resolve_time
from memsys.propositions import (
    PropositionExtractor,
    Utterance,
    dialogue_utterances,
    phrase_key,
    triples,
)
from memsys.types import Conversation, MemoryItem, Question, Retrieval
from memsys.usage import PARSER

from .episodic import (
    MENTION_SCOPES,
    MISSING_LOCATION,
    STREAM_MEMBERS,
    EpisodicQuery,
    Scene,
    SceneRule,
    build_scenes,
    build_views,
    extractive_summary,
    search_scenes,
)
from .extraction import canonical_person, chosen_summaries, openie_accept
from .hipporag import (
    PassageFacts,
    PassageGraphIndex,
    SearchSettings,
    Triple,
    build_graph,
    distinct_facts,
    fact_text,
)
from .memory import CastMemory
from .prompts import OPENIE_PROMPT, OPENIE_SCHEMA, SUMMARY_PROMPT, SUMMARY_SCHEMA
from .retrieval import (
    FUSIONS,
    READER_DEPTHS,
    QueryAnalysis,
    analyse_lite,
    analyse_llm,
    combine,
    recognition_filter,
)

QUERY_LINKING = ("triples", "entities")


@dataclass(frozen=True, kw_only=True)
class CASTOptions(MethodOptions):
    """CAST's options, the keys of ``conf/method/cast.yaml`` (each explained there; the paper's
    values and the readings in ``docs/methods/cast.md``)."""

    query_analysis: str = "lite"
    window: int = 1
    participants: str = "all"
    mention_scope: str = "window"
    max_gap_days: float = 1.0
    topic_threshold: float = 0.7
    missing_location: str = "unmet"
    summary_messages: int = 3
    synonym_threshold: float = 0.8
    top_k: int = 5
    reader_depth: str = "budget"
    fusion: str = "rerank"
    query_linking: str = "entities"
    link_top_k: int = 5
    link_threshold: float = 0.7
    passage_node_weight: float = 0.05
    damping: float = 0.5
    date_slack_days: float = 1.0
    openie_max_tokens: int = 320
    summary_max_tokens: int = 200
    summary_max_chars: int = 3000

    def check(self) -> None:
        check_choices(
            ("query_analysis", self.query_analysis, EXTRACTION_MODES),
            ("participants", self.participants, STREAM_MEMBERS),
            ("mention_scope", self.mention_scope, MENTION_SCOPES),
            ("missing_location", self.missing_location, MISSING_LOCATION),
            ("fusion", self.fusion, FUSIONS),
            ("reader_depth", self.reader_depth, READER_DEPTHS),
            ("query_linking", self.query_linking, QUERY_LINKING),
        )
        if self.window < 0 or min(self.top_k, self.summary_messages, self.link_top_k) < 1:
            raise ValueError("window must be >= 0; top_k, summary_messages, link_top_k >= 1")


class CAST(MemorySystem[CastMemory]):
    """Character-and-scene episodic memory fused with HippoRAG2-style semantic memory."""

    construction_version = 2
    #: Algorithm 2 only reorders the semantic top-k (§3.3.3: "no new candidates"), so the reader
    #: gets the fused list best first; shown oldest first, the promotion would be sorted away.
    context_order = "rank"

    options_type = CASTOptions
    options: CASTOptions

    def __init__(self, services: Services, **options: Any) -> None:
        super().__init__(services, CASTOptions(**options))
        self.rule = SceneRule(
            timedelta(days=self.options.max_gap_days),
            self.options.topic_threshold,
            self.options.missing_location,
        )
        self.search = SearchSettings(
            self.options.top_k,
            self.options.link_threshold,
            self.options.link_top_k,
            self.options.passage_node_weight,
            self.options.damping,
        )
        self.date_slack = timedelta(days=self.options.date_slack_days)
        self.extractor = PropositionExtractor(services.nlp)
        self.query_report = ExtractionReport()
        self.filter_report = ExtractionReport()
        self._queries: dict[str, QueryAnalysis] = {}
        self._kept_facts: dict[tuple[str, tuple[Triple, ...]], list[int] | None] = {}

    def construction_services(self) -> frozenset[str]:
        """The parser too: spaCy's NER, places and triples, and the time expressions."""
        return super().construction_services() | {PARSER}

    def construction_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "extraction": self.options.extraction,
            "window": self.options.window,
            "participants": self.options.participants,
            "mention_scope": self.options.mention_scope,
            "max_gap_s": self.rule.max_gap.total_seconds(),
            "topic_threshold": self.rule.topic_threshold,
            "missing_location": self.rule.missing_location,
            "summary_messages": self.options.summary_messages,
            "synonym_threshold": self.options.synonym_threshold,
        }
        if self.options.extraction == "llm":
            config["prompts"] = [OPENIE_PROMPT, SUMMARY_PROMPT]
            config["max_tokens"] = [self.options.openie_max_tokens, self.options.summary_max_tokens]
            config["summary_max_chars"] = self.options.summary_max_chars
        return config

    # -- Construction ----------------------------------------------------------------------------

    def construct(self, conversation: Conversation) -> CastMemory:
        turns = conversation.turns
        utterances = dialogue_utterances(turns)
        persons, locations, facts, reports = self.extract(utterances)
        speakers = list(dict.fromkeys(t.speaker for t in turns))
        persons = [
            list(dict.fromkeys(canonical_person(p, speakers) for p in names)) for names in persons
        ]
        messages = [
            {
                "turn_id": t.turn_id,
                "text": f"{t.speaker}: {t.text}",
                "timestamp": t.timestamp.isoformat() if t.timestamp else None,
                "position": i,
                "speaker": t.speaker,
                "location": locations[i],
            }
            for i, t in enumerate(turns)
        ]
        views = build_views(
            conversation, persons, locations, window=self.options.window,
            members=self.options.participants, mention_scope=self.options.mention_scope,
        )  # fmt: skip
        texts = ["\n".join(messages[i]["text"] for i in v.window) for v in views]
        topics = self.services.embedder.encode(texts) if texts else np.zeros((0, 1))
        scenes = build_scenes(views, topics, self.rule)
        lines = [m["text"] for m in messages]
        # The summary requests need only their scenes: the extractive fallbacks and the
        # semantic graph, which need no summary, are embedded while the LLM writes them.
        with self._summary_requests(scenes, lines, reports["summaries"]) as pending:
            extractive = self.extractive_summaries(scenes, lines)
            graph = build_graph(facts, self.services.embedder, self.options.synonym_threshold)
            summaries = chosen_summaries(pending, extractive)
        scenes = [
            replace(s, summary=text, summary_source=source)
            for s, (text, source) in zip(scenes, summaries, strict=True)
        ]
        report = {"views": len(views), "llm": {k: r.to_json() for k, r in reports.items()}}
        memory = CastMemory(messages, scenes, graph, distinct_facts(facts), report)
        memory.vectors("scenes", self)  # h_s = f_scene(φ(s)), Algorithm 1 line 19 (cached)
        return memory

    def extract(
        self, utterances: Sequence[Utterance]
    ) -> tuple[list[list[str]], list[str | None], list[PassageFacts], dict[str, ExtractionReport]]:
        """Per message: persons mentioned, its place (ℓ_i) and (phrases, triples) for the
        semantic graph; by spaCy, then by the LLM where ``extraction: llm`` and it answers.
        The LLM's requests need only the messages, so spaCy parses while they are answered."""
        texts = [u.text for u in utterances]
        reports = {"openie": ExtractionReport(), "summaries": ExtractionReport()}
        with self._openie_requests(utterances, reports["openie"]) as pending:
            persons = self.extractor.persons(texts)
            locations = [
                next((e for e, label in found if label in PLACE_LABELS), None)
                for found in self.extractor.entities(texts)
            ]
            facts: list[PassageFacts] = []
            for propositions in self.extractor.extract(utterances):
                phrases = [a for p in propositions for a in p.arguments]
                facts.append((phrases, [t for p in propositions for t in triples(p)]))
            if pending is not None:
                accept = openie_accept(utterances, facts)
                for i, found in enumerate(pending.results(accept)):
                    if found is not None:
                        persons[i], locations[i], facts[i] = found
        return persons, locations, facts, reports

    def _openie_requests(
        self, utterances: Sequence[Utterance], report: ExtractionReport
    ) -> AbstractContextManager[PendingJSON | None]:
        """The LLM's persons, place and triples of every message, asked now (each message on
        its own); nothing in lite mode."""
        if self.options.extraction != "llm":
            return nullcontext()
        prompts = [
            [{"role": "user", "content": OPENIE_PROMPT.format(speaker=u.speaker, text=u.text)}]
            for u in utterances
        ]
        return PendingJSON(
            self._backbone(), prompts, schema=OPENIE_SCHEMA,
            max_tokens=self.options.openie_max_tokens, report=report,
        )  # fmt: skip

    def extractive_summaries(self, scenes: Sequence[Scene], lines: Sequence[str]) -> list[str]:
        """Each scene's extractive φ(s) over the conversation's ``speaker: text`` lines: the
        lite summary, and the LLM's fallback."""
        vectors = self.services.embedder.encode(list(lines))
        return [
            extractive_summary(s, lines, vectors, self.options.summary_messages) for s in scenes
        ]

    def _summary_requests(
        self, scenes: Sequence[Scene], lines: Sequence[str], report: ExtractionReport
    ) -> AbstractContextManager[PendingJSON | None]:
        """The LLM's φ(s) of every scene, asked now (each scene on its own); nothing in lite
        mode or without scenes."""
        if self.options.extraction != "llm" or not scenes:
            return nullcontext()
        prompts = [
            [
                {
                    "role": "user",
                    "content": SUMMARY_PROMPT.format(
                        character=s.character,
                        role=s.role,
                        messages="\n".join(lines[i] for i in s.positions)[
                            : self.options.summary_max_chars
                        ],
                    ),
                }
            ]
            for s in scenes
        ]
        return PendingJSON(
            self._backbone(), prompts, schema=SUMMARY_SCHEMA,
            max_tokens=self.options.summary_max_tokens, report=report,
        )  # fmt: skip

    # -- Retrieval -------------------------------------------------------------------------------

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Read a batch of questions (one parse; one LLM batch in ``query_analysis: llm``) and
        embed them and their entities."""
        texts = list(
            dict.fromkeys(q.question for q in questions if q.question not in self._queries)
        )
        if not texts:
            return
        analyses = analyse_lite(self.extractor, texts)
        if self.options.query_analysis == "llm":
            backbone = self._backbone().with_stage("retrieval")
            analyses = analyse_llm(backbone, texts, analyses, self.query_report)
        self._queries.update(zip(texts, analyses, strict=True))
        entities = (
            [e for a in analyses for e in a.entities]
            if self.options.query_linking == "entities"
            else []
        )
        self.services.embedder.encode(texts + entities)

    def prepare_retrieval(self, memory: CastMemory, questions: Sequence[Question]) -> None:
        """HippoRAG2's recognition filter for a batch, in one LLM batch (``query_analysis: llm``
        with query-to-triple linking); a no-op otherwise."""
        if self.options.query_analysis != "llm" or self.options.query_linking != "triples":
            return
        self.prepare_queries(questions)
        index = memory.semantic_index(self)
        texts = list(dict.fromkeys(q.question for q in questions))
        pending: dict[tuple[str, tuple[Triple, ...]], list[tuple[Triple, float]]] = {}
        for text, vector in zip(texts, self.services.embedder.encode(texts), strict=True):
            candidates = [
                (index.facts[i], score)
                for i, score in index.candidate_facts(vector, self.search.link_top_k)
            ]
            key = (text, tuple(t for t, _ in candidates))
            if key not in self._kept_facts:
                pending[key] = candidates
        if pending:
            backbone = self._backbone().with_stage("retrieval")
            kept = recognition_filter(
                backbone, [q for q, _ in pending], list(pending.values()), self.filter_report
            )
            self._kept_facts.update(zip(pending, kept, strict=True))

    def retrieve(self, memory: CastMemory, question: Question) -> Retrieval:
        """The fused top-k (Algorithm 2), then (``reader_depth: budget``) every other message by
        the semantic search's score, for the reader's budget to cut; for the ranking metrics,
        every message below the fused top-k by that score (the same PageRank, not cut at k)."""
        if question.question not in self._queries:
            self.prepare_queries([question])
        query = self._queries[question.question]
        query_vector = self.services.embedder.encode([question.question])[0]
        index = memory.semantic_index(self)
        seeds = self.phrase_seeds(memory, index, question, query, query_vector)
        every = index.search(query_vector, seeds, self.search, every=True)
        semantic = every[: self.search.top_k]
        ranked = [position for position, _ in semantic]
        episodic = (
            []
            if self.options.fusion == "none"
            else self.episodic_search(memory, question, query, query_vector)
        )
        order = combine(self.options.fusion, ranked, episodic, self.options.top_k)
        scores = dict(semantic)  # the fused top-k's: an episodic-only message scores 0
        if self.options.reader_depth == "budget":
            fused = set(order)
            below = [(position, score) for position, score in every if position not in fused]
            order += [position for position, _ in below]
            scores.update(below)
        items = []
        for position in order:
            message = memory.messages[position]
            timestamp = (
                datetime.fromisoformat(message["timestamp"]) if message["timestamp"] else None
            )
            items.append(
                MemoryItem(
                    message["text"], (message["turn_id"],), timestamp, position,
                    scores.get(position, 0.0), "message",
                )
            )  # fmt: skip
        deeper = (memory.messages[position]["turn_id"] for position, _ in every)
        return Retrieval(tuple(items), ranking=tuple(deeper))

    def phrase_seeds(
        self,
        memory: CastMemory,
        index: PassageGraphIndex,
        question: Question,
        query: QueryAnalysis,
        query_vector: np.ndarray,
    ) -> dict[str, float]:
        """PageRank seeds: query-to-triple linking (HippoRAG2; facts kept by the recognition
        filter in ``query_analysis: llm``, the top ``link_top_k`` otherwise) or entity linking."""
        if self.options.query_linking == "entities":
            return index.entity_seeds(query.entities, self.search.link_threshold)
        candidates = index.candidate_facts(query_vector, self.search.link_top_k)
        if self.options.query_analysis == "llm":
            key = (question.question, tuple(index.facts[i] for i, _ in candidates))
            if key not in self._kept_facts:
                self.prepare_retrieval(memory, [question])
            kept = self._kept_facts.get(key)
            if kept is not None:
                candidates = [candidates[i] for i in kept]
        return index.fact_seeds(candidates, self.search.link_top_k)

    def episodic_search(
        self, memory: CastMemory, question: Question, query: QueryAnalysis, query_vector: np.ndarray
    ) -> list[int]:
        """E_epi(q) (:func:`.episodic.search_scenes`) for this question's persons, times, places."""
        if not memory.scenes:
            return []
        characters = sorted({s.character for s in memory.scenes})
        words = set(phrase_key(question.question).split())
        wanted = {c for c in characters if c.split()[0].lower() in words}
        wanted |= {canonical_person(p, characters) for p in query.persons} & set(characters)
        anchor = question.question_date or _last_time(memory)
        moments = tuple(r for e in query.times if anchor and (r := resolve_time(e, anchor)))
        episodic_query = EpisodicQuery(
            frozenset(wanted), moments, frozenset(phrase_key(p) for p in query.places)
        )
        return search_scenes(
            memory.scenes, memory.vectors("scenes", self), memory.vectors("passages", self),
            query_vector, episodic_query, top_k=self.options.top_k, date_slack=self.date_slack,
        )  # fmt: skip

    # -- Serialization ---------------------------------------------------------------------------

    def dump_memory(self, memory: CastMemory) -> dict[str, Any]:
        return memory.to_json()

    def load_memory(self, payload: dict[str, Any]) -> CastMemory:
        return CastMemory.from_json(payload)

    def stored_texts(self, memory: CastMemory) -> list[str]:
        """Every message (the passages), scene summary and distinct fact."""
        return [
            *(message["text"] for message in memory.messages),
            *(scene.summary for scene in memory.scenes),
            *(fact_text(fact) for fact in memory.facts),
        ]

    def _backbone(self) -> Backbone:
        if self.services.backbone is None:
            raise ValueError("CAST's llm mode needs a backbone (services.backbone)")
        return self.services.backbone


def _last_time(memory: CastMemory) -> datetime | None:
    stamps = [m["timestamp"] for m in memory.messages if m["timestamp"]]
    return datetime.fromisoformat(max(stamps)) if stamps else None
