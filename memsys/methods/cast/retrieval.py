"""CAST's retrieval (papers/cast.txt §3.2, §3.3.3, Algorithm 2, §4.3.2): how a question is read,
and how the semantic and episodic top-k lists are combined.

Reading a question: entities for the semantic graph, and the persons, time expressions and
places that filter the episodic index (§3.2), by spaCy (``lite``) or by the LLM (``llm``, with
HippoRAG2's recognition-memory filter over the question's candidate facts). The searches
themselves are :meth:`.hipporag.PassageGraphIndex.search` and :func:`.episodic.search_scenes`.

Fusion (``fusion``): ``rerank`` is the paper's method; ``slot3`` its fusion ablation; ``union``
the reading of §3.2's "combine E_sem(q) and E_epi(q) into a single evidence set"; ``none`` the
semantic half alone (a control the paper does not report, to measure what the episodic half
adds).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from memsys.llm.backbone import Backbone
from memsys.llm.structured import ExtractionReport, ask_json_many
from memsys.nlp import PLACE_LABELS, TIME_LABELS
from memsys.propositions import PropositionExtractor, grounded, phrase_key

from .hipporag import Triple, fact_text
from .prompts import FILTER_PROMPT, FILTER_SCHEMA, QUERY_PROMPT, QUERY_SCHEMA

T = TypeVar("T")

QUERY_MAX_TOKENS = 120
#: HippoRAG2's filter keeps "up to 4" of its candidate facts.
FILTER_KEEP = 4
FILTER_MAX_TOKENS = 200
#: How the semantic and episodic lists are combined (module docstring).
FUSIONS = ("rerank", "slot3", "union", "none")
#: What the reader is handed: ``budget``, the fused top-k then every other message by semantic
#: score, as deep as the harness's context budget allows (equal-budget tables); ``top_k``, the
#: fused top-k only, the paper's depth (k = 5; the paper-setting grid's value).
READER_DEPTHS = ("budget", "top_k")


@dataclass(frozen=True)
class QueryAnalysis:
    """What retrieval reads from a question: entities (v1 entity linking), persons, time
    expressions and places (episodic filters), and where the reading came from."""

    entities: tuple[str, ...]
    persons: tuple[str, ...]
    times: tuple[str, ...]
    places: tuple[str, ...]
    source: str


def analyse_lite(extractor: PropositionExtractor, texts: Sequence[str]) -> list[QueryAnalysis]:
    """spaCy: every argument and noun phrase as an entity; PERSON, DATE/TIME and GPE/LOC/FAC
    entities as persons, times and places."""
    arguments = extractor.arguments(texts)
    persons = extractor.persons(texts)
    entities = extractor.entities(texts)
    return [
        QueryAnalysis(
            tuple(arguments[i]),
            tuple(persons[i]),
            tuple(e for e, label in entities[i] if label in TIME_LABELS),
            tuple(e for e, label in entities[i] if label in PLACE_LABELS),
            "lite",
        )
        for i in range(len(texts))
    ]


def analyse_llm(
    backbone: Backbone,
    texts: Sequence[str],
    lite: Sequence[QueryAnalysis],
    report: ExtractionReport,
) -> list[QueryAnalysis]:
    """The LLM's persons, times and places (each copied from the question; others dropped),
    the lite entities kept for v1 linking; the lite reading where both tries fail."""
    prompts = [[{"role": "user", "content": QUERY_PROMPT.format(question=t)}] for t in texts]

    def accept(index: int, value: Any) -> QueryAnalysis | None:
        text = texts[index]
        picked = {
            key: tuple(dict.fromkeys(" ".join(v.split()) for v in value[key] if grounded(v, text)))
            for key in ("persons", "times", "places")
        }
        return QueryAnalysis(
            lite[index].entities, picked["persons"], picked["times"], picked["places"], "llm"
        )

    read = ask_json_many(
        backbone, prompts, schema=QUERY_SCHEMA, accept=accept,
        max_tokens=QUERY_MAX_TOKENS, report=report,
    )  # fmt: skip
    return [found if found is not None else lite[i] for i, found in enumerate(read)]


def recognition_filter(
    backbone: Backbone,
    questions: Sequence[str],
    candidates: Sequence[Sequence[tuple[Triple, float]]],
    report: ExtractionReport,
) -> list[list[int] | None]:
    """HippoRAG2's recognition memory: per question, the indices (into its candidates) of the
    facts the LLM keeps, at most :data:`FILTER_KEEP`; an empty list when it keeps none; ``None``
    where both tries failed (the caller keeps the unfiltered candidates, counted as fallback).
    A reply naming facts of which none is a candidate is rejected."""
    prompts = [
        [
            {
                "role": "user",
                "content": FILTER_PROMPT.format(
                    question=question,
                    facts="\n".join(f'["{s}", "{p}", "{o}"]' for (s, p, o), _ in facts),
                    keep=FILTER_KEEP,
                ),
            }
        ]
        for question, facts in zip(questions, candidates, strict=True)
    ]

    def accept(index: int, value: Any) -> list[int] | None:
        keys = [_key(triple) for triple, _ in candidates[index]]
        kept = [keys.index(k) for k in dict.fromkeys(_key(t) for t in value["facts"]) if k in keys]
        if value["facts"] and not kept:
            return None
        return kept[:FILTER_KEEP]

    asked = [i for i, facts in enumerate(candidates) if facts]
    answers = ask_json_many(
        backbone, [prompts[i] for i in asked], schema=FILTER_SCHEMA,
        accept=lambda index, value: accept(asked[index], value),
        max_tokens=FILTER_MAX_TOKENS, report=report,
    )  # fmt: skip
    kept: list[list[int] | None] = [[] for _ in candidates]
    for i, answer in zip(asked, answers, strict=True):
        kept[i] = answer
    return kept


def _key(triple: Sequence[str]) -> str:
    return phrase_key(fact_text(tuple(triple)))  # type: ignore[arg-type]


# -- Fusion --------------------------------------------------------------------------------------


def fuse(semantic: Sequence[T], episodic: Collection[T]) -> list[T]:
    """Algorithm 2: semantic items also found episodically first, each block in semantic order;
    no item is added.

    >>> fuse(["a", "b", "c", "d"], {"d", "b", "x"})
    ['b', 'd', 'a', 'c']
    """
    found = set(episodic)
    return [m for m in semantic if m in found] + [m for m in semantic if m not in found]


def insert_at_slot(semantic: Sequence[T], episodic: Sequence[T], k: int, slot: int = 3) -> list[T]:
    """The slot-3 ablation: the best episodic item not yet listed goes to position ``slot``, and
    the list is cut back to ``k`` (both fusions hand the reader the same number of items).

    >>> insert_at_slot(["a", "b", "c", "d", "e"], ["b", "x"], k=5)
    ['a', 'b', 'x', 'c', 'd']
    """
    fused = list(semantic)
    extra = next((m for m in episodic if m not in set(semantic)), None)
    if extra is not None:
        fused.insert(min(slot - 1, len(fused)), extra)
    return fused[:k]


def union(semantic: Sequence[T], episodic: Sequence[T]) -> list[T]:
    """E_sem ∪ E_epi: Algorithm 2's order, then the episodic items not in the semantic list.

    >>> union(["a", "b", "c"], ["c", "x", "a", "y"])
    ['a', 'c', 'b', 'x', 'y']
    """
    fused = fuse(semantic, episodic)
    listed = set(semantic)
    return fused + [m for m in dict.fromkeys(episodic) if m not in listed]


def combine(fusion: str, semantic: Sequence[T], episodic: Sequence[T], k: int) -> list[T]:
    """The fused ranked list for the configured ``fusion`` (one of :data:`FUSIONS`)."""
    if fusion == "rerank":
        return fuse(semantic, episodic)
    if fusion == "slot3":
        return insert_at_slot(semantic, episodic, k)
    if fusion == "union":
        return union(semantic, episodic)
    return list(semantic)
