"""ES-Mem: hand-computed coarse-to-fine scores, lite summaries and window-fitted boundaries, lite
round trip, LLM boundaries with fallbacks, sessions segmented together, and every ES-Mem config
(the method and its ablations) instantiated, run and shown to change the reader's context."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes.dialogues import build_conversation
from fakes.embed import WindowedHashingModel, WordTokenizer, windowed_embedder
from fakes.llm import RuleProvider, assert_concurrency_changes_nothing, make_backbone
from fakes.segment import user_text

from benchmarks.answering.context import render_context
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm.backbone import Backbone
from memsys.llm.errors import ProviderError
from memsys.llm.types import LLMRequest
from memsys.methods.esmem import (
    BOUNDARY_SYSTEM_PROMPT,
    EmbedderWindow,
    ESMem,
    ESMemMemory,
    Event,
    clean_boundary,
    distinctive_words,
    fit_boundary,
    rank_events,
)
from memsys.segment.esmem import INTENT_SCHEMA, TOPIC_SCHEMA, ESMemSegmenter
from memsys.types import Conversation, Question

CONF = Path(__file__).resolve().parents[1] / "conf"


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


class WordCounter:
    def count(self, text: str) -> int:
        return len(text.split())


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
        services, retrieval={**HAND_OPTIONS, "top_events": 1, "context": "summary"}
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


# --- construction ---------------------------------------------------------------------------------

PETS = [
    ("Alice", "Do you have any pets at home?"),
    ("Bob", "Yes, two cats and a dog. The cats sleep all day."),
    ("Alice", "Cats are lovely pets. Does your dog chase the cats?"),
    ("Bob", "Our dog is old now, but the cats still play with him."),
]
COOKING = [
    ("Alice", "What did you cook for dinner tonight?"),
    ("Bob", "I cooked pasta with tomato sauce and garlic."),
    ("Alice", "Pasta with garlic sauce is my favourite dinner to cook."),
    ("Bob", "Cook the sauce longer next time, the tomato gets sweeter."),
]
HIKING = [
    ("Bob", "I went hiking in the mountains last weekend."),
    ("Alice", "Which trail did you hike? Was the mountain steep?"),
    ("Bob", "The ridge trail, very steep, but the mountain views were great."),
    ("Alice", "I want to hike that ridge trail too."),
]
GUITAR = [
    ("Alice", "By the way, I started guitar lessons."),
    ("Bob", "Cool! Acoustic or electric guitar?"),
    ("Alice", "Acoustic. My guitar teacher makes me practise chords daily."),
    ("Bob", "Chords hurt at first, keep practising the guitar."),
]
TOPIC_WORDS = {
    "pets": ("pets", "cats", "dog"),
    "cooking": ("cook", "pasta", "sauce", "dinner"),
    "hiking": ("hik", "trail", "mountain"),
    "guitar": ("guitar", "chords"),
}


def tiny_conversation() -> Conversation:
    questions = [
        Question("q1", "tiny", "Which trail did Bob hike?", "the ridge trail", "single_hop"),
        Question("q2", "tiny", "What did Bob cook for dinner?", "pasta", "single_hop"),
    ]
    return build_conversation(
        [(datetime(2023, 5, 8, 13, 0), PETS + COOKING), (datetime(2023, 6, 1), HIKING + GUITAR)],
        ("Alice", "Bob"),
        questions,
    )


WORK = [
    ("Alice", "My new job at the bank starts on Monday."),
    ("Bob", "Congratulations! What will you do at the bank?"),
    ("Alice", "I will review loans for small businesses."),
    ("Bob", "Reviewing loans sounds like a serious job."),
]
MOVIES = [
    ("Bob", "Have you seen the new space movie?"),
    ("Alice", "Yes, the space battles in that movie were amazing."),
    ("Bob", "The movie soundtrack was my favourite part."),
    ("Alice", "I bought the soundtrack after the movie."),
]
GARDEN = [
    ("Alice", "My tomatoes are finally growing in the garden."),
    ("Bob", "Do you water the garden every morning?"),
    ("Alice", "Every morning, and I added compost to the soil."),
    ("Bob", "Compost makes the soil rich, your garden will thrive."),
]
TRAVEL = [
    ("Bob", "We booked a trip to Lisbon for August."),
    ("Alice", "Lisbon! Will you take the tram up the hills?"),
    ("Bob", "Yes, the old tram and a boat trip on the river."),
    ("Alice", "Send me photos of the river and the tram."),
]


def four_session_conversation() -> Conversation:
    """Eight topics in four sessions (about 11 lite events) and a question on each topic: a
    memory larger than K, so that what an ablation removes shows in the reader's context."""
    questions = [
        Question(f"q{i}", "four", text, "", "single_hop")
        for i, text in enumerate(
            [
                "Which trail did Bob hike?",
                "What did Bob cook for dinner?",
                "Does Bob have a dog or cats?",
                "What kind of guitar does Alice play?",
                "Where does Alice work?",
                "Which movie did they see?",
                "What grows in Alice's garden?",
                "Where is Bob travelling in August?",
            ]
        )
    ]
    sessions = [
        (datetime(2023, 5, 8), PETS + COOKING),
        (datetime(2023, 6, 1), HIKING + GUITAR),
        (datetime(2023, 7, 1), WORK + MOVIES),
        (datetime(2023, 7, 20), GARDEN + TRAVEL),
    ]
    return build_conversation(sessions, ("Alice", "Bob"), questions, "four")


