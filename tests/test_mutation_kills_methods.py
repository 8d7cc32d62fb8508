"""The paper methods' orderings and thresholds on hand-made scores: CAST's fusions by name,
ES-Mem's anchors (ties, negative similarities, the order past the activated events), FraCom's
Eq. 5 (best node per proposition, scores under 1, the order past θ, ties), and SeCom's ranked
segments with their scores. Written for ``make mutation`` (docs/development.md): each test pins
a value a mutant would change."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pytest

from memsys.methods.cast.retrieval import combine, insert_at_slot, union
from memsys.methods.esmem.retrieval import rank_events, rank_flat, rank_rest
from memsys.methods.fracom.retrieval import (
    RetrievalOptions,
    filter_by_predicate,
    match_arguments,
    order,
    plausible_retrieval,
    rank_every,
)
from memsys.methods.secom.retrieval import rank_segments
from memsys.types import MemoryItem

#: A mutant that loops forever fails here in seconds, not at mutmut's CPU limit.
pytestmark = pytest.mark.timeout(10)

# -- CAST ----------------------------------------------------------------------------------------


def test_each_fusion_is_chosen_by_its_name() -> None:
    semantic, episodic = ["a", "b", "c", "d"], ["x", "c"]
    assert combine("slot3", semantic, episodic, k=4) == insert_at_slot(semantic, episodic, 4)
    assert combine("slot3", semantic, episodic, k=4) == ["a", "b", "x", "c"]
    assert combine("union", semantic, episodic, k=4) == union(semantic, episodic)
    assert combine("union", semantic, episodic, k=4) == ["c", "a", "b", "d", "x"]
    assert combine("rerank", semantic, episodic, k=4) == ["c", "a", "b", "d"]


# -- ES-Mem --------------------------------------------------------------------------------------

TIES = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1], dtype=float)


def test_ties_go_to_the_earlier_event_in_flat_retrieval_and_among_anchors() -> None:
    ones = [j for j, value in enumerate(TIES) if value == 1]
    assert [j for j, _ in rank_flat(TIES, top_events=len(ones))] == ones
    anchors = rank_events(TIES, None, anchor_k=3, window=0, alpha=0.0, top_events=3)
    assert anchors == [(ones[0], 1.0), (ones[1], 1.0), (ones[2], 1.0)]


def test_an_event_takes_its_best_anchors_score_even_when_similarities_are_negative() -> None:
    anchors = np.array([-0.2, -0.9, -0.5])
    ranked = rank_events(anchors, None, anchor_k=3, window=1, alpha=0.0, top_events=3)
    assert ranked == [(0, -0.2), (1, -0.2), (2, -0.5)]


def test_an_event_takes_the_higher_scoring_anchor_over_the_nearer_one() -> None:
    anchors = np.array([0.9, 0.3, 0.0])
    ranked = rank_events(anchors, None, anchor_k=2, window=1, alpha=0.0, top_events=3)
    assert ranked == [(0, 0.9), (1, 0.9), (2, 0.3)]


def test_of_equal_anchors_an_event_takes_the_nearer_one() -> None:
    """Events 1 and 2 lie between two anchors of 0.5; each takes the nearer (distance 1), so
    the ties among the four events at 0.5 go by event index alone."""
    anchors = np.array([0.5, 0.0, 0.0, 0.5])
    ranked = rank_events(anchors, None, anchor_k=2, window=2, alpha=0.0, top_events=4)
    assert [j for j, _ in ranked] == [0, 3, 1, 2]


def test_the_order_past_the_activated_events_scores_each_as_its_own_anchor() -> None:
    anchors = np.array([1.0, 0.5, 0.25, 0.75, 0.2])
    summaries = np.array([0.0, 0.5, 0.25, 0.5, 0.9])
    activated = [(0, 0.5), (1, 0.5)]
    rest = rank_rest(anchors, summaries, activated, alpha=0.25)
    assert [j for j, _ in rest] == [3, 4, 2]
    assert [score for _, score in rest] == pytest.approx([0.6875, 0.375, 0.25])
    alone = rank_rest(anchors, None, activated, alpha=0.25)
    assert alone == [(3, 0.75), (2, 0.25), (4, pytest.approx(0.2))]


# -- FraCom --------------------------------------------------------------------------------------


class Encoder:
    """Texts to fixed vectors (unit length or not, as given)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors[text] for text in texts], dtype=float)


