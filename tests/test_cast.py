"""CAST: views and streams, scene aggregation, roles, places, fusion, query-to-triple linking,
personalized PageRank, the LLM path and its fallbacks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from fakes.dialogues import build_conversation, embedded_llm_services, tiny_fixture
from fakes.llm import RuleProvider, assert_concurrency_changes_nothing, make_backbone

from benchmarks.answering.context import render_context
from memsys.base import Services
from memsys.embed import Embedder
from memsys.graph_store import count_kinds
from memsys.llm import Backbone, LLMRequest
from memsys.methods.cast import (
    CAST,
    SceneRule,
    aggregate_scenes,
    combine,
    fuse,
    insert_at_slot,
    union,
)
from memsys.methods.cast.hipporag import PassageGraphIndex, build_graph
from memsys.methods.cast.pagerank import PageRank
from memsys.nlp import NLP
from memsys.tokens import TokenCounter
from memsys.types import Conversation, MemoryItem, Question

DAY = datetime(2023, 5, 8, 13, 0)


def conversation() -> Conversation:
    """Caroline and Melanie; Gina is only talked about (session 1), pottery on a later day."""
    first = [
        ("Caroline", "My friend Gina told me her team won first place in the dance contest."),
        ("Melanie", "Nice! What did they perform?"),
        ("Caroline", "A contemporary piece called Finding Freedom."),
    ]
    second = [
        ("Melanie", "I signed up for a pottery class with my kids."),
        ("Caroline", "Pottery sounds relaxing. What will you make?"),
        ("Melanie", "A bowl for the kitchen, if it survives the kiln."),
    ]
    later = DAY + timedelta(days=20)
    return build_conversation([(DAY, first), (later, second)], ("Caroline", "Melanie"))


def question(text: str) -> Question:
    return Question(f"q:{text}", "tiny", text, "", "single_hop")


def system(embedder: Embedder, nlp: NLP, **options: object) -> CAST:
    """CAST at the paper's reader depth (the fused top-k only) unless ``options`` say else:
    the tests of Algorithm 2 read its top-k."""
    options = {"reader_depth": "top_k", **options}
    return CAST(Services(embedder=embedder, tokens=None, nlp=nlp), **options)  # type: ignore[arg-type]


def test_at_budget_depth_the_reader_gets_the_fused_top_k_then_every_message_by_score(
    embedder: Embedder, nlp: NLP
) -> None:
    memory = system(embedder, nlp).construct(conversation())
    ask = question("What did Gina's team win?")
    paper = system(embedder, nlp, top_k=3).retrieve(memory, ask)
    deep = system(embedder, nlp, top_k=3, reader_depth="budget").retrieve(memory, ask)
    assert deep.items[:3] == paper.items and len(paper.items) == 3
    assert len(deep.items) == len(memory.messages) > 3  # every message, for the budget to cut
    below = [item.turn_ids[0] for item in deep.items[3:]]
    assert below == [turn for turn in paper.ranking if turn in below]  # by semantic score
    assert deep.ranking == paper.ranking


# -- Scene aggregation: two of three ---------------------------------------------------------


def test_two_of_three_rule_with_missing_locations() -> None:
    x, y = np.eye(4)[0], np.eye(4)[1]
    views = [
        (DAY, "studio", x),  # 0 starts scene A
        (DAY + timedelta(hours=2), None, x),  # 1 time + topic; no location -> joins A
        (DAY + timedelta(hours=3), "park", y),  # 2 time only -> new scene B
        (DAY + timedelta(days=4), "studio", x),  # 3 location + topic (4 days) -> joins A
        (DAY + timedelta(days=9), None, x),  # 4 topic only (5 days after A) -> new scene C
        (
            DAY + timedelta(days=9, hours=1),
            "park",
            y,
        ),  # 5 time (C) + nothing else; B: place + topic
    ]
    times, places, topics = zip(*views, strict=True)
    unmet = aggregate_scenes(times, places, np.array(topics), SceneRule())
    assert unmet == [[0, 1, 3], [2, 5], [4]]
    # Counting a missing location as satisfied lets topic alone (or time alone) suffice.
    met = aggregate_scenes(times, places, np.array(topics), SceneRule(missing_location="met"))
    assert met == [[0, 1, 3, 4], [2, 5]]
    strict_time = SceneRule(max_gap=timedelta(hours=1))
    assert aggregate_scenes(times, places, np.array(topics), strict_time)[0] == [0, 3]


def test_streams_follow_central_speakers_and_mentions(embedder: Embedder, nlp: NLP) -> None:
    memory = system(embedder, nlp).construct(conversation())
    profiles = memory.characters()
    assert set(profiles) == {"Caroline", "Melanie", "Gina"}
    assert profiles["Gina"] == {"supporting": 1}  # mentioned, never speaks
    gina = next(s for s in memory.scenes if s.character == "Gina")
    assert gina.participants == {"Caroline": "main", "Gina": "supporting", "Melanie": "main"}
    assert gina.positions == (0, 1, 2)  # the views (w = 1) whose windows mention her
    assert all(s.role == "main" for s in memory.scenes if s.character != "Gina")
    assert memory.report["views"] == 6
    # §3.3.1: a view joins its central speaker's stream, not every speaker's in its window, so
    # two speakers' profiles differ (each holds the views centred on their own messages).
    scenes_of = {
        name: [s.positions for s in memory.scenes if s.character == name]
        for name in ("Caroline", "Melanie")
    }
    assert scenes_of["Caroline"] != scenes_of["Melanie"]

    speakers_only = system(embedder, nlp, participants="speakers").construct(conversation())
    assert set(speakers_only.characters()) == {"Caroline", "Melanie"}
    alone = system(embedder, nlp, window=0).construct(conversation())
    gina_alone = next(s for s in alone.scenes if s.character == "Gina")
    assert gina_alone.positions == (0,)
    center_only = system(embedder, nlp, mention_scope="message").construct(conversation())
    gina_center = [s for s in center_only.scenes if s.character == "Gina"]
    assert [s.positions for s in gina_center] == [(0, 1)]  # only v_0 (centred on the mention)


def test_places_are_extracted_and_join_scenes(embedder: Embedder, nlp: NLP) -> None:
    trip = [
        ("Melanie", "We spent the whole weekend in Paris with the kids."),
        ("Caroline", "How lovely! What did you see?"),
    ]
    later = DAY + timedelta(days=30)
    talk = build_conversation([(DAY, trip), (later, trip)], ("Caroline", "Melanie"))
    memory = system(embedder, nlp).construct(talk)
    assert [m["location"] for m in memory.messages] == ["Paris", None, "Paris", None]
    melanie = [s for s in memory.scenes if s.character == "Melanie"]
    # A month apart (time unmet), same place and topic: two of three, one scene.
    assert len(melanie) == 1 and melanie[0].location == "Paris"
    assert memory.statistics()["located_messages"] == 2


# -- Fusion ------------------------------------------------------------------------------------


def test_fusion_promotes_shared_items_and_adds_none() -> None:
    semantic = ["m4", "m1", "m9", "m2", "m7"]
    fused = fuse(semantic, {"m2", "m4", "m100"})
    assert fused == ["m4", "m2", "m1", "m9", "m7"]
    assert sorted(fused) == sorted(semantic)  # same candidates, nothing new
    assert fuse(semantic, set()) == semantic
    assert insert_at_slot(semantic, ["m1", "m100", "m200"], k=5) == ["m4", "m1", "m100", "m9", "m2"]
    assert insert_at_slot(semantic, ["m1"], k=5) == semantic  # nothing new to insert
    assert union(semantic, ["m2", "m100"]) == ["m2", "m4", "m1", "m9", "m7", "m100"]
    assert combine("none", semantic, ["m2"], k=5) == semantic
    assert combine("rerank", semantic, ["m2"], k=5) == fuse(semantic, {"m2"})


def test_query_to_triple_linking_seeds_the_facts_phrases() -> None:
    class Words:
        """Bag-of-words vectors over a fixed vocabulary (deterministic, no model)."""

        vocabulary = ("gina", "won", "first", "place", "pottery", "bowl", "made", "melanie")

        def encode(self, texts: list[str]) -> np.ndarray:
            rows = np.array(
                [[float(w in t.lower().split()) for w in self.vocabulary] for t in texts]
            )
            return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)

    facts = [
        (["Gina", "first place"], [("Gina", "won", "first place")]),
        (["Melanie", "bowl"], [("Melanie", "made", "bowl")]),
        (["Melanie", "pottery"], [("Melanie", "made", "pottery")]),
    ]
    embedder = Words()
    graph = build_graph(facts, embedder)  # type: ignore[arg-type]
    triples = [t for _, found in facts for t in found]
    index = PassageGraphIndex(graph, embedder.encode(["p0", "p1", "p2"]), embedder, triples)  # type: ignore[arg-type]
    query = embedder.encode(["what did melanie make of pottery"])[0]
    candidates = index.candidate_facts(query, top_k=2)
    assert [triples[i] for i, _ in candidates] == [triples[2], triples[1]]
    assert candidates[0][1] == 1.0  # min-max normalized
    seeds = index.fact_seeds(candidates, link_top_k=5)
    # Melanie is in two passages (specificity 2) and named by both facts: (1/2 + s/2) / 2.
    assert set(seeds) == {"phrase:melanie", "phrase:pottery", "phrase:bowl"}
    assert seeds["phrase:pottery"] == 1.0 and seeds["phrase:bowl"] == candidates[1][1]
    assert seeds["phrase:melanie"] == (0.5 + candidates[1][1] / 2) / 2
    assert list(index.fact_seeds(candidates, link_top_k=1)) == ["phrase:pottery"]


# -- Personalized PageRank -----------------------------------------------------------------------


def test_pagerank_on_a_hand_checked_graph() -> None:
    # Passages P1-P3, phrases a, b, c: P1 contains a and b, P2 contains b, P3 contains c; a-b is
    # a relation edge. Seeded at a with alpha = 0.5, the stationary equations
    #   x_a = 1/2 + (x_P1/2 + x_b/3)/2,  x_P1 = (x_a/2 + x_b/3)/2,
    #   x_b = (x_a/2 + x_P1/2 + x_P2)/2, x_P2 = (x_b/3)/2,  x_c = x_P3 = 0
    # solve (by hand) to x = (84, 26, 30, 5, 0, 0) / 145 for (a, P1, b, P2, c, P3).
    graph = nx.Graph([("a", "P1"), ("a", "b"), ("b", "P1"), ("b", "P2"), ("c", "P3")])
    pagerank = PageRank(graph)
    ranks = pagerank.personalized({"a": 1.0}, alpha=0.5, tol=1e-12, max_iter=500)
    scores = dict(zip(pagerank.nodes, ranks, strict=True))
    expected = {"a": 84, "P1": 26, "b": 30, "P2": 5, "c": 0, "P3": 0}
    for node, value in expected.items():
        assert scores[node] * 145 == pytest.approx(value, abs=1e-4)
    passages = sorted(["P3", "P2", "P1"], key=scores.get, reverse=True)
    assert passages == ["P1", "P2", "P3"]
    reference = nx.pagerank(graph, alpha=0.5, personalization={"a": 1.0}, tol=1e-10)
    assert all(scores[node] == pytest.approx(value, abs=1e-6) for node, value in reference.items())
    with pytest.raises(ValueError, match="seed"):
        pagerank.personalized({"nowhere": 1.0})


# -- Construct, dump, load, retrieve ---------------------------------------------------------------


def test_construct_dump_load_retrieve(embedder: Embedder, nlp: NLP) -> None:
    cast = system(embedder, nlp, top_k=3, query_linking="triples")
    built = cast.construct(conversation())
    kinds = count_kinds(built.graph)
    assert kinds["nodes"]["passage"] == 6 and kinds["nodes"]["phrase"] > 5
    assert {"contains", "relation"} <= set(kinds["edges"])
    memory = cast.load_memory(json.loads(json.dumps(cast.dump_memory(built))))
    assert nx.utils.graphs_equal(memory.graph, built.graph) and memory.scenes == built.scenes

    retrieval = cast.retrieve(memory, question("Which contest did Gina's team win?"))
    assert len(retrieval.items) == 3
    first = retrieval.items[0]  # its fact (team, win, dance contest) links the query
    assert first.turn_ids == ("D1:1",)
    assert first.text.startswith("Caroline: My friend Gina told me her team won first place")
    assert first.timestamp == DAY and first.position == 0 and first.kind == "message"
    # Entity linking (lite's default: question noun phrases -> phrase nodes, HippoRAG v1 style).
    v1 = system(embedder, nlp, top_k=3)
    ids = [
        i.turn_ids[0]
        for i in v1.retrieve(memory, question("What piece did Gina's team perform?")).items
    ]
    assert "D1:3" in ids

    pottery = cast.retrieve(memory, question("What does Melanie make in her pottery class?"))
    assert pottery.items[0].turn_ids[0].startswith("D2")
    assert all(item.timestamp == DAY + timedelta(days=20) for item in pottery.items[:2])


def test_fusion_reorders_only_within_the_semantic_list(embedder: Embedder, nlp: NLP) -> None:
    memory = system(embedder, nlp).construct(conversation())
    ask = question("What did Gina's team win?")
    rerank = system(embedder, nlp, top_k=4).retrieve(memory, ask)
    slot3 = system(embedder, nlp, top_k=4, fusion="slot3").retrieve(memory, ask)
    assert len(rerank.items) == len(slot3.items) == 4
    alone = system(embedder, nlp, top_k=4, fusion="none").retrieve(memory, ask)
    plain = [item.position for item in alone.items]
    assert sorted(item.position for item in rerank.items) == sorted(plain)
    union_items = system(embedder, nlp, top_k=4, fusion="union").retrieve(memory, ask).items
    assert [item.position for item in union_items][:4] == [i.position for i in rerank.items]


def test_the_promotion_reaches_the_reader_in_casts_own_order(embedder: Embedder, nlp: NLP) -> None:
    """§4.3.3's example: the episodic half promotes "Finding Freedom" (D1:3) from the semantic
    list's end to third. CAST declares rank order, so the reader sees that; shown oldest first,
    CAST and its semantic half hand the reader the same context."""
    assert CAST.context_order == "rank"
    memory = system(embedder, nlp).construct(conversation())
    ask = question("What did Gina's team win?")
    fused = system(embedder, nlp, top_k=6).retrieve(memory, ask).items
    alone = system(embedder, nlp, top_k=6, fusion="none").retrieve(memory, ask).items
    tokens = TokenCounter()

    def shown(items: Sequence[MemoryItem], order: str) -> tuple[str, ...]:
        return render_context(items, tokens, budget=10_000, order=order).turn_ids

    assert shown(alone, "rank") == ("D1:1", "D1:2", "D2:1", "D2:3", "D2:2", "D1:3")
    assert shown(fused, CAST.context_order) == ("D1:1", "D1:2", "D1:3", "D2:1", "D2:3", "D2:2")
    in_time = ("D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3")
    assert shown(fused, "time") == shown(alone, "time") == in_time


# -- The LLM path ----------------------------------------------------------------------------------


def canned_reply(request: LLMRequest) -> str:
    """OpenIE replies: good for the Gina message, garbage otherwise; summaries: garbage first,
    good on the retry."""
    prompt = request.messages[0]["content"]
    if prompt.startswith("Here is a question"):
        text = json.dumps({"persons": ["Gina", "Zed"], "times": [], "places": []})
    elif prompt.startswith("You filter facts"):
        lines = [line for line in prompt.splitlines() if line.startswith('["')]
        team = [json.loads(line) for line in lines if "team" in line]
        # First an invented fact (rejected), then the candidates about the team.
        text = json.dumps(
            {"facts": team if len(request.messages) > 1 else [["Zed", "likes", "cats"]]}
        )
    elif prompt.startswith("Here is a scene"):
        text = (
            '{"summary": "Caroline tells Melanie about Gina winning."}'
            if len(request.messages) > 1
            else "{not json"
        )
    elif "Gina told me" in prompt:
        text = json.dumps(
            {
                "persons": ["Gina"],
                "location": "Mars",  # not in the message: dropped
                "triples": [["Gina", "won", "first place"], ["team", "won", "Mars"]],
            }
        )
    else:
        text = "I cannot help with that."
    return text


def canned() -> RuleProvider:
    """The canned replies from ``fake:canned``: 30 prompt, 10 completion tokens each."""
    return RuleProvider(canned_reply, name="canned", tokens=(30, 10))


def test_llm_path_with_a_fake_backbone(embedder: Embedder, nlp: NLP) -> None:
    backbone = make_backbone(canned())  # type: ignore[arg-type]
    services = Services(embedder=embedder, tokens=None, backbone=backbone, nlp=nlp)  # type: ignore[arg-type]
    cast = CAST(services, extraction="llm")
    assert cast.uses_llm
    memory = cast.construct(conversation())
    openie, summaries = memory.report["llm"]["openie"], memory.report["llm"]["summaries"]
    assert openie["units"] == 6 and openie["accepted_first"] == 1
    assert openie["fallbacks"] == 5 and openie["problems"] == {"bad_json": 10}
    assert summaries["units"] == len(memory.scenes) == summaries["accepted_retry"]
    assert {s.summary_source for s in memory.scenes} == {"llm"}
    relation = [
        (memory.graph.nodes[a]["text"], memory.graph.nodes[b]["text"])
        for a, b, kind in memory.graph.edges(data="kind")
        if kind == "relation"
    ]
    assert ("Gina", "first place") in relation or ("first place", "Gina") in relation
    assert not any("Mars" in pair for pair in relation)  # ungrounded triple dropped
    assert "Gina" in memory.characters()
    assert {m["location"] for m in memory.messages} == {None}  # "Mars" is not in the message


def test_construction_is_the_same_at_any_concurrency(embedder: Embedder, nlp: NLP) -> None:
    def construct(backbone: Backbone) -> dict[str, Any]:
        services = Services(embedder=embedder, tokens=None, backbone=backbone, nlp=nlp)  # type: ignore[arg-type]
        cast = CAST(services, extraction="llm")
        return cast.dump_memory(cast.construct(conversation()))

    assert_concurrency_changes_nothing(construct, canned)


def test_llm_query_analysis_and_recognition_filter(embedder: Embedder, nlp: NLP) -> None:
    provider = canned()
    backbone = make_backbone(provider)  # type: ignore[arg-type]
    services = Services(embedder=embedder, tokens=None, backbone=backbone, nlp=nlp)  # type: ignore[arg-type]
    lite_memory = system(embedder, nlp).construct(conversation())
    cast = CAST(services, query_analysis="llm", query_linking="triples")
    ask = question("What did Gina's team win?")
    cast.prepare_queries([ask])
    cast.prepare_retrieval(lite_memory, [ask])
    analysis = cast._queries[ask.question]
    assert analysis.source == "llm" and analysis.persons == ("Gina",)  # "Zed" is not in it
    assert cast.query_report.accepted_first == 1
    assert cast.filter_report.units == 1 and cast.filter_report.accepted_retry == 1
    asked = len(provider.requests)
    retrieval = cast.retrieve(lite_memory, ask)
    assert len(provider.requests) == asked  # the batch's filter verdict is reused
    assert retrieval.items[0].turn_ids == ("D1:1",)
    kept = cast._kept_facts[next(iter(cast._kept_facts))]
    index = lite_memory.semantic_index(cast)
    vector = embedder.encode([ask.question])[0]
    candidates = index.candidate_facts(vector, cast.search.link_top_k)
    assert kept and all("team" in index.facts[candidates[i][0]] for i in kept)
    assert len(kept) < len(candidates)  # the filter dropped the facts not about the team


@pytest.mark.slow
@pytest.mark.timeout(1800)  # SmolLM2 on 2 shared cores: up to 16 calls of several seconds
def test_llm_mode_with_the_embedded_backbone(tmp_path: Path, embedder: Embedder, nlp: NLP) -> None:
    services, accounting = embedded_llm_services(tmp_path / "llm.sqlite", embedder, nlp)
    tiny = tiny_fixture()
    cast = CAST(services, extraction="llm", query_analysis="llm", query_linking="triples",
                reader_depth="top_k")  # fmt: skip
    memory = cast.load_memory(json.loads(json.dumps(cast.dump_memory(cast.construct(tiny)))))
    openie, summaries = memory.report["llm"]["openie"], memory.report["llm"]["summaries"]
    assert openie["units"] == len(tiny.turns) == 8
    assert openie["accepted_first"] + openie["accepted_retry"] + openie["fallbacks"] == 8
    assert summaries["units"] == len(memory.scenes) > 0
    calls = openie["calls"] + summaries["calls"]
    assert accounting.summary()["total"]["calls"] == calls
    retrieval = cast.retrieve(memory, tiny.questions[0])
    assert 0 < len(retrieval.items) <= 5
    assert all(item.turn_ids and item.timestamp for item in retrieval.items)
    assert cast.query_report.units == 1 and cast.filter_report.units <= 1
