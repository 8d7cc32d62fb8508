"""HingeMem's routing and stop rule on hand-made values: what each constrained element matches in
a hand-built memory (persons by identifier, name part or prefix; locations and topics exactly or
by cosine at the threshold; times by overlap, undated hyperedges by their day), the candidate
rules, and the adaptive stop exactly at each ratio, drop and temperature. Written for ``make
mutation`` (docs/development.md): each test pins a value a mutant would change."""

from __future__ import annotations

import math
from datetime import datetime
from typing import ClassVar

import numpy as np
import pytest

from memsys.methods.hingemem.memory import Hyperedge, LongTermMemory, Node
from memsys.methods.hingemem.retrieval import (
    QueryPlan,
    RetrievalIndex,
    Routes,
    _overlaps,
    adaptive_stop,
    candidate_set,
    person_matches,
)

TOLERANCE = 1e-9

#: A mutant that loops forever fails here in seconds, not at mutmut's CPU limit.
pytestmark = pytest.mark.timeout(10)


# -- the adaptive stop ---------------------------------------------------------------------------


def test_a_non_positive_best_score_keeps_only_the_best() -> None:
    assert adaptive_stop([0.0, 0.0], "precision") == 1
    assert adaptive_stop([0.0, 0.0, 0.0], "judgement") == 1


def test_recall_keeps_the_best_alone_when_the_next_is_under_the_ratio() -> None:
    assert adaptive_stop([1.0, 0.4], "recall") == 1
    assert adaptive_stop([1.0, 0.95, 0.3], "recall") == 2


def test_recall_keeps_a_score_exactly_at_the_ratio_within_tolerance() -> None:
    at = 0.5 * 1.0 - TOLERANCE
    assert adaptive_stop([1.0, at], "recall", delta=1.0) == 2
    assert adaptive_stop([1.0, np.nextafter(at, 0.0)], "recall", delta=1.0) == 1


def test_recall_keeps_a_drop_exactly_at_delta_within_tolerance() -> None:
    # a drop equal, as computed, to delta + tolerance; then one a hair larger
    top, delta = 0.75, 0.25
    drop = delta + TOLERANCE
    assert top - (top - drop) == drop
    assert adaptive_stop([top, top - drop], "recall", delta=delta) == 2
    assert adaptive_stop([top, np.nextafter(top - drop, 0.0)], "recall", delta=delta) == 1


def test_precision_and_judgement_keep_a_score_exactly_at_their_floor() -> None:
    at = 0.8 * 1.0 - TOLERANCE
    assert adaptive_stop([1.0, at], "precision") == 2
    assert adaptive_stop([1.0, np.nextafter(at, 0.0)], "precision") == 1
    floor = (1.0 + 1.0 * math.log(0.8)) - TOLERANCE
    assert adaptive_stop([1.0, floor], "judgement") == 2
    assert adaptive_stop([1.0, np.nextafter(floor, 0.0)], "judgement") == 1


def test_an_unknown_query_type_is_named() -> None:
    with pytest.raises(ValueError, match=r"^query type must be one of .*got 'lookup'$"):
        adaptive_stop([1.0], "lookup")


# -- what to retrieve ----------------------------------------------------------------------------


def test_half_open_intervals_that_only_touch_do_not_overlap() -> None:
    may, june, july = datetime(2023, 5, 1), datetime(2023, 6, 1), datetime(2023, 7, 1)
    assert _overlaps((may, june), [(june, july)]) is False
    assert _overlaps((june, july), [(may, june)]) is False
    assert _overlaps((may, june), [(datetime(2024, 1, 1), datetime(2024, 2, 1))]) is False
    assert _overlaps((may, july), [(june, july)]) is True


def test_bonus_keeps_the_semantic_candidates_and_union_adds_every_holder() -> None:
    routes = Routes({}, {"time": {1, 2}, "person": {2, 3}})
    assert candidate_set("bonus", {0, 1}, routes, ["time"]) == ({0, 1}, {1, 2, 3})
    assert candidate_set("union", {0, 1}, routes, ["time"]) == ({0, 1, 2, 3}, {1, 2, 3})


def test_person_names_match_by_identifier_words_or_a_three_letter_prefix() -> None:
    people = ["melanie", "dr carla smith", "carla smith", "me"]
    assert person_matches("carla smith", people) == ["dr carla smith", "carla smith"]
    assert person_matches("smith carla", people) == ["dr carla smith", "carla smith"]
    assert person_matches("mel", people) == ["melanie"]
    assert person_matches("me", people) == ["me"]  # two letters: equal only, no prefix
    assert person_matches("car smi", people) == []  # prefixes of one word only


