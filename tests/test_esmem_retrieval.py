"""ES-Mem's retrieval and boundary texts by hand: coarse-to-fine scores on hand-set cosines
(anchors, windows, ties, without summaries) and boundaries fitted to the embedder's window
(MiniLM's word pieces included)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np
import pytest
from fakes.embed import WindowedHashingModel, WordTokenizer
from fakes.esmem import WordCounter

from benchmarks.answering.context import render_context
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.methods.esmem import (
    EmbedderWindow,
    ESMem,
    ESMemMemory,
    Event,
    fit_boundary,
    rank_events,
)
from memsys.types import Question

# --- hand-computed retrieval ----------------------------------------------------------------------

#: cos(query, b_i) and cos(query, s_i) of eight events. With k = 2 the anchors are events 1 (0.9)
#: and 4 (0.8); w = 2 activates 0..3 and 2..6, so event 7 (best summary, 0.95) is no candidate.
#: S_ctx: 0, 1 -> 0.9; 2, 3 -> max(0.9, 0.8) = 0.9; 4, 5, 6 -> 0.8. Score = 0.7·sum + 0.3·S_ctx:
#: 0: .35+.27=.62  1: .07+.27=.34  2: .42+.27=.69  3: .63+.27=.90
#: 4: .14+.24=.38  5: .28+.24=.52  6: .21+.24=.45
BOUNDARY_COS = [0.2, 0.9, 0.1, 0.3, 0.8, 0.0, 0.1, 0.5]
SUMMARY_COS = [0.5, 0.1, 0.6, 0.9, 0.2, 0.4, 0.3, 0.95]
HAND_OPTIONS = {"anchor_k": 2, "window": 2, "alpha": 0.7}


def test_rank_events_by_hand() -> None:
    ranked = rank_events(
        np.array(BOUNDARY_COS), np.array(SUMMARY_COS), **HAND_OPTIONS, top_events=4
    )
    assert [j for j, _ in ranked] == [3, 2, 0, 5]
    assert [score for _, score in ranked] == pytest.approx([0.90, 0.69, 0.62, 0.52])


def test_rank_events_window_edges_and_all_candidates() -> None:
    # w = 0: the candidates are the anchors themselves (events 1 and 4)
    boundary, summary = np.array(BOUNDARY_COS), np.array(SUMMARY_COS)
    ranked = rank_events(boundary, summary, anchor_k=2, window=0, alpha=0.7, top_events=5)
    assert ranked == [(4, pytest.approx(0.38)), (1, pytest.approx(0.34))]
    # K larger than the candidate set returns the whole set
    assert len(rank_events(np.array([0.3]), np.array([0.2]), **HAND_OPTIONS, top_events=9)) == 1


def test_without_summaries_ties_go_to_the_event_nearest_its_anchor() -> None:
    # alpha = 0: every event of the first window scores 0.9; nearest to anchor 1 first, then time
    boundary, summary = np.array(BOUNDARY_COS), np.array(SUMMARY_COS)
    ranked = rank_events(boundary, summary, anchor_k=2, window=2, alpha=0.0, top_events=5)
    assert [j for j, _ in ranked] == [1, 0, 2, 3, 4]
    assert [score for _, score in ranked] == pytest.approx([0.9, 0.9, 0.9, 0.9, 0.8])


class TableModel:
    """Vectors looked up by text: exact, hand-chosen cosines for the end-to-end test."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        return np.stack([self.table[text] for text in texts]).astype(np.float32)

    def get_sentence_embedding_dimension(self) -> int:
        return 3


