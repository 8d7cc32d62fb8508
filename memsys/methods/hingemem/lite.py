"""HingeMem's lite extraction: elements by NER, dates and keywords; boundaries where they change.

Part of :mod:`memsys.methods.hingemem` (the classical substitute of the boundary-extraction
prompt of papers/hingemem.txt §3.2.1; readings in that module's docstring). Also the time and
keyword helpers that the rule-based query analysis shares.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memsys.embed import Embedder
from memsys.nlp import NLP, PERSON_LABELS, PLACE_LABELS, TIME_LABELS, resolve_time
from memsys.types import Session

from .memory import (
    ConstructionOptions,
    Hyperedge,
    Node,
    normalize_name,
    time_key,
)

# --- time expressions ------------------------------------------------------------------------

_DURATION = re.compile(
    r"^(?:for\s+|about\s+|around\s+|over\s+|almost\s+|nearly\s+|the\s+)*"
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|several|couple of)\s+"
    r"(?:more\s+)?(?:years?|months?|weeks?|days?|hours?|minutes?)$"
)
#: A season by its middle month (winter's January belongs to the winter that began in December).
_SEASONS = {"spring": 4, "summer": 7, "fall": 10, "autumn": 10, "winter": 1}


def resolve_season(season: str, relation: str, anchor: datetime) -> datetime:
    """The middle month of the season ``relation`` (this, last, next, or "" for this) points to.

    Each occurrence spans its middle month ±1. "last" is the latest occurrence over before the
    anchor's month; "next" the first that starts after it; "this" the one containing the anchor,
    else the nearest.

    >>> resolve_season("winter", "last", datetime(2023, 5, 8)), resolve_season("winter", "last", datetime(2023, 1, 20))
    (datetime.datetime(2023, 1, 1, 0, 0), datetime.datetime(2022, 1, 1, 0, 0))
    >>> resolve_season("summer", "this", datetime(2023, 10, 2)), resolve_season("summer", "next", datetime(2023, 7, 2))
    (datetime.datetime(2023, 7, 1, 0, 0), datetime.datetime(2024, 7, 1, 0, 0))
    """
    month = anchor.year * 12 + anchor.month - 1  # months since year 0
    middles = [(anchor.year + shift) * 12 + _SEASONS[season] - 1 for shift in (-2, -1, 0, 1, 2)]
    if relation == "last":
        middle = max(m for m in middles if m + 1 < month)
    elif relation == "next":
        middle = min(m for m in middles if m - 1 > month)
    else:
        middle = min(middles, key=lambda m: (max(abs(m - month) - 1, 0), -m))
    return datetime(middle // 12, middle % 12 + 1, 1)


def resolve_expression(expression: str, anchor: datetime) -> tuple[datetime, str] | None:
    """A time phrase resolved against ``anchor`` with its granularity, or ``None``.

    Durations ("five years") and bare numbers are not times; "weekend", "a few weeks ago" and
    seasons, which dateparser does not read, are rewritten first (approximate ones get ``approx``).

    >>> resolve_expression("last weekend", datetime(2023, 5, 8))
    (datetime.datetime(2023, 5, 6, 0, 0), 'week')
    >>> resolve_expression("this summer", datetime(2023, 5, 8))
    (datetime.datetime(2023, 7, 1, 0, 0), 'approx')
    >>> resolve_expression("three years ago", datetime(2023, 5, 8))
    (datetime.datetime(2020, 5, 8, 0, 0), 'year')
    >>> resolve_expression("for 4 years", datetime(2023, 5, 8)) is None
    True
    """
    text = " ".join(expression.lower().replace("’", "'").split())
    if not re.search(r"[a-z]", text) and not re.fullmatch(r"\d{4}", text):
        return None
    if _DURATION.match(text):
        return None
    text = re.sub(r"\b(?:this|the) past\b", "last", text)
    season = re.search(r"\b(this|last|next)?\s*(spring|summer|fall|autumn|winter)\b", text)
    if season:
        return resolve_season(season[2], season[1] or "this", anchor), "approx"
    weekend = re.search(r"\b(last|this|next)\s+weekend\b", text)
    if weekend:
        resolved = resolve_time(f"{weekend[1]} saturday", anchor)
        return (resolved.timestamp, "week") if resolved else None
    approx = re.sub(r"\b(?:a few|a couple of|several)\b", "3", text)
    resolved = resolve_time(approx, anchor)
    if resolved is None:
        return None
    if approx != text:
        return resolved.timestamp, "approx"
    unit = re.search(r"\b(year|month|week)s? ago\b", text)  # "three years ago" names a year
    return resolved.timestamp, unit[1] if unit else resolved.granularity


# --- lite extraction -----------------------------------------------------------------------------

_ENTITY_TOPIC_EXCLUDED = PERSON_LABELS | PLACE_LABELS | TIME_LABELS | {"CARDINAL", "ORDINAL"}
_GENERIC = frozenset(
    str.split(
        "thing things lot lots time times way ways day days bit kind sort one ones stuff people guy "
        "guys something anything everything nothing everyone someone anyone today yesterday tomorrow "
        "week weeks year years month months photo photos picture pictures image images pic pics "
        "moment moments idea ideas part parts end start"
    )
)
_EVALUATIVE = frozenset(
    str.split(
        "great good amazing awesome new nice cool big little small lovely beautiful wonderful huge "
        "fun happy glad special real whole other same different best better favorite favourite "
        "first last next own sure hard tough busy excited fantastic incredible super true"
    )
)
_INTERJECTIONS = frozenset(
    str.split(
        "hi hey hello bye thanks thank wow nah yeah yes no oh omg wanna gonna lol haha aww awesome "
        "congrats kinda glad sure cool yay ok okay hmm um love dear"
    )
)
_MARKERS = re.compile(
    r"\b(by the way|btw|anyway|anyways|speaking of|on another note|on a different note|"
    r"changing the subject|guess what|that reminds me|random question|quick question)\b"
)


def topic_phrases(doc: Any) -> list[tuple[str, str]]:
    """``(identifier, surface)`` of the keyword topics of a parsed text: noun chunks cut to their
    last three nouns or descriptive adjectives, entity names and generic words left out."""
    found = []
    for chunk in doc.noun_chunks:
        root = chunk.root
        if root.pos_ not in ("NOUN", "PROPN") or root.ent_type_ in _ENTITY_TOPIC_EXCLUDED:
            continue
        words = []
        for token in reversed([token for token in chunk if token.i <= root.i]):
            usable = (
                token.pos_ in ("NOUN", "PROPN", "ADJ")
                and not token.is_stop
                and token.lower_ not in _EVALUATIVE
                and token.ent_type_ not in _ENTITY_TOPIC_EXCLUDED
            )
            if not usable or len(words) == 3:
                break
            words.insert(0, token)
        if not words or (len(words) == 1 and root.lemma_.lower() in _GENERIC | _INTERJECTIONS):
            continue
        key = " ".join(
            [token.lower_ for token in words[:-1]] + [words[-1].lemma_.lower() or words[-1].lower_]
        )
        found.append((normalize_name("topic", key), " ".join(token.text for token in words)))
    return [(key, surface) for key, surface in found if key]


def content_words(doc: Any) -> int:
    """Alphabetic, non-stop-word tokens: what a turn contributes to an event."""
    return sum(1 for token in doc if token.is_alpha and not token.is_stop)


@dataclass
class _Segment:
    reasons: list[str]
    turns: list[int] = field(default_factory=list)
    elements: dict[str, dict[str, Node]] = field(
        default_factory=lambda: {e: {} for e in ("person", "time", "location", "topic")}
    )
    topic_counts: Counter[str] = field(default_factory=Counter)
    speaker_words: Counter[str] = field(default_factory=Counter)
    speaker_nodes: dict[str, Node] = field(default_factory=dict)
    vector_sum: np.ndarray | None = None


class LiteExtractor:
    """Elements by NER, date resolution and noun-chunk keywords; a boundary where they change."""

    def __init__(self, nlp: NLP, embedder: Embedder, options: ConstructionOptions) -> None:
        self.nlp = nlp
        self.embedder = embedder
        self.options = options

    def extract(self, session: Session) -> tuple[list[Node], list[Hyperedge]]:
        """The nodes and boundary memories of one session (positions filled in by the caller)."""
        if not session.turns:
            return [], []
        docs = self.nlp.parse([turn.text for turn in session.turns])
        vectors = self.embedder.encode([f"{t.speaker}: {t.text}" for t in session.turns])
        speakers = {normalize_name("person", t.speaker): t.speaker for t in session.turns}
        confirmed = self._confirmed_names(docs, speakers)
        anchor = session.timestamp or datetime(1970, 1, 1)
        segments = [_Segment(["change_time"])]
        for index, (turn, doc) in enumerate(zip(session.turns, docs, strict=True)):
            found = self._turn_elements(turn.turn_id, doc, speakers, confirmed, anchor)
            marker = bool(_MARKERS.search(turn.text[:80].lower()))
            current = segments[-1]
            if len(current.turns) >= self.options.min_segment_turns:
                reasons = self._changes(current, found, marker, vectors[index], speakers)
                if reasons:
                    current = _Segment(reasons)
                    segments.append(current)
            speaker = current.speaker_nodes.setdefault(
                turn.speaker, Node("person", normalize_name("person", turn.speaker), turn.speaker)
            )
            speaker.mentions.append((turn.turn_id, turn.speaker))
            current.speaker_words[turn.speaker] += content_words(doc)
            self._add(current, index, found, vectors[index])
        return self._assemble(session, segments)

    def _confirmed_names(self, docs: Sequence[Any], speakers: Mapping[str, str]) -> set[str]:
        """Person identifiers seen at least once away from the start of a sentence (spaCy's small
        model tags capitalized sentence-initial words such as "Nature" as persons)."""
        confirmed = set(speakers)
        for doc in docs:
            for entity in doc.ents:
                if entity.label_ in PERSON_LABELS and (
                    len(entity) > 1 or not entity[0].is_sent_start
                ):
                    confirmed.add(normalize_name("person", entity.text))
        return confirmed

    def _person(self, text: str, speakers: Mapping[str, str]) -> tuple[str, str] | None:
        words = text.split()
        while words and normalize_name("person", words[0]) in _INTERJECTIONS:
            words = words[1:]
        key = normalize_name("person", " ".join(words))
        if not key or key in _INTERJECTIONS:
            return None
        aliases = [s for s in speakers if len(key) >= 3 and " " not in key and s.startswith(key)]
        if len(aliases) == 1:
            return aliases[0], speakers[aliases[0]]
        return key, " ".join(words)

    def _turn_elements(
        self,
        turn_id: str,
        doc: Any,
        speakers: Mapping[str, str],
        confirmed: set[str],
        anchor: datetime,
    ) -> dict[str, list[Node]]:
        found: dict[str, list[Node]] = {e: [] for e in ("person", "time", "location", "topic")}
        for entity in doc.ents:
            if entity.label_ in PERSON_LABELS:
                person = self._person(entity.text, speakers)
                if person and (person[0] in confirmed or person[0] in speakers):
                    found["person"].append(
                        Node("person", *person, mentions=[(turn_id, entity.text)])
                    )
            elif entity.label_ in PLACE_LABELS:
                key = normalize_name("location", entity.text)
                if key and key not in speakers:
                    node = Node("location", key, entity.text, mentions=[(turn_id, entity.text)])
                    found["location"].append(node)
            elif entity.label_ in TIME_LABELS:
                resolved = resolve_expression(entity.text, anchor)
                if resolved:
                    key = time_key(*resolved)
                    node = Node("time", key, key, resolved[1], [(turn_id, entity.text)])
                    found["time"].append(node)
        for key, surface in topic_phrases(doc):
            if key in confirmed or key in speakers:
                continue
            found["topic"].append(Node("topic", key, surface, mentions=[(turn_id, surface)]))
        return found

    def _changes(
        self,
        segment: _Segment,
        found: Mapping[str, list[Node]],
        marker: bool,
        vector: np.ndarray,
        speakers: Mapping[str, str],
    ) -> list[str]:
        new = {e: {n.key for n in found[e]} - set(segment.elements[e]) for e in found}
        reasons = []
        if new["person"] - set(speakers):
            reasons.append("change_person")
        if new["time"]:
            reasons.append("change_time")
        if new["location"]:
            reasons.append("change_place")
        if marker:
            reasons.append("explicit_marker")
        topics = {node.key for node in found["topic"]}
        if topics - set(segment.elements["topic"]) and segment.vector_sum is not None:
            centre = segment.vector_sum / max(np.linalg.norm(segment.vector_sum), 1e-12)
            if float(centre @ vector) < self.options.topic_shift_threshold:
                reasons.append("topic_shift")
        return reasons

    def _add(
        self, segment: _Segment, index: int, found: Mapping[str, list[Node]], vector: np.ndarray
    ) -> None:
        segment.turns.append(index)
        segment.vector_sum = (
            vector.copy() if segment.vector_sum is None else segment.vector_sum + vector
        )
        for element in ("person", "time", "location", "topic"):
            for node in found[element]:
                kept = segment.elements[element].setdefault(
                    node.key, Node(element, node.key, node.name, node.granularity)
                )
                kept.mentions.extend(node.mentions)
                if element == "topic":
                    segment.topic_counts[node.key] += 1

    def persons_speaking(self, segment: _Segment) -> list[str]:
        """The speakers a boundary memory is about: ``persons: actors`` keeps those who say at
        least ``actor_share`` of its content words (whoever reports or reacts is not a person of
        the event, papers/hingemem.txt Figure 2); ``speakers`` keeps every speaker."""
        if self.options.persons == "speakers":
            return list(segment.speaker_words)
        total = sum(segment.speaker_words.values())
        return [
            speaker
            for speaker, words in segment.speaker_words.items()
            if total and words / total >= self.options.actor_share
        ]

    def _assemble(
        self, session: Session, segments: Sequence[_Segment]
    ) -> tuple[list[Node], list[Hyperedge]]:
        nodes: list[Node] = []
        edges: list[Hyperedge] = []
        for segment in segments:
            turns = [session.turns[i] for i in segment.turns]
            kept_topics = [
                key for key, _ in segment.topic_counts.most_common(self.options.topics_per_edge)
            ]
            chosen = {e: list(segment.elements[e]) for e in ("person", "time", "location")}
            chosen["topic"] = kept_topics
            for speaker in self.persons_speaking(segment):
                node = segment.speaker_nodes[speaker]
                kept = segment.elements["person"].setdefault(node.key, node)
                if kept is not node:
                    kept.mentions.extend(node.mentions)
                chosen["person"] = list(dict.fromkeys([node.key, *chosen["person"]]))
            if not chosen["time"] and self.options.session_time_node and session.timestamp:
                key = time_key(session.timestamp, "day")
                segment.elements["time"][key] = Node(
                    "time", key, key, "day", [(turns[0].turn_id, session.date_text)]
                )
                chosen["time"] = [key]
            nodes += [segment.elements[e][key] for e, keys in chosen.items() for key in keys]
            edges.append(
                Hyperedge(
                    nodes=chosen,
                    description="\n".join(f"{t.speaker}: {t.text}" for t in turns),
                    reasons=segment.reasons,
                    turn_ids=[t.turn_id for t in turns],
                    timestamp=session.timestamp,
                    position=0,
                    sessions=[session.session_id],
                )
            )
        return nodes, edges
