"""HingeMem: formulas on hand-computed cases, the lite and LLM construction paths, retrieval."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes.embed import HashingModel, plain_words
from fakes.llm import RuleProvider, assert_concurrency_changes_nothing, make_backbone

from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm.backbone import Backbone
from memsys.llm.types import LLMRequest
from memsys.methods.hingemem import HingeMem
from memsys.methods.hingemem.extract import (
    BOUNDARY_PROMPT,
    BOUNDARY_SCHEMA,
    TOPIC_PROMPT,
    constrained,
    reply_to_memory,
)
from memsys.methods.hingemem.graph import (
    Hyperedge,
    Node,
    compute_salience,
    jaccard,
    merge_hyperedges,
    normalize_name,
    time_key,
)
from memsys.methods.hingemem.lite import resolve_expression
from memsys.methods.hingemem.query import QUERY_PROMPT, analyse_rules
from memsys.methods.hingemem.rerank import TopicContrast, priority_weights, salience_scores
from memsys.methods.hingemem.stop import adaptive_stop
from memsys.nlp import NLP
from memsys.types import Conversation, Question, Session, Turn

DAY1 = datetime(2023, 5, 8, 13, 56)
DAY2 = datetime(2023, 6, 20, 10, 0)


def session(index: int, when: datetime, lines: list[tuple[str, str]]) -> Session:
    sid = f"session_{index}"
    turns = tuple(
        Turn(f"D{index}:{i}", sid, i - 1, speaker, text, when)
        for i, (speaker, text) in enumerate(lines, 1)
    )
    return Session(sid, when, when.strftime("%-I:%M %p on %-d %B, %Y"), turns)


def tiny_conversation() -> Conversation:
    first = session(
        1,
        DAY1,
        [
            ("Alice", "Hi Bob! I went to a pottery class yesterday and made a blue bowl."),
            ("Bob", "Nice! Pottery sounds relaxing. Was the pottery class hard?"),
            ("Alice", "A little, but the teacher was patient and the clay was fun."),
            ("Bob", "By the way, my sister Carla moved to Paris last week."),
            ("Alice", "Paris! Does Carla like her new apartment in Paris?"),
            ("Bob", "She loves it, the apartment has a view of the river."),
        ],
    )
    second = session(
        2,
        DAY2,
        [
            ("Bob", "Hey Alice, I adopted a puppy named Max yesterday!"),
            ("Alice", "A puppy! What breed is Max?"),
            ("Bob", "Max is a golden retriever and loves the park."),
            ("Alice", "I finished my pottery course and fired a vase last month."),
        ],
    )
    questions = (
        Question(
            "tiny:q0",
            "tiny",
            "When did Alice go to the pottery class?",
            "7 May 2023",
            "temporal",
            ("D1:1",),
        ),
        Question("tiny:q1", "tiny", "Where did Carla move?", "Paris", "single_hop", ("D1:4",)),
        Question("tiny:q2", "tiny", "What pets does Bob have?", "a puppy", "single_hop", ("D2:1",)),
    )
    return Conversation("tiny", (first, second), questions, ("Alice", "Bob"))


@pytest.fixture(scope="module")
def services() -> Services:
    model = HashingModel(256, plain_words)  # fast and deterministic; the slow test uses MiniLM
    embedder = Embedder(EmbedderConfig(model="hashing-test"), EmbeddingCache(), model=model)
    return Services(embedder=embedder, tokens=None, nlp=NLP())  # type: ignore[arg-type]


# --- formulas -----------------------------------------------------------------------------------


def edge(persons=(), times=(), topics=(), turns=("t",), position=0) -> Hyperedge:
    nodes = {"person": list(persons), "time": list(times), "location": [], "topic": list(topics)}
    return Hyperedge(nodes, f"d{position}", [], list(turns), None, position, ["s"])


def test_salience_from_frequency_degree_and_diversity() -> None:
    nodes = {
        "person:a": Node("person", "a", "A", mentions=[("t1", "A")] * 3),
        "topic:x": Node("topic", "x", "x", mentions=[("t1", "x")]),
        "topic:y": Node("topic", "y", "y", mentions=[("t2", "y")]),
    }
    edges = [edge(persons=["a"], topics=["x"]), edge(persons=["a"], topics=["y"], position=1)]
    salience = compute_salience(nodes, edges)
    # a: f=3 (max), d=2 (max), c=2 (max) -> 1; x: f=1, d=1, c=1 ->
    # (log2/log4 + log2/log3 + log2/log3) / 3
    assert salience["person:a"] == pytest.approx(1.0)
    expected = (math.log(2) / math.log(4) + 2 * math.log(2) / math.log(3)) / 3
    assert salience["topic:x"] == pytest.approx(expected)
    assert salience["topic:y"] == pytest.approx(expected)


def test_jaccard_merging_is_recursive_and_field_aware() -> None:
    a = edge(persons=["p", "q"], topics=["x", "y", "z"], turns=["t1"], position=0)
    b = edge(persons=["p", "q"], topics=["x", "y", "z", "w"], turns=["t2"], position=1)
    c = edge(persons=["p", "q"], topics=["x", "y", "z", "w", "v"], turns=["t3"], position=2)
    assert jaccard(a.uids(), b.uids()) == pytest.approx(5 / 6)
    assert jaccard(a.uids(), c.uids()) == pytest.approx(5 / 7)  # below 0.8 on its own
    merged = merge_hyperedges([a, b, c], 0.8)
    # the best pair merges first: b+c (6/7); a vs b+c is 5/7, so a stays apart although
    # a vs b alone was 5/6
    assert len(merged) == 2 and merged[1].turn_ids == ["t2", "t3"]
    # field-aware: the same name as a person and as a topic is not the same node
    assert jaccard(edge(persons=["x"]).uids(), edge(topics=["x"]).uids()) == 0.0
    # repeated until no pair is left: e+f (1.0), then d with e+f (5/6)
    d = edge(topics=["1", "2", "3", "4", "5"], turns=["u1"], position=3)
    e = edge(topics=["1", "2", "3", "4", "5", "6"], turns=["u2"], position=4)
    f = edge(topics=["1", "2", "3", "4", "5", "6"], turns=["u3"], position=5)
    (chain,) = merge_hyperedges([d, e, f], 0.8)
    assert chain.turn_ids == ["u1", "u2", "u3"] and chain.position == 3
    assert chain.description == "d3\nd4\nd5"
    assert jaccard(frozenset(), frozenset()) == 0.0


def test_adaptive_stop_rules_on_hand_computed_scores() -> None:
    # recall: drops 0.05, 0.05, 0.2 -> stop before the big drop
    assert adaptive_stop([0.9, 0.85, 0.8, 0.6, 0.55], "recall") == 3
    # recall: steady drops of 0.1 (not more than Delta) until a score falls below max/2
    assert adaptive_stop([0.9, 0.8, 0.7, 0.6, 0.5, 0.44], "recall") == 5
    # precision: >= 0.8 * 1.0
    assert adaptive_stop([1.0, 0.85, 0.8, 0.79], "precision") == 3
    # judgement: softmax ratio >= 0.8 <=> score >= max + ln 0.8 = 0.7769
    assert adaptive_stop([1.0, 0.9, 0.78, 0.7], "judgement") == 3
    assert adaptive_stop([1.0, 0.9, 0.78, 0.7], "judgement", judgement_temperature=0.1) == 1
    assert adaptive_stop([], "recall") == 0 and adaptive_stop([-0.2, -0.3], "precision") == 1
    assert priority_weights(["time", "topic", "person"]) == pytest.approx(
        {"time": 0.5, "topic": 1 / 3, "person": 1 / 6}
    )


def test_topic_term_is_query_level_and_favours_depth_for_common_topics() -> None:
    common = np.array([[1.0, 0.0, 0.0]])
    rare = np.array([[0.0, 1.0, 0.0]])
    contrast = TopicContrast(common, rare)
    # Eq. 6: Q_T = distance(q, rare) - distance(q, common) = cos(q, common) - cos(q, rare)
    assert contrast.query_term(np.array([0.6, 0.8, 0.0]), 0.1) == pytest.approx(-0.2)
    assert contrast.query_term(np.array([1.0, 0.0, 0.0]), 0.1) == pytest.approx(1.0)
    # a positive shift lowers the precision floor (0.8·max): a common-topic query keeps more
    scores = [0.6, 0.5, 0.45]
    assert adaptive_stop(scores, "precision") == 2
    assert adaptive_stop([s + 1.0 for s in scores], "precision") == 3
    # the per-hyperedge reading (an option) favours hyperedges near the rare topics
    edges = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert contrast.hyperedge_term(np.array([0.6, 0.8, 0.0]), edges, 0.1) == pytest.approx(
        [1.0, -1.0, 0.0]
    )
    # a rare topic lying in the common topics' span loses that direction and its weight
    overlapping = TopicContrast(common, np.array([[0.8, 0.6, 0.0]]))
    assert overlapping.rare == pytest.approx(np.array([[0.0, 1.0, 0.0]]))
    assert overlapping.rare_weights == pytest.approx([0.2])


def test_grammar_is_bounded_but_validation_is_lenient() -> None:
    grammar = constrained(BOUNDARY_SCHEMA, max_items=4)
    memories = grammar["properties"]["boundary_memories"]
    assert memories["maxItems"] == 4 and memories["items"]["additionalProperties"] is False
    assert "pattern" in grammar["properties"]["times"]["items"]["properties"]["timestamp"]
    assert "maxItems" not in BOUNDARY_SCHEMA["properties"]["boundary_memories"]


def test_identifiers_and_relative_times() -> None:
    assert normalize_name("person", "Dr. Smith's") == "smith"
    assert time_key(datetime(2023, 5, 7), "week") == "2023-W18"
    assert resolve_expression("yesterday", DAY1) == (datetime(2023, 5, 7, 13, 56), "day")
    assert resolve_expression("last week", DAY1)[1] == "week"
    assert resolve_expression("five years", DAY1) is None  # a duration, not a time


@pytest.mark.parametrize(
    ("question", "query_type", "first"),
    [
        ("How many times did Alice go to the pottery class?", "recall", "topic"),
        ("What pets does Bob have?", "recall", "topic"),
        ("Did Alice enjoy the pottery class?", "judgement", "topic"),
        ("Did Alice go to Paris or Rome?", "precision", "location"),
        ("When did Carla move to Paris?", "precision", "time"),
        ("Where does Bob's sister live?", "precision", "location"),
        ("Who adopted a puppy?", "precision", "person"),
    ],
)
def test_query_analysis_rules(
    services: Services, question: str, query_type: str, first: str
) -> None:
    (doc,) = services.nlp.parse([question])
    plan = analyse_rules(question, doc, DAY2, ["alice", "bob", "carla"])
    assert plan.query_type == query_type
    assert plan.priority[0] == first
    assert "alice" not in {name.lower() for name in plan.names["topic"]}


def test_query_analysis_resolves_relative_times(services: Services) -> None:
    question = "What did Bob do last week?"
    (doc,) = services.nlp.parse([question])
    plan = analyse_rules(question, doc, DAY2, ["bob"])
    assert plan.names["person"] == ("Bob",)
    assert [(t.date().isoformat(), g) for t, g in plan.times] == [("2023-06-13", "week")]
    assert plan.priority == ("time", "person")


# --- lite construction and retrieval ------------------------------------------------------------


def test_lite_construct_dump_load_retrieve(services: Services) -> None:
    # hashed words are no judge of topic shifts: boundaries here come from element changes
    system = HingeMem(services, construction={"topic_shift_threshold": 0.0})
    conversation = tiny_conversation()
    memory = system.construct(conversation)
    spans = [edge.turn_ids for edge in memory.hyperedges]
    assert spans == [
        ["D1:1", "D1:2", "D1:3"],
        ["D1:4", "D1:5", "D1:6"],
        ["D2:1", "D2:2", "D2:3"],
        ["D2:4"],
    ]
    assert memory.hyperedges[1].reasons == [
        "change_person",
        "change_time",
        "change_place",
        "explicit_marker",
    ]
    assert memory.counts() == {"person": 4, "time": 4, "location": 1, "topic": 11, "hyperedges": 4}
    assert "person:carla" in memory.nodes and "location:paris" in memory.nodes
    assert "time:2023-05-07" in memory.nodes  # "yesterday" against 8 May 2023
    assert memory.stats["extraction"] == {"mode": "lite", "sessions": 2}
    covered = [turn for edge in memory.hyperedges for turn in edge.turn_ids]
    assert sorted(covered) == sorted(turn.turn_id for turn in conversation.turns)
    assert all(0 <= node.salience <= 1 for node in memory.nodes.values())

    payload = json.loads(json.dumps(system.dump_memory(memory)))
    loaded = system.load_memory(payload)
    assert system.dump_memory(loaded) == payload

    system.prepare_queries(conversation.questions)
    for question in conversation.questions:
        trace = system.explain(loaded, question)
        assert 1 <= trace.kept <= len(trace.ranked)
        assert list(trace.scores) == sorted(trace.scores, reverse=True)
        assert question.evidence[0] in system.retrieve(loaded, question).turn_ids
    item = system.retrieve(loaded, conversation.questions[1]).items[0]
    edge_ = next(e for e in loaded.hyperedges if e.turn_ids == list(item.turn_ids))
    assert item.timestamp == DAY1 and item.position == edge_.position
    assert item.text.startswith("(persons: ") and "Paris" in item.text
    assert item.position == min(
        i for i, t in enumerate(conversation.turns) if t.turn_id in item.turn_ids
    )


def test_lite_persons_are_the_actors_not_every_speaker(services: Services) -> None:
    lines = [
        ("Alice", "I spent the whole weekend building a wooden canoe with my grandfather."),
        ("Bob", "Wow, nice!"),
    ]
    conversation = Conversation("c", (session(1, DAY1, lines),), (), ("Alice", "Bob"))
    (actors,) = HingeMem(services).construct(conversation).hyperedges
    assert actors.nodes["person"] == ["alice"]  # Bob only reacts (Figure 2's reading)
    every = HingeMem(services, construction={"persons": "speakers"}).construct(conversation)
    assert sorted(every.hyperedges[0].nodes["person"]) == ["alice", "bob"]
    with pytest.raises(ValueError, match=r"construction\.persons"):
        HingeMem(services, construction={"persons": "everyone"})


def test_routing_restricts_candidates_and_eq6_uses_the_papers_weights(
    services: Services,
) -> None:
    system = HingeMem(services, construction={"topic_shift_threshold": 0.0})
    conversation = tiny_conversation()
    memory = system.construct(conversation)
    carla = conversation.questions[1]  # "Where did Carla move?"
    system.prepare_queries([carla])
    trace = system.explain(memory, carla)
    holders = [i for i, e in enumerate(memory.hyperedges) if "carla" in e.nodes["person"]]
    assert trace.routed and sorted(trace.ranked) == holders
    assert len(holders) < len(memory.hyperedges)
    assert system.retrieve(memory, carla).trace == trace.summary()
    assert trace.summary()["candidate_fraction"] == round(len(holders) / 4, 4)
    union = HingeMem(services, retrieval={"routing": "union"})
    assert len(union.explain(memory, carla).ranked) == len(memory.hyperedges)

    # xi + Q_S + Q_T, weights 1: the query-level topic term shifts every candidate alike
    index = system.index(memory)
    query = services.embedder.encode([carla.question])[0]
    weights = priority_weights(trace.plan.ranked_elements())
    expected = (
        index.descriptions @ query
        + salience_scores(memory, weights)
        + index.contrast.query_term(query, 0.1)
    )
    assert trace.scores == pytest.approx([expected[i] for i in trace.ranked])

    # a constraint the memory cannot satisfy does not route: the semantic neighbours remain
    nowhere = Question("n", "tiny", "What did Zed do in Tokyo?", "-", "single_hop")
    assert not system.explain(memory, nowhere).routed


def test_ablations_text_memory_and_fixed_depth(services: Services) -> None:
    conversation = tiny_conversation()
    text = HingeMem(
        services,
        memory="text",
        retrieval={"node_indexing": False, "rerank": False, "adaptive_stop": False, "top_k": 3},
    )
    memory = text.construct(conversation)
    assert memory.counts()["hyperedges"] == len(conversation.turns) and not memory.nodes
    items = text.retrieve(memory, conversation.questions[2]).items
    assert len(items) == 3 and all(len(item.turn_ids) == 1 for item in items)
    assert "nlp" not in text.construction_config()
    full = HingeMem(services)
    assert full.construction_config()["options"]["merge_jaccard"] == 0.8
    with pytest.raises(ValueError, match="extraction"):
        HingeMem(services, extraction="regex")


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
    from hydra import compose, initialize_config_dir

    from benchmarks.data.paths import REPO_ROOT
    from memsys.llm import Accounting, ResponseCache, build_backbone

    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["backbone=embedded"])
    backbone = build_backbone(
        cfg.backbone, cache=ResponseCache(tmp_path / "llm.sqlite"), accounting=Accounting()
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