def topic_of(text: str) -> str:
    lowered = text.lower()
    return next(topic for topic, words in TOPIC_WORDS.items() if any(w in lowered for w in words))


def scripted(request: LLMRequest) -> str:
    """Segmenter: topic by keyword, a shift where the topic changes. Boundaries: a good reply
    into cooking, a failed request into hiking, garbage into guitar."""
    text = user_text(request)
    if request.params.json_schema == TOPIC_SCHEMA:
        topic = topic_of(text.split("[Current turn]\n", 1)[1])
        return json.dumps({"topic": topic, "keywords": [topic, "home"]})
    if request.params.json_schema == INTENT_SCHEMA:
        left, right = text.split("[FOLLOWING CONTEXT (right of the cut)]\n", 1)
        last_left = [line for line in left.splitlines() if line.strip()][-1]
        if topic_of(last_left) != topic_of(right.splitlines()[0]):
            labels = [{"name": "Topic_Shift", "prob": 0.9}, {"name": "Direct_Resp", "prob": 0.1}]
        else:
            labels = [
                {"name": "Detail_Elaborate", "prob": 0.8},
                {"name": "Topic_Shift", "prob": 0.1},
            ]
        return json.dumps({"labels": labels})
    assert request.messages[0]["content"] == BOUNDARY_SYSTEM_PROMPT
    current = text.split("Event B", 1)[1]
    if "hiking" in current:
        raise ProviderError("bad request")
    if "guitar" in current:
        return '{"boundary": "a JSON reply where text was asked for"}'
    return 'Boundary description: "Pets are left behind as the talk turns to cooking dinner."'


def test_lite_construct_dump_load_retrieve() -> None:
    embedder = windowed_embedder()
    system = ESMem(Services(embedder, WordCounter()))  # type: ignore[arg-type]
    conversation = tiny_conversation()
    memory = system.construct(conversation)
    events = memory.events
    # every turn once, in time order, each event inside one session
    assert [t for e in events for t in e.turn_ids] == [t.turn_id for t in conversation.turns]
    assert all(len({t.split(":")[0] for t in e.turn_ids}) == 1 for e in events)
    assert [e.position for e in events] == sorted(e.position for e in events)
    assert events[0].boundary.startswith("The conversation opens with ")
    assert events[0].boundary_source == "opening"
    assert {e.boundary_source for e in events[1:]} == {"template"}
    second = events[1]
    assert second.boundary.startswith(
        f"{', '.join(events[0].keywords)} ended. Transitioned to {', '.join(second.keywords)}."
    )
    assert events[0].lines[-1] in second.boundary and second.lines[0] in second.boundary
    # lite s_i: the event's distinctive words over the conversation's events
    texts = [[line.split(": ", 1)[1] for line in event.lines] for event in events]
    assert [e.keywords for e in events] == distinctive_words(texts, limit=5)
    assert second.summary == ", ".join(second.keywords) and second.topics == ()
    report = memory.report
    assert report["events"] == len(events) and report["sessions"] == 2
    assert report["segmentation"]["llm_calls"] == 0 and report["boundaries"]["llm_calls"] == 0
    assert report["boundaries"]["sources"] == {"opening": 1, "template": len(events) - 1}

    payload = json.loads(json.dumps(system.dump_memory(memory)))
    loaded = system.load_memory(payload)
    assert loaded.events == events and loaded.report == report
    question = conversation.questions[0]
    encoded = embedder.texts_encoded
    system.prepare_queries(conversation.questions)
    first = system.retrieve(memory, question)
    again = system.retrieve(loaded, question)
    assert embedder.texts_encoded == encoded + 2  # the two questions; memory texts were cached
    assert first == again and 0 < len(first.items) <= 5
    hiking = next(e for e in events if "D2:2" in e.turn_ids)  # "Which trail did you hike?"
    top = first.items[0]
    assert top.turn_ids == hiking.turn_ids and top.text == "\n".join(hiking.lines)
    assert top.timestamp == datetime(2023, 6, 1) and top.kind == "event"


