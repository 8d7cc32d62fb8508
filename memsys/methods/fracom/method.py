"""FraCom: propositional fragments composed into a graph (Ke et al., ``papers/fracom.txt``).

Implements §3.1 (Fragment: each utterance → propositions ``{Predicate, Argument: [...]}``, the
prompt of Appendix K / Figure 9), §3.2 (Compose: Eqs. 1–4 and Algorithm 1 — one node per
proposition, predicate and argument nodes shared by identity, proposition–predicate and
proposition–argument edges, sessions merged into the graph one after another), §3.3 (plausible
retrieval: a proposition is retrieved when one of its argument nodes has Sentence-BERT cosine
≥ θ with an argument of the query, Eq. 5) and the paper's ablation "w/o plausible retrieval"
(exact argument match). ``extraction: lite`` replaces the LLM of §3.1 by the dependency-parse
extractor of :mod:`memsys.propositions` (its own readings are listed there).

Readings taken where the paper is vague (each a config value where it can vary):

* Unit of fragmenting: one utterance per LLM call (``Speaker: text``), so every proposition keeps
  its source turn id and session date; the paper's prompt takes the whole history at once. The
  prompt names the speaker so that "I" becomes a name, as the lite extractor does.
* Output format: Figure 9's lines of ``{"Predicate": ..., "Argument": [...]}`` wrapped in one
  JSON object (``{"propositions": [...]}``) so that it can be schema-constrained. The first of
  two or more arguments is read as the subject (only used to render a statement). A reply is
  used when it parses against the schema and keeps at least one proposition whose predicate and
  arguments occur in the utterance ("must be identified from the original sentence"; ungrounded
  arguments are dropped) — or is empty where the lite extractor finds nothing either. Otherwise
  one retry, then the lite extractor for that utterance, counted (``memory.report``).
* Query arguments (§3.3 "propositional representation on current utterances"): every argument
  and noun phrase of the question (``query_extraction: lite``, the default), or the fragment
  prompt on the question (``llm``), falling back to lite per question.
* Ranking: the paper retrieves a set; the harness needs an order to fit a token budget. A
  proposition scores Σ over query arguments of its best matching argument's cosine × idf, where
  idf(a) = log(1 + propositions / degree(a)), so a match on a rare argument outranks one on a
  speaker's name; ties go to the earlier turn.
* Predicate filter (METHODS.md; not in the paper's text): keep a proposition only when its
  predicate has cosine ≥ ``predicate_threshold`` (0.5) with a predicate of the query; skipped
  for queries whose predicates are all light verbs (be, have, do), as most questions' are.
* Context (``context``): ``propositions`` renders each as a short statement, its session date
  given by the harness's date header and its utterance's date expressions resolved against
  that date (``yesterday = 7 May 2023``); ``turns`` hands over the source turns instead, each
  once, ranked by their best proposition.
* FraCom was evaluated on response generation; the harness asks QA questions of the same memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import networkx as nx
import numpy as np

from memsys.base import EXTRACTION_MODES, MemorySystem, Services, check_choices
from memsys.graph import count_kinds, graph_from_json, graph_to_json
from memsys.propositions import (
    Proposition,
    PropositionExtractor,
    Utterance,
    dialogue_utterances,
    grounded,
    phrase_key,
    time_notes,
)
from memsys.structured import ExtractionReport, ask_json_many
from memsys.types import Conversation, MemoryItem, Question, Retrieval

#: Figure 9's instruction in the project's words; ``{speaker}`` and ``{utterance}`` are filled in.
FRAGMENT_PROMPT = """Here is one utterance from a conversation.
{speaker}: {utterance}

