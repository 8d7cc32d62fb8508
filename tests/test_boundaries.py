"""Boundaries where a silent off-by-one moves a published number: the context budget (exactly
at it, one under, one over), evidence recall and answer coverage scored on the context the
reader got (evidence retrieved but cut by the budget), FraCom's §5 predicate filter at its
threshold and its θ default, and LongMemEval's session level growing k over turn slots."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from run_helpers import compose_config, fixture_overrides, read_records

from benchmarks.answering.context import date_header, render_context
from benchmarks.config.compose import CONF
from benchmarks.metrics.longmemeval_official import Corpus, SessionTurns, score
from benchmarks.pipeline.run import run
from memsys.methods.fracom.method import FraComOptions
from memsys.methods.fracom.retrieval import filter_by_predicate
from memsys.types import MemoryItem


class Words:
    """A token counter that counts whitespace-separated words."""

    def count(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


def item(words: int, rank: int) -> MemoryItem:
    """An undated item of ``words`` words."""
    return MemoryItem(" ".join(["w"] * words), (f"t{rank}",), None, rank)


HEADER = Words().count(date_header(None))  # "[undated]": one word, paid once


@pytest.mark.parametrize(("budget", "words"), [(HEADER + 5, 5), (HEADER + 4, 4), (HEADER + 6, 5)])
def test_an_item_fits_exactly_at_the_budget_and_is_cut_one_token_under(
    budget: int, words: int
) -> None:
    rendered = render_context([item(5, 0)], Words(), budget)
    assert [Words().count(i.text) for i in rendered.items] == [words]
    assert rendered.tokens == HEADER + words <= budget
    assert (rendered.cut is not None) == (words < 5)


def test_an_item_one_token_over_what_is_left_is_cut_to_it_and_ends_the_context() -> None:
    items = [item(5, 0), item(3, 1), item(2, 2)]  # 1 + 5 + 3 = 9 > 8: t1 cut to 2 words
    rendered = render_context(items, Words(), HEADER + 7)
    assert [Words().count(i.text) for i in rendered.items] == [5, 2]
    assert rendered.turn_ids == ("t0",)  # t1's text did not survive whole: not shown
    assert rendered.tokens == HEADER + 7 and rendered.dropped == 1
    assert rendered.cut is not None and rendered.cut.turns_left_out == ("t1",)
    assert (rendered.cut.tokens_kept, rendered.cut.tokens_cut) == (2, 1)


def test_evidence_recall_and_answer_coverage_are_scored_on_the_context_the_reader_got(
    tmp_path: Path,
) -> None:
    """The dog question's evidence turn is retrieved at any budget; at a budget too small for
    any turn it is cut: recall 0 on the reader's context, 1 on everything retrieved."""
    base = [*fixture_overrides(tmp_path / "runs", tmp_path / "cache"), "method=turn_rag_bm25"]
    base += ["answer=none", "method.top_k=10"]
    tight = run(compose_config([*base, "answer.context_budget=3"]))
    roomy = run(compose_config([*base, "answer.context_budget=2048"]))
    records = {
        name: {r["question_id"]: r for r in read_records(Path(summary["run_dir"]))}
        for name, summary in (("tight", tight), ("roomy", roomy))
    }
    dog_tight, dog_roomy = records["tight"]["tiny-1:q0"], records["roomy"]["tiny-1:q0"]
    assert dog_tight["context_tokens"] == 0 and dog_tight["retrieved_turn_ids"] == []
    assert (dog_tight["evidence_recall"], dog_tight["evidence_recall_all_retrieved"]) == (0.0, 1.0)
    assert (dog_roomy["evidence_recall"], dog_roomy["evidence_recall_all_retrieved"]) == (1.0, 1.0)
    assert (dog_tight["answer_coverage"], dog_roomy["answer_coverage"]) == (0.0, 1.0)
    assert tight["evidence_recall"]["mean"] == 0.0 < roomy["evidence_recall"]["mean"]


class Predicates:
    """A FraCom memory of two propositions, predicates ``move`` and ``eat`` (unit vectors)."""

    vectors = np.array([[1.0, 0.0], [0.0, 1.0]])

    def node_vectors(self, kind: str, embedder: object) -> tuple[list[str], np.ndarray]:
        assert kind == "predicate"
        return ["pred:move", "pred:eat"], self.vectors

    def predicate_node(self, index: int) -> str:
        return ["pred:move", "pred:eat"][index]


class Query:
    """An embedder whose query predicate has cosine exactly 0.5 with ``move``, √0.75 with ``eat``."""

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([[0.5, math.sqrt(0.75)]] * len(texts))


@pytest.mark.parametrize(
    ("threshold", "kept"),
    [(0.5, {0, 1}), (math.nextafter(0.5, 1.0), {1}), (math.nextafter(0.5, 0.0), {0, 1})],
)
def test_the_predicate_filter_keeps_a_cosine_exactly_at_its_threshold(
    threshold: float, kept: set[int]
) -> None:
    scores = {0: 1.0, 1: 2.0}
    found = filter_by_predicate(Predicates(), scores, ["relocate"], Query(), threshold)  # type: ignore[arg-type]
    assert set(found) == kept
    assert all(found[index] == scores[index] for index in found)  # scores pass unchanged


def test_fracoms_theta_and_predicate_threshold_defaults_are_the_configs() -> None:
    """The options' own defaults (a method built without the YAML) are the paper's values the
    YAML states: θ = 0.7, the §5 predicate threshold 0.5."""
    yaml = OmegaConf.load(CONF / "method" / "fracom.yaml")
    options = FraComOptions()
    assert (options.theta, options.predicate_threshold) == (0.7, 0.5)
    assert (yaml.theta, yaml.predicate_threshold) == (options.theta, options.predicate_threshold)


def test_session_level_grows_k_over_turn_slots_where_a_fixed_k_would_miss() -> None:
    """Four turns of one session, then the gold one: at k = 3 a fixed cut sees one session
    and misses the gold; the official code grows k until 3 distinct sessions (here: the end of
    the ranking) and finds it."""
    user, assistant = "user", "assistant"
    corpus = Corpus.build(
        "q1",
        [
            SessionTurns("s_b", ((user, None), (assistant, None)) * 3 + ((user, None),)),
            SessionTurns("answer_a", ((user, True),)),
        ],
    )
    found = score(corpus, "turn", ["s_b_1", "s_b_3", "s_b_5", "s_b_7", "answer_a_1"])
    assert found["turn"]["recall_all@3"] == 0.0  # three turn slots, all of s_b
    assert found["session"]["recall_all@3"] == 1.0  # grown past them to the gold session
    assert found["session"]["recall_all@1"] == 0.0  # one session needs one slot: s_b
