"""HingeMem's boundary extraction read into memory (papers/hingemem.txt §3.2.1, Eq. 1-3): the
reply to :data:`.prompts.BOUNDARY_PROMPT` (one per session, schema :data:`.prompts.BOUNDARY_SCHEMA`)
as element nodes and boundary hyperedges. The readings taken are in docs/methods/hingemem.md;
:mod:`~.lite` is the classical substitute.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memsys.types import Session

from .lite import resolve_expression
from .memory import (
    GRANULARITIES,
    Hyperedge,
    Node,
    normalize_name,
    parse_time_key,
    time_key,
)

BOUNDARY_REASONS = (
    "change_time",
    "change_place",
    "change_person",
    "topic_shift",
    "explicit_marker",
)
#: Spellings small models (and the paper's §3.2.1, "change location") use for the same reasons.
_REASON_SYNONYMS = {"change_location": "change_place", "change person": "change_person"}


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