def test_lite_boundaries_fit_the_window_and_keep_the_current_event() -> None:
    # a 30-word window: four raw turns of 7-10 words each never fit whole
    embedder = windowed_embedder(max_seq_length=32)
    system = ESMem(Services(embedder, WordCounter()))  # type: ignore[arg-type]
    events = system.construct(four_session_conversation()).events
    window = EmbedderWindow.of(embedder)
    assert window.limit == 30
    assert all(window.count(event.boundary) <= 30 for event in events)
    for previous, current in itertools.pairwise(events):
        head = f"{previous.summary} ended. Transitioned to {current.summary}."
        assert current.boundary.startswith(head)
        assert current.lines[0] in current.boundary  # whole: every turn fits on its own here
        kept_previous = [line for line in previous.lines if line in current.boundary]
        assert kept_previous == list(previous.lines[len(previous.lines) - len(kept_previous) :])


def test_sessions_are_segmented_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each session's segmentation runs alongside the others', the boundary descriptions go
    out in one batch; the requests are those of one session at a time."""
    one_at_a_time = RuleProvider(scripted)
    backbone = make_backbone(one_at_a_time, concurrency=1)  # type: ignore[arg-type]
    for session in tiny_conversation().sessions:
        turns = session.turns
        ESMemSegmenter(embedder=windowed_embedder(), backbone=backbone).segment(
            [t.text for t in turns], [t.speaker for t in turns]
        )
    together = RuleProvider(scripted, delay_s=0.01)
    backbone = make_backbone(together, concurrency=8)  # type: ignore[arg-type]
    batches: list[int] = []
    complete_many = backbone.complete_many

    def counted(requests: Sequence[LLMRequest], **options: Any) -> Any:
        batches.append(len(requests))
        return complete_many(requests, **options)

    monkeypatch.setattr(backbone, "complete_many", counted)
    system = ESMem(Services(windowed_embedder(), WordCounter(), backbone), extraction="llm")  # type: ignore[arg-type]
    memory = system.construct(tiny_conversation())
    # segmentation on a request flow, both sessions' chains at once; 3 boundaries in one batch
    assert together.peak_in_flight >= 2 and batches == [3]

    def key(request: LLMRequest) -> str:
        return json.dumps(request.messages)

    segmentation = [r for r in together.requests if r.params.json_schema is not None]
    assert sorted(map(key, segmentation)) == sorted(map(key, one_at_a_time.requests))
    assert memory.report["segmentation"]["llm_calls"] == len(one_at_a_time.requests)


def test_construction_is_the_same_at_any_concurrency() -> None:
    """Sessions of 8, 7 and 1 turns, good replies, a failed request and garbage: the same
    memory and requests whether the chains run one request at a time or side by side."""
    sessions = [
        (datetime(2023, 5, 8), PETS + COOKING),
        (datetime(2023, 6, 1), HIKING + GUITAR[:3]),
        (datetime(2023, 6, 2), HIKING[:1]),
        (datetime(2023, 7, 1), GUITAR + PETS),
    ]
    conversation = build_conversation(sessions, ("Alice", "Bob"), [], "jitter")

    def construct(backbone: Backbone) -> dict[str, Any]:
        system = ESMem(Services(windowed_embedder(), WordCounter(), backbone), extraction="llm")  # type: ignore[arg-type]
        return system.dump_memory(system.construct(conversation))

    assert_concurrency_changes_nothing(construct, lambda: RuleProvider(scripted))


def test_llm_mode_boundaries_with_fallbacks_are_counted() -> None:
    provider = RuleProvider(scripted)
    backbone = make_backbone(provider, concurrency=1).with_stage("construction")  # type: ignore[arg-type]
    system = ESMem(Services(windowed_embedder(), WordCounter(), backbone), extraction="llm")  # type: ignore[arg-type]
    identity = system.construction_identity()
    assert system.uses_llm and identity["construction_model"] == "fake:rules"
    assert "top_events" not in json.dumps(identity)
    memory = system.construct(tiny_conversation())
    events = memory.events
    assert [e.turn_ids[0] for e in events] == ["D1:1", "D1:5", "D2:1", "D2:5"]
    assert [e.topics for e in events] == [("pets",), ("cooking",), ("hiking",), ("guitar",)]
    assert events[1].keywords == ("cooking", "home")
    assert [e.boundary_source for e in events] == ["opening", "llm", "fallback", "fallback"]
    assert events[1].boundary == "Pets are left behind as the talk turns to cooking dinner."
    assert events[3].boundary.startswith("hiking ended. Transitioned to guitar. Context: ")

    boundary_requests = [
        r for r in provider.requests if r.messages[0]["content"] == BOUNDARY_SYSTEM_PROMPT
    ]
    prompt = user_text(boundary_requests[0])
    assert "Topic summary: pets" in prompt and "Keywords: cooking, home" in prompt
    snippet = [f"{speaker}: {text}" for speaker, text in PETS + COOKING]  # last/first L = 4
    assert "\n".join(snippet[:4]) in prompt.split("Event B")[0]
    assert "\n".join(snippet[4:]) in prompt.split("Event B")[1]

    boundaries = memory.report["boundaries"]
    assert boundaries["llm_calls"] == 3 and boundaries["failed_calls"] == 1
    assert boundaries["fallbacks"] == {"boundary_fallback": 2}
    assert boundaries["sources"] == {"fallback": 2, "llm": 1, "opening": 1}
    segmentation = memory.report["segmentation"]
    assert segmentation["fallbacks"] == {} and segmentation["replies"]["topic"]["clean"] == 16
    total_calls = segmentation["llm_calls"] + boundaries["llm_calls"]
    assert len(provider.requests) == total_calls
    stages = backbone.accounting.summary()["stages"]
    assert set(stages) == {"construction"} and stages["construction"]["calls"] == total_calls


def test_clean_boundary_rules() -> None:
    assert clean_boundary("  The chat   moves on to music. ") == "The chat moves on to music."
    assert clean_boundary("**Boundary description:** Talk shifts to work.") == (
        "Talk shifts to work."
    )
    named = "Event A's talk about pets ends and Event B turns to music."
    assert clean_boundary(named) == named
    for garbage in (
        "",
        "ok",
        "[1, 2, 3] and more words",
        "Event B (the current event):\n- Topic summary: music",
        "The talk moves on.\nDialogue snippet:\nAnn: hi there",
    ):
        assert clean_boundary(garbage) is None, garbage


def test_options_are_checked_and_top_events_is_retrieval_only() -> None:
    services = Services(windowed_embedder(), WordCounter())  # type: ignore[arg-type]
    for bad in (
        {"extraction": "magic"},
        {"construction": {"segmentation": "sentence"}},
        {"retrieval": {"alpha": 1.5}},
        {"retrieval": {"anchors": "raw"}},
        {"retrieval": {"top_events": 0}},
        {"retrieval": {"anchors": "none"}},  # flat retrieval has no S_ctx: alpha must be 1
        {"construction": {"summaries": False}},  # no S_sum: alpha must be 0
        {"construction": {"summaries": False}, "retrieval": {"anchors": "none", "alpha": 1.0}},
        {"construction": {"summary_keywords": 0}},
    ):
        with pytest.raises(ValueError):
            ESMem(services, **bad)
    five = ESMem(services, retrieval={"top_events": 5}).construction_identity()
    ten = ESMem(services, retrieval={"top_events": 10, "alpha": 0.0}).construction_identity()
    assert five == ten  # one memory serves every backbone and the alpha = 0 variant
    flat = {"anchors": "none", "alpha": 1.0}
    no_boundary = ESMem(services, retrieval=flat).construction_identity()
    assert no_boundary["config"]["boundaries"] is False and no_boundary != five
    no_summary = ESMem(services, construction={"summaries": False}, retrieval={"alpha": 0.0})
    assert no_summary.construction_identity() != five  # b_i is made without summaries
    with pytest.raises(ValueError, match="needs a backbone"):
        ESMem(services, extraction="llm").construct(tiny_conversation())


# --- configs --------------------------------------------------------------------------------------

ESMEM_CONFIGS = sorted(path.stem for path in (CONF / "method").glob("esmem*.yaml"))


def test_the_paper_configs_exist() -> None:
    assert {
        "esmem",
        "esmem_llm",
        "esmem_no_segmentation",
        "esmem_no_boundary",
        "esmem_no_summary",
        "esmem_no_raw",
    } <= set(ESMEM_CONFIGS)


@pytest.mark.parametrize(
    ("backbone", "top_events"), [("embedded", 5), ("qwen2.5-3b", 5), ("gpt-4o-mini", 10)]
)
def test_top_events_follows_the_backbone(backbone: str, top_events: int) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["method=esmem", f"backbone={backbone}"])
    assert cfg.method.retrieval.top_events == top_events


@pytest.mark.parametrize("name", ESMEM_CONFIGS)
def test_every_esmem_config_instantiates_and_runs(name: str) -> None:
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"method={name}"])
    backbone = make_backbone(RuleProvider(scripted), concurrency=1)  # type: ignore[arg-type]
    services = Services(windowed_embedder(), WordCounter(), backbone)  # type: ignore[arg-type]
    system = instantiate(cfg.method, services=services, _convert_="partial")
    assert isinstance(system, ESMem) and system.uses_llm == (name == "esmem_llm")
    conversation = tiny_conversation()
    payload = json.dumps(system.dump_memory(system.construct(conversation)))
    memory = system.load_memory(json.loads(payload))
    system.prepare_queries(conversation.questions)
    retrieval = system.retrieve(memory, conversation.questions[1])
    assert 0 < len(retrieval.items) <= 5 and retrieval.turn_ids
    if name == "esmem_no_segmentation":
        assert len(memory.events) == len(conversation.turns)
    if name == "esmem_no_boundary":
        assert "boundaries" not in memory.report and not any(e.boundary for e in memory.events)
    if name == "esmem_no_raw":
        assert all(item.text.startswith("Boundary: ") for item in retrieval.items)
    else:
        assert all(item.kind == "event" for item in retrieval.items)


LITE_ABLATIONS = ["esmem_no_boundary", "esmem_no_raw", "esmem_no_segmentation", "esmem_no_summary"]


def contexts(name: str, conversation: Conversation) -> tuple[ESMem, ESMemMemory, list[str]]:
    """The lite config ``name`` built on ``conversation``, and the context the reader gets for
    each question (the kept items in time order, as text)."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"method={name}"])
    system = instantiate(
        cfg.method, services=Services(windowed_embedder(), WordCounter()), _convert_="partial"
    )
    memory = system.construct(conversation)
    system.prepare_queries(conversation.questions)
    shown = []
    for question in conversation.questions:
        items = system.retrieve(memory, question).items
        kept = render_context(items, WordCounter(), budget=10_000).items
        shown.append("\n\n".join(item.text for item in kept))
    return system, memory, shown