def hand_memory() -> tuple[ESMemMemory, Services, Question]:
    """Eight one-turn events whose boundary/summary vectors have the cosines above with the
    query (1, 0, 0): boundary (c, √(1-c²), 0), summary (s, 0, √(1-s²))."""
    question = Question("q", "hand", "the query", "", "single_hop")
    table = {question.question: np.array([1.0, 0.0, 0.0])}
    events = []
    for i, (b, s) in enumerate(zip(BOUNDARY_COS, SUMMARY_COS, strict=True)):
        event = Event(
            session_id=f"session_{i // 4 + 1}",
            timestamp=datetime(2023, 5, 1 + i // 4),
            position=i,
            turn_ids=(f"D{i // 4 + 1}:{i % 4 + 1}",),
            lines=(f"Ann: line {i}",),
            topics=(f"topic {i}",),
            keywords=(f"word {i}",),
            summary=f"topic {i}: word {i}",
            boundary=f"boundary {i}",
            boundary_source="template",
        )
        table[event.boundary] = np.array([b, np.sqrt(1 - b * b), 0.0])
        table[event.summary] = np.array([s, 0.0, np.sqrt(1 - s * s)])
        events.append(event)
    embedder = Embedder(EmbedderConfig(model="table"), EmbeddingCache(), model=TableModel(table))
    return ESMemMemory(events, {}), Services(embedder, WordCounter()), question  # type: ignore[arg-type]


def test_retrieve_on_a_hand_built_memory() -> None:
    memory, services, question = hand_memory()
    system = ESMem(services, retrieval={**HAND_OPTIONS, "top_events": 3})
    retrieval = system.retrieve(memory, question)
    assert [item.text for item in retrieval.items] == ["Ann: line 3", "Ann: line 2", "Ann: line 0"]
    assert [item.score for item in retrieval.items] == pytest.approx([0.90, 0.69, 0.62])
    assert retrieval.items[0].turn_ids == ("D1:4",) and retrieval.items[0].kind == "event"
    assert retrieval.items[0].timestamp == datetime(2023, 5, 1)
    # the reader sees the top K in time order
    shown = render_context(retrieval.items, WordCounter(), budget=1000).items
    assert [item.position for item in shown] == [0, 2, 3]

    summary_only = ESMem(
        services, retrieval={**HAND_OPTIONS, "top_events": 1, "context": "boundary_summary"}
    )
    (item,) = summary_only.retrieve(memory, question).items
    assert item.text == "Boundary: boundary 3\nSummary: topic 3: word 3"
    assert item.kind == "event_summary" and item.turn_ids == ("D1:4",)

    # w/o bnd: flat retrieval by summary over the whole memory, whatever k and w say. (Summary
    # anchors 7 and 3 would activate only 1..7 with w = 2, and leave out event 0.)
    flat = ESMem(services, retrieval={**HAND_OPTIONS, "anchors": "none", "alpha": 1.0})
    assert [item.position for item in flat.retrieve(memory, question).items] == [7, 3, 2, 0, 5]
    assert [item.score for item in flat.retrieve(memory, question).items] == pytest.approx(
        [0.95, 0.9, 0.6, 0.5, 0.4]
    )


def test_without_raw_the_reader_sees_no_turn_by_hand() -> None:
    """w/o raw: a template boundary loses its ``Context:`` turns, an LLM description is kept
    whole, and a lite summary that is the event's own turns (no content word) is not shown."""
    memory, services, _ = hand_memory()
    system = ESMem(services, retrieval={**HAND_OPTIONS, "context": "boundary_summary"})
    event = memory.events[0]
    template = replace(
        event,
        boundary="pets ended. Transitioned to guitar. Context: Ann: my dog / Ann: line 0",
    )
    assert system._item(template, 0.5).text == (
        "Boundary: pets ended. Transitioned to guitar.\nSummary: topic 0: word 0"
    )
    described = replace(
        event, boundary="Talk turns from pets to music. Context: none.", boundary_source="llm"
    )
    assert system._item(described, 0.5).text == (
        "Boundary: Talk turns from pets to music. Context: none.\nSummary: topic 0: word 0"
    )
    no_content_word = replace(
        event,
        topics=(),
        keywords=(),
        summary="Ann: line 0",  # ESMem._lite_summaries' fallback: the event's own turns
        boundary="pets ended. Transitioned to . Context: Ann: line 0",
    )
    assert system._item(no_content_word, 0.5).text == "Boundary: pets ended. Transitioned to ."
    opening = replace(no_content_word, boundary="Context: Ann: line 0", boundary_source="opening")
    assert system._item(opening, 0.5).text == ""
    # the full method's items and boundaries are untouched
    raw = ESMem(services, retrieval=HAND_OPTIONS)._item(template, 0.5)
    assert raw.text == "Ann: line 0" and raw.kind == "event"


def test_without_summaries_the_score_is_the_context_score() -> None:
    memory, services, question = hand_memory()
    no_summary = [replace(event, topics=(), keywords=(), summary="") for event in memory.events]
    system = ESMem(
        services,
        construction={"summaries": False},
        retrieval={**HAND_OPTIONS, "alpha": 0.0, "top_events": 5},
    )
    retrieval = system.retrieve(ESMemMemory(no_summary, {}), question)
    # S_ctx alone: window of anchor 1 (0.9) outwards from it, then anchor 4's (0.8)
    assert [item.position for item in retrieval.items] == [1, 0, 2, 3, 4]
    assert [item.score for item in retrieval.items] == pytest.approx([0.9] * 4 + [0.8])


# --- boundaries within the embedder's window ----------------------------------------------------


def test_fit_boundary_keeps_the_current_opening_first_by_hand() -> None:
    head = "pets ended. Transitioned to cooking."  # 5 words
    previous = ["A: p1 p2", "B: p3 p4"]
    current = ["A: c1 c2 c3", "B: c4"]
    # head 5 + "Context:" 1 + current 4 + 1 + 2 = 13; then "B: p3 p4 /" 4 = 17; "A: p1 p2 /" no
    window = EmbedderWindow(WordTokenizer(), limit=17)
    fitted = fit_boundary(head, previous, current, window)
    assert fitted == f"{head} Context: B: p3 p4 / A: c1 c2 c3 / B: c4"
    assert window.count(fitted) == 17
    # one turn too long for the window: its beginning, cut to fit, and nothing else
    long_turn = "A: " + " ".join(f"w{i}" for i in range(10))
    small = EmbedderWindow(WordTokenizer(), limit=6)
    assert fit_boundary(head, previous, [long_turn], small) == "Context: A: w0 w1 w2 w3"
    # the first event: no previous turns, no head
    assert fit_boundary("", (), current, window) == "Context: A: c1 c2 c3 / B: c4"


def test_embedder_window_counts_minilm_word_pieces() -> None:
    from transformers import AutoTokenizer

    from memsys.embed import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("all-MiniLM-L6-v2"))
    window = EmbedderWindow(tokenizer, limit=24)
    turn = "Caroline: I went to the LGBTQ support group yesterday and it was so powerful!"
    assert window.count(turn) == len(tokenizer(turn, add_special_tokens=False)["input_ids"])
    assert window.cut(turn, 5) == "Caroline: I went to"  # spelling kept, cut at a piece
    fitted = fit_boundary("support ended. Transitioned to painting.", [turn], [turn, turn], window)
    # the opening turn whole (19 pieces), the head cut to the rest, no other turn
    assert window.count(fitted) == 24 and fitted.endswith(f"Context: {turn}")
    assert fitted.startswith("support ended.") and fitted.count("Caroline") == 1
    model = WindowedHashingModel(max_seq_length=40)
    embedder = Embedder(EmbedderConfig(model="hashing-test"), EmbeddingCache(), model=model)
    assert EmbedderWindow.of(embedder).limit == 38  # max_seq_length less two special tokens
