"""CAST's LLM prompts, each with the JSON schema its reply must follow.

The paper does not print its extraction prompts: it extracts with Llama-3.3-70B "NER and OpenIE
... to extract triples" the HippoRAG2 way (§3.2, §4.1), summarizes scenes (§3.3.2) and reads the
question's "named entities, time expressions, and locations" (§3.2). HippoRAG2's online step adds
the recognition-memory filter over the query's candidate facts. Each prompt below keeps those
instructions and output schemas, in the project's own words.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "type": "array",
    "maxItems": 8,
    "items": {"type": "string", "minLength": 1, "maxLength": 60},
}
_TRIPLE = {
    "type": "array",
    "minItems": 3,
    "maxItems": 3,
    "items": {"type": "string", "maxLength": 80},
}

#: NER + OpenIE + place for one message (HippoRAG's two prompts and CAST's ℓ_i in one call).
# From: §3.2 "Offline Index Construction" (OpenIE triples) and §4.1 "Configurations" (NER and
# OpenIE by the LLM); the paper prints no extraction prompt (Appendix B.1 has only the judge's and
# the answer's).
OPENIE_PROMPT = """Here is one message from a conversation, written by {speaker}:
{text}

List the people named in the message, and the place where what it describes happens if the \
message names one (else an empty string). Then extract the facts it states as (subject, \
predicate, object) triples, as open information extraction does: subjects and objects are short \
noun phrases from the message (named entities wherever possible), predicates short verb phrases. \
Write {speaker} for "I" or "me". Reply with JSON only, in this form:
{{"persons": ["Gina"], "location": "dance studio", "triples": [["Gina", "won", "first place"]]}}"""

OPENIE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "persons": _NAMES,
        "location": {"type": "string", "maxLength": 60},
        "triples": {"type": "array", "maxItems": 10, "items": _TRIPLE},
    },
    "required": ["persons", "location", "triples"],
    "additionalProperties": False,
}

#: The scene summary φ(s) of §3.1 / Algorithm 1 line 18.
# From: §3.1 "Scene", §3.3.2 and Appendix A, Algorithm 1 line 18 (SUMMARIZE, no prompt printed).
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

#: §3.2: the question's named entities, time expressions and locations (episodic filters).
# From: §3.2 "Online Query Processing" (no prompt printed).
QUERY_PROMPT = """Here is a question about a past conversation:
{question}

List the people the question names, its time expressions (dates, months, years, "last week", \
...) and the places it names, each copied from the question. Reply with JSON only, in this form:
{{"persons": ["Gina"], "times": ["May 2023"], "places": ["Paris"]}}"""

QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"persons": _NAMES, "times": _NAMES, "places": _NAMES},
    "required": ["persons", "times", "places"],
    "additionalProperties": False,
}

#: HippoRAG2's recognition memory: keep the candidate facts that help answer the question.
# From: not CAST's paper but HippoRAG2's online step (Gutiérrez et al., 2025), which CAST's
# semantic retrieval follows (§3.2 "Online Query Processing").
FILTER_PROMPT = """You filter facts for a question-answering system. Here is a question and \
candidate facts retrieved for it, as (subject, predicate, object) triples:

Question: {question}
Candidate facts:
{facts}

Select at most {keep} facts from the candidates that are relevant to the question and would help \
answer it, possibly through several steps of reasoning. Copy each selected fact exactly as \
written above. If none is relevant, return an empty list. Reply with JSON only, in this form:
{{"facts": [["subject", "predicate", "object"]]}}"""

FILTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "maxItems": 8, "items": _TRIPLE}},
    "required": ["facts"],
    "additionalProperties": False,
}