class Proposition:
    def __init__(self, position: int) -> None:
        self.position = position


class Memory:
    """A FraCom memory: propositions ``prop:i``, argument and predicate nodes with texts, each
    node's vector from the embedder it is given (as :class:`FraComMemory` encodes them)."""

    def __init__(self, arguments: dict[str, list[int]], predicates: list[str], speakers=()):
        self.graph = nx.Graph()
        self.propositions = [Proposition(position) for position in range(len(predicates))]
        for index, predicate in enumerate(predicates):
            self.graph.add_node(f"prop:{index}", kind="proposition")
            self.graph.add_node(f"pred:{predicate}", kind="predicate", text=predicate)
        for name, members in arguments.items():
            self.graph.add_node(f"arg:{name}", kind="argument", text=name)
            for index in members:
                self.graph.add_edge(f"arg:{name}", f"prop:{index}")
        self.predicates = predicates
        self.speakers = frozenset(f"arg:{name}" for name in speakers)

    def node_vectors(self, kind: str, embedder: Any) -> tuple[list[str], np.ndarray]:
        nodes = [n for n, k in self.graph.nodes(data="kind") if k == kind]
        return nodes, embedder.encode([self.graph.nodes[n]["text"] for n in nodes])

    def speaker_nodes(self) -> frozenset[str]:
        return self.speakers

    def predicate_node(self, index: int) -> str:
        return f"pred:{self.predicates[index]}"


#: Query "dog": cosine 0.9 with "puppy", 0.75 with "hound", 0.5 with "cat"; "eat" and "move".
ENCODER = Encoder(
    {
        "dog": [1.0, 0.0, 0.0],
        "puppy": [0.9, 0.0, 0.0],
        "hound": [0.75, 0.0, 0.0],
        "cat": [0.5, 0.0, 0.0],
        "eat": [0.0, 1.0, 0.0],
        "move": [0.0, 0.0, 1.0],
        "relocate": [0.0, 0.0, 1.0],
    }
)


def fracom_memory(**kwargs: Any) -> Memory:
    # 4 propositions: 0 and 1 reached by puppy and hound, 2 by cat, 3 by nothing
    return Memory(
        {"puppy": [0, 1], "hound": [1], "cat": [2]},
        ["eat", "move", "eat", "move"],
        **kwargs,
    )


def idf(degree: int, total: int = 4) -> float:
    return float(np.log(1 + total / degree))


def test_a_proposition_keeps_its_best_node_whichever_comes_first() -> None:
    memory = Memory({"hound": [0], "puppy": [0, 1]}, ["eat", "move", "eat", "move"])
    found = match_arguments(memory, ["dog"], ENCODER, RetrievalOptions(theta=0.7))  # type: ignore[arg-type]
    # hound (0.75 · idf(1) ≈ 1.21) reaches 0 before puppy (0.9 · idf(2) ≈ 0.99) does
    assert found.scores == pytest.approx({0: 0.75 * idf(1), 1: 0.9 * idf(2)})


def test_a_proposition_scores_its_best_node_per_query_argument() -> None:
    found = match_arguments(fracom_memory(), ["dog"], ENCODER, RetrievalOptions(theta=0.7))  # type: ignore[arg-type]
    # proposition 1 is reached by puppy (0.9 · idf(2)) and hound (0.75 · idf(1)): the best
    assert found.scores == pytest.approx({0: 0.9 * idf(2), 1: max(0.9 * idf(2), 0.75 * idf(1))})
    assert found.scores[1] == pytest.approx(0.75 * idf(1))
    assert found.speaker_only == frozenset()


