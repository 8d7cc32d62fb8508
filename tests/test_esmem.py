"""ES-Mem: hand-computed coarse-to-fine scores, lite round trip, LLM boundaries with fallbacks,
and every ES-Mem config (the method and its ablations) instantiated and run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from dialogues import build_conversation
from llm_fakes import make_backbone
from segment_fakes import RuleProvider, hashing_embedder, user_text

from benchmarks.answering.context import render_context
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm.errors import ProviderError
from memsys.llm.types import LLMRequest
from memsys.methods.esmem import (
    BOUNDARY_SYSTEM_PROMPT,
    ESMem,
    ESMemMemory,
    Event,
    clean_boundary,
    rank_events,
)
from memsys.segment.esmem import INTENT_SCHEMA, TOPIC_SCHEMA
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
            boundary=f"boundary {i}",
            boundary_source="template",
        )
        table[event.boundary] = np.array([b, np.sqrt(1 - b * b), 0.0])
        table[event.summary()] = np.array([s, 0.0, np.sqrt(1 - s * s)])
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

    # w/o bnd: summary anchors 7 and 3 activate 1..7; ranked by summary alone. (With the
    # configured k = 10 >= K every top-K summary is an anchor: flat summary retrieval.)
    flat = ESMem(services, retrieval={**HAND_OPTIONS, "anchors": "summary", "alpha": 1.0})
    assert [item.position for item in flat.retrieve(memory, question).items] == [7, 3, 2, 5, 6]


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
    embedder = hashing_embedder()
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
    assert all(" ended. Transitioned to " in e.boundary for e in events[1:])
    second = events[1]
    assert events[0].lines[-1] in second.boundary and second.lines[0] in second.boundary
    assert second.summary() == f"{'; '.join(second.topics)}: {', '.join(second.keywords)}"
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


def test_llm_mode_boundaries_with_fallbacks_are_counted() -> None:
    provider = RuleProvider(scripted)
    backbone = make_backbone(provider, concurrency=1).with_stage("construction")  # type: ignore[arg-type]
    system = ESMem(Services(hashing_embedder(), WordCounter(), backbone), extraction="llm")  # type: ignore[arg-type]
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
    services = Services(hashing_embedder(), WordCounter())  # type: ignore[arg-type]
    for bad in (
        {"extraction": "magic"},
        {"construction": {"segmentation": "sentence"}},
        {"retrieval": {"alpha": 1.5}},
        {"retrieval": {"anchors": "raw"}},
        {"retrieval": {"top_events": 0}},
    ):
        with pytest.raises(ValueError):
            ESMem(services, **bad)
    five = ESMem(services, retrieval={"top_events": 5}).construction_identity()
    ten = ESMem(services, retrieval={"top_events": 10, "alpha": 0.0}).construction_identity()
    assert five == ten  # one memory serves every backbone and the no-summary ablation
    no_boundary = ESMem(services, retrieval={"anchors": "summary"}).construction_identity()
    assert no_boundary["config"]["boundaries"] is False and no_boundary != five
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
    services = Services(hashing_embedder(), WordCounter(), backbone)  # type: ignore[arg-type]
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
