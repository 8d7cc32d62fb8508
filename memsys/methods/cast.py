"""CAST: character-and-scene episodic memory beside a semantic graph (Ma et al., ``papers/cast.txt``).

Implements §3.1 (views of window ``w`` around each message; participants; scenes; main and
supporting characters; character profiles), §3.3.1 (role assignment), §3.3.2 and Appendix A
Algorithm 1 (greedy scene aggregation, two of three: time gap ≤ Δt, location distance ≤ Δℓ,
topic similarity ≥ Δτ), §3.2 (semantic index in the HippoRAG2 style: OpenIE triples, phrase and
passage nodes, personalized PageRank, dense passage retrieval as fallback; episodic index: scene
summaries embedded, kNN filtered by the query's persons, time and place), §3.3.3 and Algorithm 2
(fusion), and the ablations of §4.3.2: without window (``window: 0``), speaker-only roles
(``participants: speakers``) and slot-3 insertion (``fusion: slot3``). ``extraction: lite``
replaces the LLM steps (NER + OpenIE, scene summaries) by spaCy (:mod:`memsys.propositions`) and
an extractive summary.

Readings taken where the paper is vague (each a config value where it can vary):

* Views stay inside their session (a window does not reach into another day's conversation);
  at a session's edges the window is clamped as the paper clamps it at the dialogue's edges.
* Participants of a view: the speakers of its window's messages and the persons its text
  mentions (NER), mentions of a speaker's name or its prefix (``Mel``) counted as that speaker.
  In a scene, a participant who speaks in one of its views is a main character, otherwise a
  supporting one. The view is copied into every participant's stream.
* Topic of a view: the embedding of its text; a scene's topic is the running mean of its views'
  (renormalized), topic similarity the cosine with it. Time is the session date.
* Location: the data model carries none and LoCoMo has none. A missing location on either side
  does not satisfy the location condition (``missing_location: unmet``; ``met`` counts it as
  satisfied, which lets time alone join views). So on LoCoMo a view joins a scene when it is
  within a day of the scene's latest view and on its topic (cosine ≥ 0.7).
* Scene summary: LLM, one or two sentences; lite: the ``summary_messages`` (3) messages closest
  to the scene's topic, in time order, under a line naming the character, role and date.
* Semantic memory (:mod:`memsys.semantic_graph`, where the HippoRAG2 readings are listed):
  passages are messages (``Speaker: text``); phrases are the subjects and objects of the LLM's
  triples (lite: every argument of the message's propositions, with triples between subjects
  and objects); query entities are every argument and noun phrase of the question. A message
  whose LLM reply keeps no grounded triple while the parse finds some is retried, then parsed.
* Episodic filters: persons named in the question keep only their characters' scenes; its date
  expressions (resolved against the question date, else the last session's) keep scenes whose
  time matches at the expression's granularity; its places keep scenes at those places or with
  no place. A filter that would leave no scene is skipped. The top ``top_k`` scenes' messages
  form the episodic set, ranked scene by scene, by cosine with the question within a scene.
* Slot 3: the best episodic message not already in the semantic list is inserted at position 3
  and the list is cut back to ``top_k``, so both fusions hand the reader the same number of items.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import networkx as nx
import numpy as np

from memsys.base import EXTRACTION_MODES, MemorySystem, Services, check_choices
from memsys.graph import count_kinds, graph_from_json, graph_to_json
from memsys.nlp import PLACE_LABELS, resolve_time
from memsys.propositions import (
    ADDRESSEE_PRONOUNS,
    SPEAKER_PRONOUNS,
    PropositionExtractor,
    Utterance,
    dialogue_utterances,
    grounded,
    phrase_key,
    triples,
)
from memsys.semantic_graph import PassageFacts, PassageGraphIndex, SearchSettings, build_graph
from memsys.structured import ExtractionReport, ask_json_many
from memsys.types import Conversation, MemoryItem, Question, Retrieval

T = TypeVar("T")

#: NER + OpenIE for one message (HippoRAG's two prompts in one call, in the project's words).
OPENIE_PROMPT = """Here is one message from a conversation, written by {speaker}:
{text}

