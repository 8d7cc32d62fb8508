"""HingeMem's retrieval plans (papers/hingemem.txt §3.3.1, query-analysis prompt of Appendix A.1):
the query type that sets the depth, the element constraints that route, and their priority.

:data:`QUERY_PROMPT` asks the LLM for a :class:`QueryPlan`; :func:`analyse_rules` is the lite
substitute (spaCy entities, resolved dates, noun-chunk keywords, question-word cues).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsys.nlp import PERSON_LABELS, PLACE_LABELS, TIME_LABELS

from .graph import ELEMENTS, GRANULARITIES, normalize_name, parse_time_key
from .lite import resolve_expression, topic_phrases
from .stop import QUERY_TYPES

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
