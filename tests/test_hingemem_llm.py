"""HingeMem's LLM path: canned replies parsed or fallen back from, the same memory at any
concurrency, reply spans that cover the session, and (slow) the real embedded backbone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.hingemem import hashing_services, tiny_conversation
from fakes.llm import RuleProvider, assert_concurrency_changes_nothing, make_backbone

from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm.backbone import Backbone
from memsys.llm.types import LLMRequest
from memsys.methods.hingemem import HingeMem
from memsys.methods.hingemem.extract import reply_to_memory
from memsys.methods.hingemem.prompts import (
    BOUNDARY_PROMPT,
    BOUNDARY_SCHEMA,
    QUERY_PROMPT,
    TOPIC_PROMPT,
    constrained,
)
from memsys.nlp import NLP
from memsys.types import Question


@pytest.fixture(scope="module")
def services(nlp: NLP) -> Services:
    return hashing_services(nlp)


# --- the LLM path with a canned backbone --------------------------------------------------------

GOOD_SESSION_1 = {
    "persons": [
        {
            "canonical_name": "Alice",
            "role_tags": ["speaker"],
            "mentions": [{"turn": 1, "mention": "I"}],
        },
        {
            "canonical_name": "Carla",
            "role_tags": ["sister"],
            "mentions": [{"turn": 4, "mention": "Carla"}],
        },
    ],
    "times": [
        {
            "timestamp": "2023-05-07",
            "granularity": "day",
            "mentions": [{"turn": 1, "mention": "yesterday"}],
        },
        {"timestamp": "not a date", "granularity": "day", "mentions": []},
    ],
    "locations": [{"name": "Paris", "mentions": [{"turn": 4, "mention": "Paris"}]}],
    "topics": [{"label": "pottery class", "mentions": [{"turn": 1, "mention": "pottery class"}]}],
    "boundary_memories": [
        {
            "person_list": ["Alice", "Bob"],
            "time_list": ["2023-05-07"],
            "location_list": [],
            "topic_list": ["pottery class"],
            "description": "Alice took a pottery class on 7 May 2023 and made a blue bowl.",
            "boundary": {"reasons": ["change_time"]},
            "start_turn": 1,
            "end_turn": 3,
        },
        {
            "person_list": ["Bob", "Carla"],
            "time_list": [],
            "location_list": ["Paris"],
            "topic_list": ["moving"],
            "description": "Bob's sister Carla moved to Paris.",
            "boundary": {"reasons": ["change_person", "explicit_marker", "bogus"]},
            "start_turn": 4,
            "end_turn": 6,
        },
    ],
}


def canned_reply(request: LLMRequest) -> str:
    """Good JSON for session 1, garbage for session 2 (first try and retry), topic lists."""
    system, user = request.messages[0]["content"], request.messages[1]["content"]
    if system == BOUNDARY_PROMPT:
        text = (
            json.dumps(GOOD_SESSION_1) if "[1] Alice: Hi Bob" in user else "Sure! Here it is: {oops"
        )
    elif system == TOPIC_PROMPT:
        text = '{"common_topics": ["pottery class", "invented"], "rare_topics": ["moving"]}'
    elif system == QUERY_PROMPT and "anything" in user:
        text = "no plan, sorry"
    elif system == QUERY_PROMPT:
        text = (
            '{"query_type": "judgment", "constraints": {"person": ["Alice"], '
            '"time": [{"timestamp": "2023-05", "granularity": "month"}]}, "priority": ["time"]}'
        )
    else:
        text = "?"
    return text


def canned() -> RuleProvider:
    """The canned replies from ``fake:canned``: 10 prompt, 10 completion tokens each."""
    return RuleProvider(canned_reply, name="canned", tokens=(10, 10))


def test_llm_path_parses_good_replies_and_falls_back_on_garbage(services: Services) -> None:
    provider = canned()
    llm_services = Services(
        services.embedder, services.tokens, make_backbone(provider), services.nlp
    )
    system = HingeMem(llm_services, extraction="llm", construction={"min_segment_turns": 2})
    assert system.uses_llm and system.construction_identity()["construction_model"] == "fake:canned"
    memory = system.construct(tiny_conversation())
    stats = memory.stats["extraction"]
    report = stats["llm"]  # the shared helper's ExtractionReport
    assert report["units"] == 2 and report["calls"] == 3
    assert report["accepted_first"] == 1 and report["fallbacks"] == 1
    assert report["retried"] == 1 and report["accepted_retry"] == 0
    assert report["prompt_tokens"] == 30 and report["completion_tokens"] == 30
    assert report["parse"]["clean"] == 1 and report["parse"]["unparseable"] == 2
    assert report["problems"] == {"bad_json": 2} and stats["times_dropped"] == 1
    boundary = [r for r in provider.requests if r.messages[0]["content"] == BOUNDARY_PROMPT]
    assert len(boundary) == 3  # session 1 once; session 2 once and once more with a note
    (retry,) = [r for r in boundary if len(r.messages) == 4]
    assert retry.messages[2] == {"role": "assistant", "content": "Sure! Here it is: {oops"}
    assert retry.messages[3]["content"].startswith("That reply could not be used: it was not")
    assert retry.params.json_schema == constrained(BOUNDARY_SCHEMA)  # the grammar, retry too
    llm_edges = [e for e in memory.hyperedges if e.sessions == ["session_1"]]
    assert [e.turn_ids for e in llm_edges] == [["D1:1", "D1:2", "D1:3"], ["D1:4", "D1:5", "D1:6"]]
    assert llm_edges[1].reasons == ["change_person", "explicit_marker"]
    assert "person:bob" in memory.nodes and "topic:moving" in memory.nodes  # declared on use
    assert memory.common_topics == ["pottery class"] and memory.rare_topics == ["moving"]
    topics = memory.stats["topic_clustering"]
    assert topics["source"] == "llm" and topics["llm"]["accepted_first"] == 1

    question = Question("q", "tiny", "Did Alice make pottery in May 2023?", "yes", "single_hop")
    system.prepare_queries([question])
    trace = system.explain(memory, question)
    assert trace.plan.source == "llm" and trace.plan.query_type == "judgement"
    assert trace.plan.priority == ("time",)
    assert system.query_report.accepted_first == 1 and system.query_report.fallbacks == 0

    # an unusable plan reply is asked for once (plus its retry) and counted once
    unusable = Question("u", "tiny", "Ask me anything?", "-", "single_hop")
    provider.requests.clear()
    system.prepare_queries([unusable])
    system.retrieve(memory, unusable)
    system.retrieve(memory, unusable)
    assert len(provider.requests) == 2 and system.query_report.fallbacks == 1
    assert system.explain(memory, unusable).plan.source == "rules_fallback"


def test_construction_is_the_same_at_any_concurrency(services: Services) -> None:
    def construct(backbone: Backbone) -> dict[str, Any]:
        llm_services = Services(services.embedder, services.tokens, backbone, services.nlp)
        system = HingeMem(llm_services, extraction="llm", construction={"min_segment_turns": 2})
        return system.dump_memory(system.construct(tiny_conversation()))

    assert_concurrency_changes_nothing(construct, canned)


def test_reply_spans_cover_the_session() -> None:
    conversation = tiny_conversation()
    value = {
        "boundary_memories": [
            {"description": "", "start_turn": 3, "end_turn": 2},
            {"description": "x", "start_turn": 99, "end_turn": 1},
        ]
    }
    nodes, edges, dropped = reply_to_memory(value, conversation.sessions[0])
    assert {n.uid for n in nodes} == {"time:2023-05-08"}
    assert [e.turn_ids for e in edges] == [["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"], ["D1:6"]]
    assert edges[0].description.startswith("Alice: Hi Bob")  # empty description: the turns
    assert edges[0].nodes["time"] == ["2023-05-08"] and dropped == 0


# --- the real embedded backbone -----------------------------------------------------------------


@pytest.mark.slow
def test_llm_mode_with_the_embedded_backbone(services: Services, tmp_path: Path) -> None:
    from benchmarks.config.compose import compose_config
    from benchmarks.config.services import backbone_config
    from memsys.llm import Accounting, ResponseCache, build_backbone

    config = backbone_config(compose_config(["backbone=embedded"]), "backbone")
    backbone = build_backbone(
        config, cache=ResponseCache(tmp_path / "llm.sqlite"), accounting=Accounting()
    )
    embedder = Embedder(EmbedderConfig(), EmbeddingCache())
    llm_services = Services(embedder, services.tokens, backbone, services.nlp)
    system = HingeMem(
        llm_services,
        extraction="llm",
        construction={"max_tokens": 384, "grammar_max_items": 3, "topic_max_tokens": 96},
        retrieval={"analysis_max_tokens": 96},
    )
    conversation = tiny_conversation()
    memory = system.construct(conversation)
    stats = memory.stats["extraction"]
    assert stats["sessions"] == 2 and stats["llm"]["units"] == 2
    report = stats["llm"]
    assert report["accepted_first"] + report["accepted_retry"] + report["fallbacks"] == 2
    assert sum(report["parse"].values()) >= 2
    covered = {turn for edge in memory.hyperedges for turn in edge.turn_ids}
    assert covered == {turn.turn_id for turn in conversation.turns}
    loaded = system.load_memory(json.loads(json.dumps(system.dump_memory(memory))))
    system.prepare_queries(conversation.questions[:1])
    retrieval = system.retrieve(loaded, conversation.questions[0])
    assert retrieval.items and system.explain(loaded, conversation.questions[0]).plan.source in (
        "llm",
        "rules_fallback",
    )
