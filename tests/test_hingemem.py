"""HingeMem's lite path: construction, dump and load, retrieval under each candidate rule and the
paper's weights, persons as actors, and the ablations (text memory, fixed depth)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes.hingemem import DAY1, hashing_services, session, tiny_conversation

from memsys.base import Services
from memsys.methods.hingemem import HingeMem
from memsys.methods.hingemem.rerank import priority_weights, salience_scores
from memsys.nlp import NLP
from memsys.types import Conversation, Question
from memsys.usage import PARSER


@pytest.fixture(scope="module")
def services(nlp: NLP) -> Services:
    return hashing_services(nlp)


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


def test_intersect_rule_restricts_candidates_and_eq6_uses_the_papers_weights(
    services: Services,
) -> None:
    system = HingeMem(
        services,
        construction={"topic_shift_threshold": 0.0},
        retrieval={"candidate_rule": "intersect"},
    )
    conversation = tiny_conversation()
    memory = system.construct(conversation)
    carla = conversation.questions[1]  # "Where did Carla move?"
    system.prepare_queries([carla])
    trace = system.explain(memory, carla)
    holders = [i for i, e in enumerate(memory.hyperedges) if "carla" in e.nodes["person"]]
    assert trace.summary()["routed"] and sorted(trace.ranked) == holders
    assert len(holders) < len(memory.hyperedges)
    assert system.retrieve(memory, carla).trace == trace.summary()
    assert trace.summary()["candidate_fraction"] == round(len(holders) / 4, 4)
    union = HingeMem(services, retrieval={"candidate_rule": "union"})
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
    assert not system.explain(memory, nowhere).summary()["routed"]


def test_semantic_union_and_bonus_rules_on_a_hand_computed_question(services: Services) -> None:
    conversation = tiny_conversation()
    construction = {"topic_shift_threshold": 0.0}
    system = HingeMem(services, construction=construction, retrieval={"semantic_top_k": 1})
    memory = system.construct(conversation)
    # Paris routes to hyperedge 1 (Carla's move), Max to 2 (the puppy): the priority order keeps
    # the location and skips the person that would empty it; the nearest description is 2's
    max_paris = Question("m", "tiny", "Did Max go to Paris?", "-", "adversarial")
    system.prepare_queries([max_paris])
    similarity = (
        system.index(memory).descriptions @ services.embedder.encode([max_paris.question])[0]
    )
    assert int(np.argmax(similarity)) == 2
    trace = system.explain(memory, max_paris)
    assert trace.plan.ranked_elements() == ["location", "person"]
    assert set(trace.ranked) == {1, 2}  # semantic top-1 ∪ routed {1}
    # judgement: 2's score is below max + ln 0.8, so the stop rule (not the list's end) keeps 1
    assert trace.kept == 1 and trace.ranked[0] == 1
    assert trace.summary() | {"group": "-"} == {
        "group": "-",
        "routed": True,
        "candidates": 2,
        "candidate_fraction": 0.5,
        "routed_fraction": 0.25,
        "kept": 1,
        "stop_decided": True,
        "top_moved": True,  # the rerank put the routed hyperedge above the most similar one
    }
    intersect = HingeMem(services, retrieval={"candidate_rule": "intersect", "semantic_top_k": 1})
    assert intersect.explain(memory, max_paris).ranked == (1,)
    # bonus: every hyperedge stays a candidate; weights 2/3 (location) and 1/3 (person)
    fixed = {"rerank": False, "adaptive_stop": False, "top_k": 4}
    bonus = HingeMem(services, retrieval={"candidate_rule": "bonus", **fixed})
    ranked = bonus.explain(memory, max_paris)
    scores = dict(zip(ranked.ranked, ranked.scores, strict=True))
    assert scores == pytest.approx(
        {1: similarity[1] + 2 / 3, 2: similarity[2] + 1 / 3, 0: similarity[0], 3: similarity[3]}
    )
    with pytest.raises(ValueError, match=r"retrieval\.candidate_rule"):
        HingeMem(services, retrieval={"candidate_rule": "routing"})


def test_depth_says_whether_the_stop_rules_set_it(services: Services) -> None:
    scores = [0.9, 0.85, 0.8, 0.6, 0.55]  # recall: the inflection point is after the third
    assert HingeMem(services).depth(scores, "recall") == (3, True)
    assert HingeMem(services).depth(scores[:3], "recall") == (3, False)  # the list ended first
    assert HingeMem(services, retrieval={"max_items": 2}).depth(scores, "recall") == (2, False)
    fixed = HingeMem(services, retrieval={"adaptive_stop": False, "top_k": 4})
    assert fixed.depth(scores, "recall") == (4, False)


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
    assert (
        PARSER not in text.construction_services() and "parser" not in text.construction_identity()
    )
    assert PARSER in HingeMem(services).construction_services()
    full = HingeMem(services)
    assert full.construction_config()["options"]["merge_jaccard"] == 0.8
    with pytest.raises(ValueError, match="extraction"):
        HingeMem(services, extraction="regex")