def test_a_score_under_one_stays_under_one() -> None:
    memory = Memory({"cat": [0]}, ["eat", "move", "move", "move"])
    found = match_arguments(memory, ["dog"], ENCODER, RetrievalOptions(theta=0.1))  # type: ignore[arg-type]
    assert found.scores == pytest.approx({0: 0.5 * idf(1)})
    assert found.scores[0] < 1.0


def test_no_arguments_retrieve_nothing() -> None:
    found = match_arguments(fracom_memory(), [], ENCODER, RetrievalOptions())  # type: ignore[arg-type]
    assert found.scores == {} and found.speaker_only == frozenset()
    assert found.trace(4) == {"theta_set": 0, "theta_set_fraction": 0.0, "speaker_only": 0}


def test_the_ranking_metrics_order_reaches_past_theta() -> None:
    options = RetrievalOptions(theta=0.8)
    memory = fracom_memory()
    assert set(match_arguments(memory, ["dog"], ENCODER, options).scores) == {0, 1}  # type: ignore[arg-type]
    # without the cut: proposition 2 (cat, 0.5 · idf(1) ≈ 0.80) after 1 and 0 (≈ 0.99)
    assert rank_every(memory, ["dog"], ENCODER, options) == [1, 0, 2]  # type: ignore[arg-type]


def test_equal_scores_go_to_the_earlier_proposition() -> None:
    assert order(fracom_memory(), {2: 1.0, 0: 1.0, 1: 2.0}, "idf") == [(1, 2.0), (0, 1.0), (2, 1.0)]  # type: ignore[arg-type]


def test_the_predicate_filter_keeps_speaker_only_members_it_keeps() -> None:
    memory = fracom_memory(speakers=("puppy",))
    options = RetrievalOptions(theta=0.5, predicate_filter=True, predicate_threshold=0.5)
    found = plausible_retrieval(memory, ["dog"], ["eat"], ENCODER, options)  # type: ignore[arg-type]
    # puppy reaches 0 and 1, hound 1, cat 2 (speaker only: 0); the filter keeps "eat": 0 and 2
    assert set(found.scores) == {0, 2}
    assert found.speaker_only == frozenset({0})
    assert found.before_predicate_filter == 3


def test_the_predicate_filter_encodes_the_memorys_predicates_with_its_embedder() -> None:
    kept = filter_by_predicate(fracom_memory(), {0: 1.0, 1: 2.0}, ["relocate"], ENCODER, 0.5)  # type: ignore[arg-type]
    assert kept == {1: 2.0}


# -- SeCom ---------------------------------------------------------------------------------------


class Segment:
    def __init__(self, text: str) -> None:
        self.text = text

    def item(self, score: float) -> MemoryItem:
        return MemoryItem(self.text, (self.text,), None, 0, score)


class Retriever:
    def __init__(self, hits: list[tuple[int, float]]) -> None:
        self.hits = hits
        self.asked: list[tuple[str, int]] = []

    def search(self, question: str, k: int) -> list[tuple[int, float]]:
        self.asked.append((question, k))
        return self.hits[:k]


class SeComMemory:
    def __init__(self) -> None:
        self.segments = [Segment("s0"), Segment("s1"), Segment("s2")]
        self.index = Retriever([(2, 0.9), (0, 0.4), (1, 0.1)])

    def retriever(self, kind: str, services: Any) -> Retriever:
        assert kind == "bm25"
        return self.index


def test_secom_hands_over_its_segments_best_first_with_their_scores() -> None:
    memory = SeComMemory()
    items = rank_segments(memory, "where?", "bm25", None, top_k=None)  # type: ignore[arg-type]
    assert [(item.text, item.score) for item in items] == [("s2", 0.9), ("s0", 0.4), ("s1", 0.1)]
    assert rank_segments(memory, "where?", "bm25", None, top_k=2)[1].score == 0.4  # type: ignore[arg-type]
    assert memory.index.asked == [("where?", 3), ("where?", 2)]
