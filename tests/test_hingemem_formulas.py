"""HingeMem's formulas on hand-computed cases: salience, Jaccard merging, the adaptive stop, the
topic term, the extraction grammar, identifiers and relative times, rule-based query analysis."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pytest
from fakes.hingemem import DAY1, DAY2, hashing_services

from memsys.base import Services
from memsys.methods.hingemem.lite import resolve_expression
from memsys.methods.hingemem.memory import (
    Hyperedge,
    Node,
    compute_salience,
    jaccard,
    merge_hyperedges,
    normalize_name,
    time_key,
)
from memsys.methods.hingemem.prompts import BOUNDARY_SCHEMA, constrained
from memsys.methods.hingemem.rerank import TopicContrast, priority_weights
from memsys.methods.hingemem.retrieval import adaptive_stop, analyse_rules
from memsys.nlp import NLP


@pytest.fixture(scope="module")
def services(nlp: NLP) -> Services:
    return hashing_services(nlp)


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