@pytest.mark.parametrize("name", LITE_ABLATIONS)
def test_every_ablation_changes_the_readers_context(name: str) -> None:
    conversation = four_session_conversation()
    *_, reference = contexts("esmem", conversation)
    system, memory, shown = contexts(name, conversation)
    changed = sum(a != b for a, b in zip(shown, reference, strict=True))
    assert changed >= len(reference) // 2, f"{name} changes {changed} of {len(reference)}"
    events = memory.events
    if name == "esmem_no_summary":  # no s_i anywhere: not indexed, not in b_i
        assert not any(e.summary or e.keywords or e.topics for e in events)
        assert all(e.boundary.startswith("Context: ") for e in events)
    if name == "esmem_no_boundary":  # flat: the top K summaries of the whole memory
        question = conversation.questions[0]
        scores = (
            memory.vectors("summary", system.services.embedder)
            @ (system.services.embedder.encode([question.question])[0])
        )
        flat = np.argsort(-scores, kind="stable")[: system.retrieval.top_events].tolist()
        assert [j for j, _ in system.rank(memory, question)] == flat
    if name == "esmem_no_raw":
        assert all(text.startswith("Boundary: ") for text in shown)
    if name == "esmem_no_segmentation":
        assert len(events) == len(conversation.turns)


def test_without_summaries_the_boundary_prompt_has_no_summary_fields() -> None:
    provider = RuleProvider(scripted)
    backbone = make_backbone(provider, concurrency=1)  # type: ignore[arg-type]
    system = ESMem(
        Services(windowed_embedder(), WordCounter(), backbone),  # type: ignore[arg-type]
        extraction="llm",
        construction={"summaries": False},
        retrieval={"alpha": 0.0},
    )
    memory = system.construct(tiny_conversation())
    prompts = [
        user_text(r)
        for r in provider.requests
        if r.messages[0]["content"] == BOUNDARY_SYSTEM_PROMPT
    ]
    assert len(prompts) == 3 and all("Dialogue snippet:" in prompt for prompt in prompts)
    assert not any("Topic summary" in prompt or "Keywords" in prompt for prompt in prompts)
    assert not any(e.summary or e.topics or e.keywords for e in memory.events)
    fallback = memory.events[3]  # a JSON reply: the template, without a head
    assert fallback.boundary_source == "fallback" and fallback.boundary.startswith("Context: ")
