"""HingeMem's LLM steps of construction: boundary extraction (the "cortex"), topic clustering.

Part of :mod:`memsys.methods.hingemem` (papers/hingemem.txt §3.2.1, Eq. 1-3, Appendix A.1):
one LLM call per session returns its elements and boundary memories (:data:`BOUNDARY_PROMPT`,
:data:`BOUNDARY_SCHEMA`); one call per conversation picks common and rare topics
(:data:`TOPIC_PROMPT`, :data:`TOPIC_SCHEMA`), asked, validated and retried once by the shared
:func:`memsys.llm.structured.ask_json_many` (as is the query analysis) with the grammar
:func:`constrained`. The readings taken are in docs/methods/hingemem.md; :mod:`~.lite` is the
classical substitute.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memsys.llm.types import Message
from memsys.types import Session

from .graph import (
    GRANULARITIES,
    Hyperedge,
    Node,
    normalize_name,
    parse_time_key,
    time_key,
)
from .lite import resolve_expression

BOUNDARY_REASONS = (
    "change_time",
    "change_place",
    "change_person",
    "topic_shift",
    "explicit_marker",
)
#: Spellings small models (and the paper's §3.2.1, "change location") use for the same reasons.
_REASON_SYNONYMS = {"change_location": "change_place", "change person": "change_person"}

BOUNDARY_PROMPT = """\
You segment one conversation session into event memories and extract their key elements. The \
input is the session's date and its numbered turns with speakers. Reply with valid JSON only.

# Tasks
1. Find the event boundaries. Start a new event when the person, time, location or topic \
clearly changes, when a new person, time, location or topic appears, or when an explicit \
transition phrase is used ("by the way", "anyway"); otherwise the turn stays in the current event.
2. List the session's elements:
- persons: the persons the events are about (who does something, or whom something is said \
about), by canonical name, with role tags (speaker, friend, family member, pet, ...) and the \
turns that mention them; a speaker who only reacts, asks or reports about others is not a \
person of that event;
- times: every time reference as an ISO 8601 timestamp resolved against the session date (never \
null: estimate relative phrases such as "yesterday" or "last week" from the session date), its \
granularity (second, minute, hour, day, week, month, year or approx) and the turns that mention it;
- locations: the places mentioned, with their turns;
- topics: short noun-phrase labels of what is discussed, with their turns.
3. Write one boundary memory per event: the persons, times, locations and topics it involves \
(names exactly as listed in step 2), a description that keeps the concrete facts (who did what, \
when, where), the reasons for its boundary (change_time, change_place, change_person, \
topic_shift, explicit_marker) and its first and last turn numbers.