Extract the basic propositions (predicate, arguments) of each sentence in it. In the theory of \
propositional representation a predicate is usually a verb, an adjective or another word of \
relation, and the arguments are usually nouns; the predicate states how the arguments it \
connects are related. Take every predicate and argument from the utterance itself, writing \
{speaker} for "I" or "me". Reply with JSON only and no reasoning, in this form:
{{"propositions": [{{"Predicate": "freed", "Argument": ["Lincoln", "slaves"]}}, \
{{"Predicate": "bitter", "Argument": ["war"]}}]}}"""

#: The reply of :data:`FRAGMENT_PROMPT`.
FRAGMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "propositions": {
            "type": "array",
            "maxItems": 12,
            "items": {
                "type": "object",
                "properties": {
                    "Predicate": {"type": "string", "minLength": 1, "maxLength": 60},
                    "Argument": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 6,
                        "items": {"type": "string", "minLength": 1, "maxLength": 80},
                    },
                },
                "required": ["Predicate", "Argument"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["propositions"],
    "additionalProperties": False,
}
FRAGMENT_MAX_TOKENS = 320
LIGHT_PREDICATES = frozenset({"be", "have", "do"})
CONTEXT_MODES = ("propositions", "turns")


@dataclass(frozen=True)
class StoredProposition:
    """A proposition with its provenance: source turn, its position, session date, time notes."""

    proposition: Proposition
    turn_id: str
    position: int
    timestamp: datetime | None
    when: str
    source: str

    def text(self) -> str:
        statement = self.proposition.render()
        return f"{statement} ({self.when})" if self.when else statement

    def to_json(self) -> dict[str, Any]:
        return {
            "predicate": self.proposition.predicate,
            "arguments": list(self.proposition.arguments),
            "subjects": self.proposition.subjects,
            "turn_id": self.turn_id,
            "position": self.position,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "when": self.when,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredProposition:
        timestamp = datetime.fromisoformat(data["timestamp"]) if data["timestamp"] else None
        proposition = Proposition(data["predicate"], tuple(data["arguments"]), data["subjects"])
        return cls(
            proposition, data["turn_id"], data["position"], timestamp, data["when"], data["source"]
        )


class FraComMemory:
    """The propositional graph, its propositions (node ``prop:i`` is ``propositions[i]``), the
    source turns, and the construction report. Node vectors are embedded at construction (after
    loading, on first retrieval; the embedding cache makes that a lookup)."""

    def __init__(
        self,
        graph: nx.Graph,
        propositions: list[StoredProposition],
        turns: dict[str, str],
        report: dict[str, Any],
    ) -> None:
        self.graph = graph
        self.propositions = propositions
        self.turns = turns
        self.report = report
        self._vectors: dict[str, tuple[list[str], np.ndarray]] = {}

    def node_vectors(self, kind: str, system: MemorySystem[Any]) -> tuple[list[str], np.ndarray]:
        """Ids and embeddings of the nodes of ``kind`` (``argument`` or ``predicate``)."""
        if kind not in self._vectors:
            nodes = [n for n, k in self.graph.nodes(data="kind") if k == kind]
            texts = [self.graph.nodes[n]["text"] for n in nodes]
            self._vectors[kind] = (nodes, system.services.embedder.encode(texts))
        return self._vectors[kind]

    def statistics(self) -> dict[str, Any]:
        return {**count_kinds(self.graph), "report": self.report}


def compose(graph: nx.Graph, propositions: Sequence[StoredProposition], first: int) -> None:
    """Algorithm 1: add propositions ``first, first + 1, ...`` to ``graph``, sharing predicate
    and argument nodes with what is already there (identity by :func:`phrase_key`)."""
    for offset, stored in enumerate(propositions):
        node = f"prop:{first + offset}"
        graph.add_node(node, kind="proposition")
        predicate = f"pred:{phrase_key(stored.proposition.predicate)}"
        if predicate not in graph:
            graph.add_node(predicate, kind="predicate", text=stored.proposition.predicate)
        graph.add_edge(node, predicate, kind="predicate")
        for argument in stored.proposition.arguments:
            argument_node = f"arg:{phrase_key(argument)}"
            if argument_node not in graph:
                graph.add_node(argument_node, kind="argument", text=argument)
            graph.add_edge(node, argument_node, kind="argument")


class FraCom(MemorySystem[FraComMemory]):
    """Fragment-then-Compose memory with plausible retrieval."""

    construction_version = 1

    def __init__(
        self,
        services: Services,
        *,
        extraction: str = "lite",
        theta: float = 0.7,
        plausible: bool = True,
        predicate_filter: bool = True,
        predicate_threshold: float = 0.5,
        context: str = "propositions",
        query_extraction: str = "lite",
    ) -> None:
        super().__init__(services)
        check_choices(
            ("extraction", extraction, EXTRACTION_MODES),
            ("query_extraction", query_extraction, EXTRACTION_MODES),
            ("context", context, CONTEXT_MODES),
        )
        if not 0.0 <= theta <= 1.0:
            raise ValueError(f"theta must be in [0, 1], got {theta}")
        self.extraction = extraction
        self.uses_llm = extraction == "llm"
        self.theta = theta
        self.plausible = plausible
        self.predicate_filter = predicate_filter
        self.predicate_threshold = predicate_threshold
        self.context = context
        self.query_extraction = query_extraction
        self.extractor = PropositionExtractor(services.nlp)
        self.query_report = ExtractionReport()
        self._queries: dict[str, tuple[list[str], list[str]]] = {}

    def construction_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"extraction": self.extraction, "nlp": self.services.nlp.identity}
        if self.extraction == "llm":
            config["prompt"] = FRAGMENT_PROMPT
        return config

    # -- Fragment and Compose ------------------------------------------------------------------

    def construct(self, conversation: Conversation) -> FraComMemory:
        turns = conversation.turns
        utterances = dialogue_utterances(turns)
        lite = self.extractor.extract(utterances)
        report = ExtractionReport()
        fragments: list[list[Proposition] | None] = [None] * len(turns)
        if self.extraction == "llm":
            fragments = self.fragment_with_llm(utterances, lite, report)
        notes = time_notes(self.services.nlp, [t.text for t in turns], [t.timestamp for t in turns])
        graph: nx.Graph = nx.Graph()
        propositions: list[StoredProposition] = []
        position = 0
        for session in conversation.sessions:  # incremental merging, one session at a time
            new = []
            for turn in session.turns:
                chosen = fragments[position]
                source = "llm" if chosen is not None else "lite"
                for proposition in chosen if chosen is not None else lite[position]:
                    new.append(
                        StoredProposition(
                            proposition,
                            turn.turn_id,
                            position,
                            turn.timestamp,
                            notes[position],
                            source,
                        )
                    )
                position += 1
            compose(graph, new, len(propositions))
            propositions.extend(new)
        texts = {turn.turn_id: f"{turn.speaker}: {turn.text}" for turn in turns}
        memory = FraComMemory(graph, propositions, texts, report.to_json())
        for kind in ("argument", "predicate"):  # Sentence-BERT node vectors (Eq. 5), cached
            memory.node_vectors(kind, self)
        return memory

    def fragment_with_llm(
        self,
        utterances: Sequence[Utterance],
        lite: Sequence[list[Proposition]],
        report: ExtractionReport,
        stage: str | None = None,
    ) -> list[list[Proposition] | None]:
        """LLM propositions per utterance (``None`` where the lite ones must stand in)."""
        backbone = self.services.backbone
        if backbone is None:
            raise ValueError("extraction: llm needs a construction backbone (services.backbone)")
        if stage is not None:
            backbone = backbone.with_stage(stage)
        prompts = [
            [
                {
                    "role": "user",
                    "content": FRAGMENT_PROMPT.format(
                        speaker=u.speaker or "Someone", utterance=u.text
                    ),
                }
            ]
            for u in utterances
        ]

        def accept(index: int, value: Any) -> list[Proposition] | None:
            found = parse_fragments(value, utterances[index])
            return found if found or not lite[index] else None

        return ask_json_many(
            backbone,
            prompts,
            schema=FRAGMENT_SCHEMA,
            accept=accept,
            max_tokens=FRAGMENT_MAX_TOKENS,
            report=report,
        )

    # -- Plausible retrieval -------------------------------------------------------------------

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Read the batch's questions (one parse, or one LLM batch) and embed their phrases."""
        texts = [q.question for q in questions if q.question not in self._queries]
        if not texts:
            return
        lite_arguments = self.extractor.arguments(texts)
        lite_propositions = self.extractor.extract([Utterance(t) for t in texts])
        llm: list[list[Proposition] | None] = [None] * len(texts)
        if self.query_extraction == "llm" and self.services.backbone is not None:
            llm = self.fragment_with_llm(
                [Utterance(t) for t in texts], [[]] * len(texts), self.query_report, "retrieval"
            )
        for i, text in enumerate(texts):
            propositions = llm[i] if llm[i] else lite_propositions[i]
            arguments = [a for p in propositions for a in p.arguments]
            if not llm[i]:
                arguments += lite_arguments[i]
            predicates = [p.predicate for p in propositions]
            self._queries[text] = (
                list(dict.fromkeys(arguments)),
                [p for p in dict.fromkeys(predicates) if p not in LIGHT_PREDICATES],
            )
        phrases = [phrase for text in texts for part in self._queries[text] for phrase in part]
        if phrases:
            self.services.embedder.encode(phrases)

    def retrieve(self, memory: FraComMemory, question: Question) -> Retrieval:
        if question.question not in self._queries:
            self.prepare_queries([question])
        arguments, predicates = self._queries[question.question]
        scores = self.score_propositions(memory, arguments)
        if self.predicate_filter and predicates and scores:
            scores = self.filter_by_predicate(memory, scores, predicates)
        ranked = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
        return Retrieval(self.render(memory, ranked))

    def score_propositions(
        self, memory: FraComMemory, arguments: Sequence[str]
    ) -> dict[int, float]:
        """Retrieved propositions (index → score): argument matches with similarity ≥ θ
        (or equal keys without plausible retrieval), weighted by the argument's idf."""
        if not arguments or not memory.propositions:
            return {}
        nodes, vectors = memory.node_vectors("argument", self)
        if self.plausible:
            similarity = self.services.embedder.encode(list(arguments)) @ vectors.T
        else:
            keys = [phrase_key(a) for a in arguments]
            similarity = np.array([[float(n == f"arg:{k}") for n in nodes] for k in keys])
        total = len(memory.propositions)
        scores: dict[int, float] = {}
        for row in similarity:
            best: dict[int, float] = {}
            for column in np.flatnonzero(row >= (self.theta if self.plausible else 1.0)):
                node = nodes[column]
                idf = math.log(1 + total / memory.graph.degree(node))
                for neighbour in memory.graph.neighbors(node):
                    index = int(neighbour.removeprefix("prop:"))
                    best[index] = max(best.get(index, 0.0), float(row[column]) * idf)
            for index, value in best.items():
                scores[index] = scores.get(index, 0.0) + value
        return scores

    def filter_by_predicate(
        self, memory: FraComMemory, scores: dict[int, float], predicates: Sequence[str]
    ) -> dict[int, float]:
        """Keep propositions whose predicate is similar enough to one of the query's."""
        nodes, vectors = memory.node_vectors("predicate", self)
        similarity = (self.services.embedder.encode(list(predicates)) @ vectors.T).max(axis=0)
        passing = {nodes[i] for i in np.flatnonzero(similarity >= self.predicate_threshold)}
        return {
            index: score
            for index, score in scores.items()
            if f"pred:{phrase_key(memory.propositions[index].proposition.predicate)}" in passing
        }

    def render(
        self, memory: FraComMemory, ranked: Sequence[tuple[int, float]]
    ) -> tuple[MemoryItem, ...]:
        """Retrieved propositions as items (``context: propositions``) or their source turns."""
        items: list[MemoryItem] = []
        seen: set[str] = set()
        for index, score in ranked:
            stored = memory.propositions[index]
            if self.context == "propositions":
                text, kind = stored.text(), "proposition"
            elif stored.turn_id in seen:
                continue
            else:
                text, kind = memory.turns[stored.turn_id], "turn"
                seen.add(stored.turn_id)
            items.append(
                MemoryItem(text, (stored.turn_id,), stored.timestamp, stored.position, score, kind)
            )
        return tuple(items)

    # -- Serialization ---------------------------------------------------------------------------

    def dump_memory(self, memory: FraComMemory) -> dict[str, Any]:
        return {
            "graph": graph_to_json(memory.graph),
            "propositions": [p.to_json() for p in memory.propositions],
            "turns": memory.turns,
            "report": memory.report,
        }

    def load_memory(self, payload: dict[str, Any]) -> FraComMemory:
        return FraComMemory(
            graph_from_json(payload["graph"]),
            [StoredProposition.from_json(p) for p in payload["propositions"]],
            dict(payload["turns"]),
            dict(payload["report"]),
        )


def parse_fragments(value: Any, utterance: Utterance) -> list[Proposition]:
    """The grounded propositions of a schema-valid fragment reply (see the module docstring)."""
    names = [name for name in (utterance.speaker, utterance.addressee) if name]
    found: dict[tuple[str, tuple[str, ...]], Proposition] = {}
    for item in value["propositions"]:
        predicate = " ".join(item["Predicate"].split())
        if not phrase_key(predicate) or not grounded(predicate, utterance.text):
            continue
        arguments = tuple(
            dict.fromkeys(
                " ".join(a.split())
                for a in item["Argument"]
                if phrase_key(a) and grounded(a, utterance.text, names)
            )
        )
        if arguments:
            subjects = 1 if len(arguments) >= 2 else 0
            found.setdefault((predicate, arguments), Proposition(predicate, arguments, subjects))
    return list(found.values())