List the people named in the message. Then extract the facts it states as (subject, predicate, \
object) triples, as open information extraction does: subjects and objects are short noun \
phrases from the message (named entities wherever possible), predicates short verb phrases. \
Write {speaker} for "I" or "me". Reply with JSON only, in this form:
{{"persons": ["Gina"], "triples": [["Gina", "won", "first place"]]}}"""

OPENIE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "persons": {
            "type": "array",
            "maxItems": 8,
            "items": {"type": "string", "minLength": 1, "maxLength": 60},
        },
        "triples": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "array",
                "minItems": 3,
                "maxItems": 3,
                "items": {"type": "string", "maxLength": 80},
            },
        },
    },
    "required": ["persons", "triples"],
    "additionalProperties": False,
}

#: The scene summary φ(s) of §3.1.
SUMMARY_PROMPT = """Here is a scene from a conversation: consecutive messages close in time and \
about one topic, seen as part of {character}'s story ({character} is a {role} character here).
{messages}

Summarize the scene in one or two sentences: who did what, when and where. Reply with JSON \
only, in this form: {{"summary": "..."}}"""

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": 600}},
    "required": ["summary"],
    "additionalProperties": False,
}
OPENIE_MAX_TOKENS = 320
PRONOUNS = SPEAKER_PRONOUNS | ADDRESSEE_PRONOUNS
SUMMARY_MAX_TOKENS = 200
SUMMARY_MAX_CHARS = 3000
MAIN, SUPPORTING = "main", "supporting"


@dataclass(frozen=True)
class SceneRule:
    """Thresholds of the two-of-three rule (Δt, Δℓ as equality of place names, Δτ)."""

    max_gap: timedelta = timedelta(days=1)
    topic_threshold: float = 0.7
    missing_location: str = "unmet"


def aggregate_scenes(
    times: Sequence[datetime | None],
    locations: Sequence[str | None],
    topics: np.ndarray,
    rule: SceneRule,
) -> list[list[int]]:
    """Algorithm 1 on one character stream: views (in time order) → scenes (lists of view
    indices). Each view joins the first scene, in creation order, meeting two of the three
    conditions, else starts a new one."""
    scenes: list[list[int]] = []
    latest: list[datetime | None] = []
    topic_sums: list[np.ndarray] = []
    places: list[Counter[str]] = []
    for index, (time, place, topic) in enumerate(zip(times, locations, topics, strict=True)):
        for s, members in enumerate(scenes):
            last = latest[s]
            time_ok = time is not None and last is not None and abs(time - last) <= rule.max_gap
            scene_place = places[s].most_common(1)[0][0] if places[s] else None
            if place is None or scene_place is None:
                place_ok = rule.missing_location == "met"
            else:
                place_ok = place == scene_place
            centroid = topic_sums[s] / (np.linalg.norm(topic_sums[s]) or 1.0)
            topic_ok = float(centroid @ topic) >= rule.topic_threshold
            if time_ok + place_ok + topic_ok >= 2:
                members.append(index)
                if time is not None and (last is None or time > last):
                    latest[s] = time
                topic_sums[s] = topic_sums[s] + topic
                if place is not None:
                    places[s][place] += 1
                break
        else:
            scenes.append([index])
            latest.append(time)
            topic_sums.append(np.array(topic, dtype=np.float64))
            places.append(Counter([place] if place is not None else []))
    return scenes


def fuse(semantic: Sequence[T], episodic: Collection[T]) -> list[T]:
    """Algorithm 2: semantic items also found episodically first, each block in semantic order;
    no item is added.

    >>> fuse(["a", "b", "c", "d"], {"d", "b", "x"})
    ['b', 'd', 'a', 'c']
    """
    found = set(episodic)
    return [m for m in semantic if m in found] + [m for m in semantic if m not in found]


def insert_at_slot(semantic: Sequence[T], episodic: Sequence[T], k: int, slot: int = 3) -> list[T]:
    """The slot-3 ablation: the best episodic item not yet listed goes to position ``slot``.

    >>> insert_at_slot(["a", "b", "c", "d", "e"], ["b", "x"], k=5)
    ['a', 'b', 'x', 'c', 'd']
    """
    fused = list(semantic)
    extra = next((m for m in episodic if m not in set(semantic)), None)
    if extra is not None:
        fused.insert(min(slot - 1, len(fused)), extra)
    return fused[:k]


@dataclass(frozen=True)
class Scene:
    """One scene of one character's profile."""

    character: str
    role: str
    positions: tuple[int, ...]
    start: datetime | None
    end: datetime | None
    location: str | None
    participants: dict[str, str]
    summary: str
    summary_source: str

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["positions"] = list(self.positions)
        data["start"] = self.start.isoformat() if self.start else None
        data["end"] = self.end.isoformat() if self.end else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scene:
        moments = {
            k: datetime.fromisoformat(data[k]) if data[k] else None for k in ("start", "end")
        }
        return cls(**{**data, **moments, "positions": tuple(data["positions"])})