# Output schema
{"persons": [{"canonical_name": "<string>", "role_tags": ["<string>"], "mentions": [{"turn": \
<int>, "mention": "<string>"}]}],
 "times": [{"timestamp": "<ISO 8601>", "granularity": "<granularity>", "mentions": [{"turn": \
<int>, "mention": "<string>"}]}],
 "locations": [{"name": "<string>", "mentions": [{"turn": <int>, "mention": "<string>"}]}],
 "topics": [{"label": "<string>", "mentions": [{"turn": <int>, "mention": "<string>"}]}],
 "boundary_memories": [{"person_list": ["<canonical name>"], "time_list": ["<timestamp>"], \
"location_list": ["<name>"], "topic_list": ["<label>"], "description": "<string>", "boundary": \
{"reasons": ["<reason>"]}, "start_turn": <int>, "end_turn": <int>}]}"""

TOPIC_PROMPT = """\
From INPUT_TOPICS, a list of the topics of past events, select two lists, using only topics \
from the input.
- common_topics: common, stable topics that recur across periods.
- rare_topics: rare, uncommon topics that are niche, local or mentioned only sparsely.
Rules: pick 3 to 5 topics for each list; concise noun phrases only, no dates or explanations; \
do not invent topics; no duplicates; keep the original wording and case. Output valid JSON only, \
exactly of this shape: {"common_topics": ["..."], "rare_topics": ["..."]}"""

_MENTIONS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"turn": {"type": "integer"}, "mention": {"type": "string"}},
        "required": ["turn", "mention"],
    },
}
_STRINGS = {"type": "array", "items": {"type": "string"}}


def _named(key: str, **extra: Any) -> dict[str, Any]:
    properties = {key: {"type": "string"}, **extra, "mentions": _MENTIONS}
    return {
        "type": "array",
        "items": {"type": "object", "properties": properties, "required": [key]},
    }


BOUNDARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "persons": _named("canonical_name", role_tags=_STRINGS),
        "times": _named("timestamp", granularity={"enum": list(GRANULARITIES)}),
        "locations": _named("name"),
        "topics": _named("label"),
        "boundary_memories": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "person_list": _STRINGS,
                    "time_list": _STRINGS,
                    "location_list": _STRINGS,
                    "topic_list": _STRINGS,
                    "description": {"type": "string"},
                    "boundary": {
                        "type": "object",
                        "properties": {"reasons": {"type": "array", "items": {"type": "string"}}},
                    },
                    "start_turn": {"type": "integer"},
                    "end_turn": {"type": "integer"},
                },
                "required": ["description", "start_turn", "end_turn"],
            },
        },
    },
    "required": ["persons", "times", "locations", "topics", "boundary_memories"],
}

TOPIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"common_topics": _STRINGS, "rare_topics": _STRINGS},
    "required": ["common_topics", "rare_topics"],
}


#: The grammar's shape of a timestamp: ISO 8601 date, week or date-time.
ISO_PATTERN = r"^[0-9]{4}(-W[0-9]{2}|-[0-9]{2}(-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?)?)?)?$"


def constrained(schema: Mapping[str, Any], max_items: int = 8) -> dict[str, Any]:
    """The grammar sent to the provider for ``schema``: every object closed with all properties
    required, arrays at most ``max_items`` long, ``timestamp`` strings shaped as ISO 8601. Small
    models then emit the full shape, cannot loop on an array until the token limit, and write
    readable dates; replies are still validated against the lenient ``schema``.
    """
    result = dict(schema)
    if result.get("type") == "object" and "properties" in result:
        properties = {
            key: constrained(value, max_items) for key, value in result["properties"].items()
        }
        if properties.get("timestamp", {}).get("type") == "string":
            properties["timestamp"] = {"type": "string", "pattern": ISO_PATTERN}
        result |= {"properties": properties, "required": list(properties)}
        result["additionalProperties"] = False
    if "items" in result:
        result["items"] = constrained(result["items"], max_items)
        result["maxItems"] = min(result.get("maxItems", max_items), max_items)
    return result


def session_transcript(session: Session) -> str:
    """The session as the prompt shows it: its date, then ``[turn number] speaker: text``."""
    when = session.timestamp.isoformat(timespec="minutes") if session.timestamp else "unknown"
    lines = [f"Session date: {session.date_text} ({when})"]
    lines += [f"[{i}] {turn.speaker}: {turn.text}" for i, turn in enumerate(session.turns, 1)]
    return "\n".join(lines)


def boundary_messages(session: Session) -> list[Message]:
    """The boundary-extraction request of one session."""
    return [
        {"role": "system", "content": BOUNDARY_PROMPT},
        {"role": "user", "content": session_transcript(session)},
    ]


def topic_messages(topics: Sequence[str]) -> list[Message]:
    """The topic-clustering request of one conversation."""
    return [
        {"role": "system", "content": TOPIC_PROMPT},
        {"role": "user", "content": f"INPUT_TOPICS: {json.dumps(list(topics))}"},
    ]


# --- LLM replies into nodes and hyperedges -------------------------------------------------------


def _mentions(raw: Any, session: Session) -> list[tuple[str | None, str]]:
    result = []
    for mention in raw or []:
        turn = mention.get("turn") if isinstance(mention, dict) else None
        inside = isinstance(turn, int) and 1 <= turn <= len(session.turns)
        turn_id = session.turns[turn - 1].turn_id if inside else None
        result.append(
            (turn_id, str(mention.get("mention", "")) if isinstance(mention, dict) else "")
        )
    return result


def _time(text: str, granularity: Any, anchor: datetime) -> tuple[str, str] | None:
    parsed = parse_time_key(text) or resolve_expression(text, anchor)
    if parsed is None:
        return None
    timestamp, implied = parsed
    chosen = granularity if granularity in GRANULARITIES else implied
    return time_key(timestamp, chosen), chosen


def reply_to_memory(
    value: Mapping[str, Any], session: Session, session_time_node: bool = True
) -> tuple[list[Node], list[Hyperedge], int]:
    """Nodes and hyperedges from a schema-valid boundary-extraction reply, and how many time
    entries could not be read as dates (dropped).

    Start turns are read as the boundaries: each memory covers the turns from its start to the
    turn before the next memory's start (the first from turn 1, the last to the session's end),
    so every turn of the session belongs to a memory. Names in a memory's lists that the element
    lists do not declare are added as nodes.
    """
    anchor = session.timestamp or datetime(1970, 1, 1)
    nodes: dict[str, Node] = {}
    dropped = 0
    aliases: dict[tuple[str, str], str] = {}

    def declare(element: str, name: str, granularity: str | None = None, mentions=()) -> str | None:
        nonlocal dropped
        if element == "time":
            resolved = _time(name, granularity, anchor)
            if resolved is None:
                dropped += 1
                return None
            key, granularity = resolved
            label = key
        else:
            key, label = normalize_name(element, name), name.strip()
        if not key:
            return None
        node = nodes.setdefault(f"{element}:{key}", Node(element, key, label, granularity))
        node.mentions.extend(mentions)
        aliases[(element, name)] = key
        return key

    for raw, element, field_name in (
        (value.get("persons"), "person", "canonical_name"),
        (value.get("times"), "time", "timestamp"),
        (value.get("locations"), "location", "name"),
        (value.get("topics"), "topic", "label"),
    ):
        for item in raw or []:
            mentions = _mentions(item.get("mentions"), session) or [(None, str(item[field_name]))]
            key = declare(element, str(item[field_name]), item.get("granularity"), mentions)
            if key and element == "person":
                node = nodes[f"person:{key}"]
                node.tags = list(
                    dict.fromkeys([*node.tags, *map(str, item.get("role_tags") or [])])
                )

    memories = list(value["boundary_memories"])
    count = len(session.turns)
    starts = sorted({min(max(int(m["start_turn"]), 1), count) for m in memories})
    starts[0] = 1
    edges = []
    for memory in memories:
        start = max(s for s in starts if s <= max(int(memory["start_turn"]), 1))
        following = [s for s in starts if s > start]
        end = following[0] - 1 if following else count
        turns = session.turns[start - 1 : end]
        chosen: dict[str, list[str]] = {}
        for element, list_name in (
            ("person", "person_list"),
            ("time", "time_list"),
            ("location", "location_list"),
            ("topic", "topic_list"),
        ):
            keys = []
            for name in map(str, memory.get(list_name) or []):
                key = aliases.get((element, name)) or declare(element, name, None, [(None, name)])
                if key:
                    keys.append(key)
            chosen[element] = list(dict.fromkeys(keys))
        if not chosen["time"] and session_time_node and session.timestamp:
            key = declare(
                "time", time_key(session.timestamp, "day"), "day", [(None, session.date_text)]
            )
            chosen["time"] = [key] if key else []
        raw_reasons = (memory.get("boundary") or {}).get("reasons") or []
        reasons = [_REASON_SYNONYMS.get(r, r) for r in map(str, raw_reasons)]
        reasons = [r for r in dict.fromkeys(reasons) if r in BOUNDARY_REASONS]
        description = str(memory["description"]).strip() or "\n".join(
            f"{t.speaker}: {t.text}" for t in turns
        )
        edges.append(
            Hyperedge(
                chosen,
                description,
                reasons,
                [t.turn_id for t in turns],
                session.timestamp,
                0,
                [session.session_id],
            )
        )
    return list(nodes.values()), edges, dropped