class Encoder:
    """Names to fixed vectors; an unknown text (a description) to zeros."""

    vectors: ClassVar[dict[str, list[float]]] = {
        "Paris": [0.0, 1.0, 0.0],
        "Lyon": [1.0, 0.0, 0.0],
        "France": [0.75, 0.0, 0.0],  # cosine with Lyon exactly 0.75, with Paris 0
        "pottery": [0.0, 0.0, 1.0],
        "clay": [0.0, 0.0, 0.8],
        "dogs": [0.0, 1.0, 0.0],
        "pottery class": [0.0, 0.0, 1.0],
        "Dogs": [1.0, 0.0, 0.0],
    }

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors.get(t, [0.0, 0.0, 0.0]) for t in texts]).reshape(-1, 3)


def node(uid: str, name: str, granularity: str | None = None) -> Node:
    element, key = uid.split(":", 1)
    return Node(element, key, name, granularity)


def edge(position: int, nodes: dict[str, list[str]], when: datetime | None = None) -> Hyperedge:
    return Hyperedge(nodes, f"edge {position}", [], [f"t{position}"], when, position, ["s"])


MEMORY = LongTermMemory(
    {
        n.element + ":" + n.key: n
        for n in [
            node("person:melanie", "Melanie"),
            node("person:caroline", "Caroline"),
            node("location:paris", "Paris"),
            node("location:lyon", "Lyon"),
            node("topic:pottery", "pottery"),
            node("topic:dogs", "dogs"),
            node("topic:clay", "clay"),  # held by no hyperedge
            node("time:2023-05-08", "8 May", "day"),
            node("time:2023-06", "June", "month"),
        ]
    },
    [
        edge(0, {"person": ["melanie"], "topic": ["pottery"], "time": ["2023-05-08"]}),
        edge(1, {"person": ["caroline"], "location": ["paris"]}, datetime(2023, 7, 1)),
        edge(2, {"location": ["lyon"], "topic": ["dogs"]}, datetime(2023, 5, 25)),
        edge(3, {"topic": ["dogs"], "time": ["2023-06"]}),
    ],
)


def test_each_element_matches_its_nodes_and_reaches_their_hyperedges() -> None:
    plan = QueryPlan(
        "precision",
        {"person": ("Dr. Mel",), "location": ("France",), "topic": ("pottery class", "Dogs")},
        ((datetime(2023, 5, 20), "month"),),
        (),
    )
    routes = RetrievalIndex(MEMORY, Encoder()).match(plan, 0.75)  # type: ignore[arg-type]
    assert routes.nodes == {
        "person": {"person:melanie"},
        "location": {"location:lyon"},  # cosine exactly 0.75
        "topic": {"topic:dogs", "topic:pottery", "topic:clay"},  # dogs by its identifier
        "time": {"time:2023-05-08"},  # May overlaps the 8th; not June
    }
    assert routes.edges == {
        "person": {0},
        "location": {2},
        "topic": {0, 2, 3},
        "time": {0, 2},  # edge 2 has no time node: its day, 25 May, is in May
    }


def test_a_plan_naming_topics_only_matches_topics_only() -> None:
    plan = QueryPlan("recall", {"topic": ("pottery class",)}, (), ())
    routes = RetrievalIndex(MEMORY, Encoder()).match(plan, 0.9)  # type: ignore[arg-type]
    assert routes.nodes["topic"] == {"topic:pottery"}
    assert routes.all_edges() == {0}
    assert routes.nodes["person"] == routes.nodes["time"] == set()


def test_a_day_query_does_not_reach_a_day_outside_it() -> None:
    plan = QueryPlan("recall", {}, ((datetime(2023, 5, 9), "day"),), ())
    routes = RetrievalIndex(MEMORY, Encoder()).match(plan, 0.9)  # type: ignore[arg-type]
    assert routes.nodes["time"] == set() and routes.edges["time"] == set()


def test_the_node_match_score_sums_the_weights_of_the_elements_that_reach_a_hyperedge() -> None:
    index = RetrievalIndex(MEMORY, Encoder())  # type: ignore[arg-type]
    routes = Routes({}, {"person": {0, 2}, "topic": {0, 3}, "time": {1}, "location": set()})
    scores = index.match_scores(routes, {"person": 0.5, "topic": 0.25, "location": 1.0})
    assert scores.tolist() == [0.75, 0.0, 0.5, 0.25]  # time has no weight: edge 1 gets nothing