class CastMemory:
    """Messages, scenes (all characters' profiles), the semantic graph and construction report."""

    def __init__(
        self,
        messages: list[dict[str, Any]],
        scenes: list[Scene],
        graph: nx.Graph,
        report: dict[str, Any],
    ) -> None:
        self.messages = messages
        self.scenes = scenes
        self.graph = graph
        self.report = report
        self._cache: dict[str, Any] = {}

    def vectors(self, name: str, system: MemorySystem[Any]) -> np.ndarray:
        """Embeddings of the ``passages`` (messages) or ``scenes`` (summaries), built once."""
        if name not in self._cache:
            if name == "passages":
                texts = [message["text"] for message in self.messages]
            else:
                texts = [scene.summary for scene in self.scenes]
            self._cache[name] = system.services.embedder.encode(texts)
        return self._cache[name]

    def semantic_index(self, system: MemorySystem[Any]) -> PassageGraphIndex:
        """The semantic graph ready for search (phrase vectors, PageRank matrix), built once."""
        if "index" not in self._cache:
            passages = self.vectors("passages", system)
            self._cache["index"] = PassageGraphIndex(self.graph, passages, system.services.embedder)
        return self._cache["index"]

    def characters(self) -> dict[str, dict[str, int]]:
        """Scenes per character and role (the character profiles' sizes)."""
        profile: dict[str, Counter[str]] = {}
        for scene in self.scenes:
            profile.setdefault(scene.character, Counter())[scene.role] += 1
        return {name: dict(sorted(c.items())) for name, c in sorted(profile.items())}

    def statistics(self) -> dict[str, Any]:
        return {**count_kinds(self.graph), "characters": self.characters(), "report": self.report}


@dataclass(frozen=True)
class QueryAnalysis:
    """What retrieval reads from a question: entities, persons, times and places."""

    entities: tuple[str, ...]
    persons: tuple[str, ...]
    times: tuple[str, ...]
    places: tuple[str, ...]


