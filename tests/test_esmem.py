"""ES-Mem's construction: the lite round trip with window-fitted boundaries, LLM boundaries
with their fallbacks counted, sessions segmented together, the same memory at any concurrency,
the boundary cleaning rules, option checks, and the boundary prompt without summaries."""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from typing import Any

import pytest
from fakes.dialogues import build_conversation
from fakes.embed import windowed_embedder
from fakes.esmem import (
    COOKING,
    GUITAR,
    HIKING,
    PETS,
    WordCounter,
    four_session_conversation,
    scripted,
    tiny_conversation,
)
from fakes.llm import RuleProvider, assert_concurrency_changes_nothing, make_backbone
from fakes.segment import user_text

from memsys.base import Services
from memsys.llm.backbone import Backbone
from memsys.llm.types import LLMRequest
from memsys.methods.esmem import (
    BOUNDARY_SYSTEM_PROMPT,
    EmbedderWindow,
    ESMem,
    clean_boundary,
    distinctive_words,
)
from memsys.methods.esmem.segmenter import ESMemSegmenter


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
    system = ESMem(Services(windowed_embedder(), WordCounter(), backbone), extraction="llm")  # type: ignore[arg-type]
    memory = system.construct(tiny_conversation())
    # segmentation on a request flow, both sessions' chains at once; the boundaries at once
    assert together.peak_in_flight >= 2

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
    # the failed request and the JSON reply are each asked once more, then get the template
    assert boundaries["llm_calls"] == 5 and boundaries["failed_calls"] == 2
    assert boundaries["fallbacks"] == {"boundary": 2}
    assert boundaries["sources"] == {"fallback": 2, "llm": 1, "opening": 1}
    segmentation = memory.report["segmentation"]
    assert segmentation["fallbacks"] == {} and segmentation["llm"]["topic"]["parse"]["clean"] == 16
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
        # w/o sum and w/o raw: a template boundary without its raw turns has no text left
        {
            "construction": {"summaries": False},
            "retrieval": {"alpha": 0.0, "context": "boundary_summary"},
        },
        {"retrieval": {"context": "summary"}},  # the old name of w/o raw's context
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
    assert len(set(prompts)) == 3 and all("Dialogue snippet:" in prompt for prompt in prompts)
    assert not any("Topic summary" in prompt or "Keywords" in prompt for prompt in prompts)
    assert not any(e.summary or e.topics or e.keywords for e in memory.events)
    fallback = memory.events[3]  # a JSON reply: the template, without a head
    assert fallback.boundary_source == "fallback" and fallback.boundary.startswith("Context: ")
