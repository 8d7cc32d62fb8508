"""HingeMem's prompts (papers/hingemem.txt Appendix A.1), each with the JSON schema its reply
must follow, and the requests made of them.

* Boundary extraction (§3.2.1, Eq. 1-3; "Prompt: Boundary Extraction"): one call per session
  returns its elements and boundary memories (:data:`BOUNDARY_PROMPT`, :data:`BOUNDARY_SCHEMA`),
  read into nodes and hyperedges by :func:`.extract.reply_to_memory`.
* Topic clustering (§3.2.2; "Prompt: Topic Clustering"): one call per conversation picks common
  and rare topics (:data:`TOPIC_PROMPT`, :data:`TOPIC_SCHEMA`).
* Query analysis (§3.3.1; "Prompt: Query Analysis"): a retrieval plan per question
  (:data:`QUERY_PROMPT`, :data:`QUERY_SCHEMA`), read by :func:`.retrieval.plan_from_reply`.

Each is asked, validated and retried once by the shared
:func:`memsys.llm.structured.ask_json_many` with the grammar :func:`constrained`. The readings
taken are in docs/methods/hingemem.md; :mod:`.lite` and the rules of :mod:`.retrieval` are the
classical substitutes. Changing a construction prompt changes the memory's identity (its hash is
part of :meth:`memsys.methods.hingemem.HingeMem.construction_config`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memsys.llm.types import Message
from memsys.types import Session

from .memory import ELEMENTS, GRANULARITIES
from .retrieval import QUERY_TYPES

# From: Appendix A.1, "Prompt: Boundary Extraction" (the boundary extraction prompt of §3.2.1).
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

# From: Appendix A.1, "Prompt: Topic Clustering" (the topic clustering prompt of §3.2.2).
TOPIC_PROMPT = """\
From INPUT_TOPICS, a list of the topics of past events, select two lists, using only topics \
from the input.
- common_topics: common, stable topics that recur across periods.
- rare_topics: rare, uncommon topics that are niche, local or mentioned only sparsely.
Rules: pick 3 to 5 topics for each list; concise noun phrases only, no dates or explanations; \
do not invent topics; no duplicates; keep the original wording and case. Output valid JSON only, \
exactly of this shape: {"common_topics": ["..."], "rare_topics": ["..."]}"""

# From: Appendix A.1, "Prompt: Query Analysis" (the query analysis prompt of §3.3.1).
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

QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query_type": {"enum": [*QUERY_TYPES, "judgment"]},
        "constraints": {
            "type": "object",
            "properties": {
                "person": _STRINGS,
                "location": _STRINGS,
                "topic": _STRINGS,
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


def query_messages(question: str, reference: datetime | None) -> list[dict[str, str]]:
    """The query-analysis request."""
    date = reference.date().isoformat() if reference else "unknown"
    return [
        {"role": "system", "content": QUERY_PROMPT},
        {"role": "user", "content": f"Reference date: {date}\nQuery: {question}\nOutput JSON:"},
    ]