class CAST(MemorySystem[CastMemory]):
    """Character-and-scene episodic memory fused with HippoRAG2-style semantic memory."""

    construction_version = 1

    def __init__(
        self,
        services: Services,
        *,
        extraction: str = "lite",
        window: int = 1,
        participants: str = "all",
        max_gap_days: float = 1.0,
        topic_threshold: float = 0.7,
        missing_location: str = "unmet",
        summary_messages: int = 3,
        synonym_threshold: float = 0.8,
        top_k: int = 5,
        fusion: str = "rerank",
        link_threshold: float = 0.7,
        passage_node_weight: float = 0.05,
        damping: float = 0.5,
    ) -> None:
        super().__init__(services)
        check_choices(
            ("extraction", extraction, EXTRACTION_MODES),
            ("participants", participants, ("all", "speakers")),
            ("missing_location", missing_location, ("unmet", "met")),
            ("fusion", fusion, ("rerank", "slot3")),
        )
        if window < 0 or top_k < 1 or summary_messages < 1:
            raise ValueError("window must be >= 0, top_k and summary_messages >= 1")
        self.extraction = extraction
        self.uses_llm = extraction == "llm"
        self.window = window
        self.participants = participants
        self.rule = SceneRule(timedelta(days=max_gap_days), topic_threshold, missing_location)
        self.summary_messages = summary_messages
        self.synonym_threshold = synonym_threshold
        self.top_k = top_k
        self.fusion = fusion
        self.search = SearchSettings(top_k, link_threshold, passage_node_weight, damping)
        self.extractor = PropositionExtractor(services.nlp)
        self._queries: dict[str, QueryAnalysis] = {}

    def construction_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "extraction": self.extraction,
            "window": self.window,
            "participants": self.participants,
            "max_gap_s": self.rule.max_gap.total_seconds(),
            "topic_threshold": self.rule.topic_threshold,
            "missing_location": self.rule.missing_location,
            "summary_messages": self.summary_messages,
            "synonym_threshold": self.synonym_threshold,
            "nlp": self.services.nlp.identity,
        }
        if self.extraction == "llm":
            config["prompts"] = [OPENIE_PROMPT, SUMMARY_PROMPT]
        return config

    # -- Construction ----------------------------------------------------------------------------

    def construct(self, conversation: Conversation) -> CastMemory:
        turns = conversation.turns
        utterances = dialogue_utterances(turns)
        messages = [
            {
                "turn_id": t.turn_id,
                "text": f"{t.speaker}: {t.text}",
                "timestamp": t.timestamp.isoformat() if t.timestamp else None,
                "position": i,
                "speaker": t.speaker,
            }
            for i, t in enumerate(turns)
        ]
        persons, facts, reports = self.extract_facts(utterances)
        speakers = list(dict.fromkeys(t.speaker for t in turns))
        persons = [[canonical_person(p, speakers) for p in names] for names in persons]
        scenes, views = self.build_scenes(conversation, persons)
        summaries = self.summarize(scenes, messages, reports)
        scenes = [
            Scene(**{**asdict(s), "summary": text, "summary_source": source})
            for s, (text, source) in zip(scenes, summaries, strict=True)
        ]
        graph = build_graph(facts, self.services.embedder, self.synonym_threshold)
        report = {"views": views, "llm": {k: r.to_json() for k, r in reports.items()}}
        memory = CastMemory(messages, scenes, graph, report)
        memory.vectors("scenes", self)  # h_s = f_scene(φ(s)), Algorithm 1 line 19 (cached)
        return memory

    def extract_facts(
        self, utterances: Sequence[Utterance]
    ) -> tuple[list[list[str]], list[PassageFacts], dict[str, ExtractionReport]]:
        """Per message: persons mentioned, and (phrases, triples) for the semantic graph."""
        texts = [u.text for u in utterances]
        persons = self.extractor.persons(texts)
        facts: list[PassageFacts] = []
        for propositions in self.extractor.extract(utterances):
            phrases = [a for p in propositions for a in p.arguments]
            facts.append((phrases, [t for p in propositions for t in triples(p)]))
        reports = {"openie": ExtractionReport(), "summaries": ExtractionReport()}
        if self.extraction == "llm":
            llm = self._openie(utterances, facts, reports["openie"])
            for i, found in enumerate(llm):
                if found is not None:
                    persons[i], facts[i] = found
        return persons, facts, reports

    def _openie(
        self,
        utterances: Sequence[Utterance],
        lite_facts: Sequence[PassageFacts],
        report: ExtractionReport,
    ) -> list[tuple[list[str], PassageFacts] | None]:
        """LLM persons and triples per message (``None`` where the lite ones must stand in)."""
        backbone = _require_backbone(self.services)
        prompts = [
            [{"role": "user", "content": OPENIE_PROMPT.format(speaker=u.speaker, text=u.text)}]
            for u in utterances
        ]

        def accept(index: int, value: Any) -> tuple[list[str], PassageFacts] | None:
            u = utterances[index]
            names = [n for n in (u.speaker, u.addressee) if n]
            persons = [
                " ".join(p.split())
                for p in value["persons"]
                if p.strip()[:1].isupper()
                and p.strip().lower() not in PRONOUNS
                and grounded(p, u.text, names)
            ]
            kept: list[tuple[str, str, str]] = [
                (
                    " ".join(triple[0].split()),
                    " ".join(triple[1].split()),
                    " ".join(triple[2].split()),
                )
                for triple in value["triples"]
                if all(phrase_key(part) for part in triple)
                and grounded(triple[0], u.text, names)
                and grounded(triple[2], u.text, names)
            ]
            if not kept and lite_facts[index][1]:
                return None
            phrases = [part for s, _, o in kept for part in (s, o)]
            return persons, (phrases, kept)

        return ask_json_many(
            backbone, prompts, schema=OPENIE_SCHEMA, accept=accept,
            max_tokens=OPENIE_MAX_TOKENS, report=report,
        )  # fmt: skip

    def build_scenes(
        self, conversation: Conversation, persons: Sequence[Sequence[str]]
    ) -> tuple[list[Scene], int]:
        """Views → participants' streams → scenes per stream (summaries still empty)."""
        turns = conversation.turns
        positions = {t.turn_id: i for i, t in enumerate(turns)}
        views: list[dict[str, Any]] = []
        for session in conversation.sessions:
            ids = [positions[t.turn_id] for t in session.turns]
            for local, center in enumerate(ids):
                window = ids[max(0, local - self.window) : local + self.window + 1]
                speakers = list(dict.fromkeys(turns[i].speaker for i in window))
                mentioned = [p for i in window for p in persons[i] if p not in speakers]
                members = speakers if self.participants == "speakers" else speakers + mentioned
                views.append(
                    {
                        "center": center,
                        "window": window,
                        "speakers": speakers,
                        "participants": list(dict.fromkeys(members)),
                        "time": turns[center].timestamp,
                        "location": None,  # the data model carries no message locations
                    }
                )
        texts = [
            "\n".join(f"{turns[i].speaker}: {turns[i].text}" for i in v["window"]) for v in views
        ]
        topics = self.services.embedder.encode(texts) if texts else np.zeros((0, 1))
        streams: dict[str, list[int]] = {}
        for index, view in enumerate(views):
            for person in view["participants"]:
                streams.setdefault(person, []).append(index)
        scenes = []
        for character, members in streams.items():
            members.sort(key=lambda i: (views[i]["time"] or datetime.min, views[i]["center"]))
            groups = aggregate_scenes(
                [views[i]["time"] for i in members],
                [views[i]["location"] for i in members],
                topics[members],
                self.rule,
            )
            for group in groups:
                scene_views = [views[members[g]] for g in group]
                scenes.append(_scene(character, scene_views))
        scenes.sort(key=lambda s: (s.start or datetime.min, s.positions[0], s.character))
        return scenes, len(views)

    def summarize(
        self,
        scenes: Sequence[Scene],
        messages: Sequence[dict[str, Any]],
        reports: dict[str, ExtractionReport],
    ) -> list[tuple[str, str]]:
        """φ(s) for each scene: ``(summary, "llm" | "extractive")``."""
        passage_vectors = self.services.embedder.encode([m["text"] for m in messages])
        extractive = []
        for scene in scenes:
            rows = list(scene.positions)
            centroid = passage_vectors[rows].mean(axis=0)
            best = sorted(np.argsort(-(passage_vectors[rows] @ centroid))[: self.summary_messages])
            others = [n for n in scene.participants if n != scene.character]
            date = f"{scene.start.day} {scene.start:%B %Y}" if scene.start else "undated"
            header = f"{scene.character} ({scene.role} character) with {', '.join(others) or 'no one else'}, {date}:"
            extractive.append("\n".join([header, *(messages[rows[b]]["text"] for b in best)]))
        if self.extraction != "llm" or not scenes:
            return [(text, "extractive") for text in extractive]
        prompts = [
            [
                {
                    "role": "user",
                    "content": SUMMARY_PROMPT.format(
                        character=s.character,
                        role=s.role,
                        messages="\n".join(messages[i]["text"] for i in s.positions)[
                            :SUMMARY_MAX_CHARS
                        ],
                    ),
                }
            ]
            for s in scenes
        ]

        def accept(index: int, value: Any) -> str | None:
            summary = " ".join(value["summary"].split())
            return summary if len(summary.split()) >= 3 else None

        written = ask_json_many(
            _require_backbone(self.services), prompts, schema=SUMMARY_SCHEMA, accept=accept,
            max_tokens=SUMMARY_MAX_TOKENS, report=reports["summaries"],
        )  # fmt: skip
        return [
            (text, "llm") if text is not None else (fallback, "extractive")
            for text, fallback in zip(written, extractive, strict=True)
        ]

    # -- Retrieval -------------------------------------------------------------------------------

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Analyse a batch of questions (one parse) and embed them and their entities."""
        texts = [q.question for q in questions if q.question not in self._queries]
        if not texts:
            return
        arguments = self.extractor.arguments(texts)
        persons = self.extractor.persons(texts)
        entities = self.extractor.entities(texts)
        for i, text in enumerate(texts):
            self._queries[text] = QueryAnalysis(
                tuple(arguments[i]),
                tuple(persons[i]),
                tuple(e for e, label in entities[i] if label in {"DATE"}),
                tuple(e for e, label in entities[i] if label in PLACE_LABELS),
            )
        self.services.embedder.encode(texts + [e for t in texts for e in self._queries[t].entities])

    def retrieve(self, memory: CastMemory, question: Question) -> Retrieval:
        if question.question not in self._queries:
            self.prepare_queries([question])
        query = self._queries[question.question]
        query_vector = self.services.embedder.encode([question.question])[0]
        semantic = memory.semantic_index(self).search(query_vector, query.entities, self.search)
        episodic = self.episodic_search(memory, question, query, query_vector)
        ranked = [position for position, _ in semantic]
        scores = dict(semantic)
        if self.fusion == "rerank":
            order = fuse(ranked, set(episodic))
        else:
            order = insert_at_slot(ranked, episodic, self.top_k)
        items = []
        for position in order:
            message = memory.messages[position]
            timestamp = (
                datetime.fromisoformat(message["timestamp"]) if message["timestamp"] else None
            )
            score = scores.get(position, 0.0)
            items.append(
                MemoryItem(
                    message["text"], (message["turn_id"],), timestamp, position, score, "message"
                )
            )
        return Retrieval(tuple(items))

    def episodic_search(
        self, memory: CastMemory, question: Question, query: QueryAnalysis, query_vector: np.ndarray
    ) -> list[int]:
        """Messages of the top-k scenes after the person, time and place filters, ranked."""
        if not memory.scenes:
            return []
        candidates = list(range(len(memory.scenes)))
        characters = sorted({s.character for s in memory.scenes})
        words = set(phrase_key(question.question).split())
        wanted = {c for c in characters if c.split()[0].lower() in words}
        wanted |= {canonical_person(p, characters) for p in query.persons} & set(characters)
        anchor = question.question_date or _last_time(memory)
        moments = [r for e in query.times if anchor and (r := resolve_time(e, anchor))]
        filters = [
            lambda s: s.character in wanted if wanted else True,
            lambda s: any(_time_matches(s, moment) for moment in moments) if moments else True,
            lambda s: s.location is None or s.location in query.places,
        ]
        for keep in filters:
            narrowed = [i for i in candidates if keep(memory.scenes[i])]
            candidates = narrowed or candidates
        similarity = memory.vectors("scenes", self)[candidates] @ query_vector
        top = [candidates[i] for i in np.argsort(-similarity, kind="stable")[: self.top_k]]
        passages = memory.vectors("passages", self)
        ranked: list[int] = []
        for scene in top:
            positions = list(memory.scenes[scene].positions)
            order = np.argsort(-(passages[positions] @ query_vector), kind="stable")
            ranked.extend(positions[i] for i in order if positions[i] not in ranked)
        return ranked

    # -- Serialization ---------------------------------------------------------------------------

    def dump_memory(self, memory: CastMemory) -> dict[str, Any]:
        return {
            "messages": memory.messages,
            "scenes": [s.to_json() for s in memory.scenes],
            "graph": graph_to_json(memory.graph),
            "report": memory.report,
        }

    def load_memory(self, payload: dict[str, Any]) -> CastMemory:
        return CastMemory(
            list(payload["messages"]),
            [Scene.from_json(s) for s in payload["scenes"]],
            graph_from_json(payload["graph"]),
            dict(payload["report"]),
        )


def canonical_person(name: str, speakers: Sequence[str]) -> str:
    """A mention as a speaker's name where it is one (``Mel`` → ``Melanie``), else as written.

    >>> canonical_person("Mel", ["Caroline", "Melanie"]), canonical_person("Gina", ["Jon"])
    ('Melanie', 'Gina')
    """
    first = name.split()[0].lower() if name.split() else ""
    for speaker in speakers:
        head = speaker.split()[0].lower() if speaker.split() else ""
        if first and (first == head or (len(first) >= 3 and head.startswith(first))):
            return speaker
    return name


def _scene(character: str, views: Sequence[dict[str, Any]]) -> Scene:
    speaking = {s for v in views for s in v["speakers"]}
    participants = {
        p: (MAIN if p in speaking else SUPPORTING) for v in views for p in v["participants"]
    }
    times = [v["time"] for v in views if v["time"] is not None]
    places = Counter(v["location"] for v in views if v["location"] is not None)
    return Scene(
        character=character,
        role=participants.get(character, SUPPORTING),
        positions=tuple(sorted({i for v in views for i in v["window"]})),
        start=min(times) if times else None,
        end=max(times) if times else None,
        location=places.most_common(1)[0][0] if places else None,
        participants=dict(sorted(participants.items())),
        summary="",
        summary_source="",
    )


def _time_matches(scene: Scene, moment: Any) -> bool:
    if scene.start is None or scene.end is None:
        return False
    when = moment.timestamp
    if moment.granularity == "year":
        return scene.start.year <= when.year <= scene.end.year
    if moment.granularity == "month":
        return (
            (scene.start.year, scene.start.month)
            <= (when.year, when.month)
            <= (scene.end.year, scene.end.month)
        )
    slack = timedelta(days=7 if moment.granularity == "week" else 1)
    return scene.start - slack <= when <= scene.end + slack


def _last_time(memory: CastMemory) -> datetime | None:
    stamps = [m["timestamp"] for m in memory.messages if m["timestamp"]]
    return datetime.fromisoformat(max(stamps)) if stamps else None


def _require_backbone(services: Services) -> Any:
    if services.backbone is None:
        raise ValueError("extraction: llm needs a construction backbone (services.backbone)")
    return services.backbone
