"""Full-depth rankings: every LongMemEval method and baseline ranks the whole haystack for the
ranking metrics (never for the reader), records store it, and LongMemEval's own code scores the
stored rankings as the harness does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import registry
from benchmarks.config.compose import compose_config
from benchmarks.metrics.longmemeval_official import Corpus, SessionTurns
from benchmarks.metrics.ranking import OfficialIds, load_corpora, record_scores
from memsys.types import Conversation, MemoryItem, Retrieval, Session, Turn
from scripts.check_longmemeval_parity import (
    as_dataset_id,
    official_corpus,
    official_metrics,
    official_namespace,
    read_items,
)

#: Every method and baseline of the LongMemEval retrieval table.
METHODS = registry.members("retrieval_lme")
QUESTIONS = 6
U = "user"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each method's records on 6 LongMemEval-oracle questions (haystacks of 1 to 6 sessions),
    retrieval only, one shared cache."""
    from benchmarks.pipeline.run import run

    folder = tmp_path_factory.mktemp("full-depth")
    records = {}
    for method in METHODS:
        cfg = compose_config(
            [
                "dataset=longmemeval_oracle",
                "subset=lme12",
                f"subset.max_questions={QUESTIONS}",
                f"method={method}",
                "answer=none",
                f"results_dir={folder / 'runs'}",
                f"cache_dir={folder / 'cache'}",
                "progress=false",
            ]
        )
        summary = run(cfg)
        lines = (Path(summary["run_dir"]) / "predictions.jsonl").read_text().splitlines()
        records[method] = [json.loads(line) for line in lines]
    return records


def test_the_table_has_every_kind_of_method() -> None:
    assert {"full_history", "turn_rag_dense", "session_rag_bm25", "cast", "hingemem"} <= set(
        METHODS
    )


@pytest.mark.parametrize("method", METHODS)
def test_recall_at_50_is_1_on_haystacks_of_at_most_50_sessions(
    runs: dict[str, list[dict[str, Any]]], method: str
) -> None:
    records = runs[method]
    corpora = load_corpora("oracle", (r["question_id"] for r in records))
    scored = 0
    for record in records:
        ranking = record["ranking"]
        assert ranking["complete"] is True
        assert len(ranking["session"]) <= 50
        found = record_scores(record, corpora[record["question_id"]])
        if found is None:  # an _abs question: the definition skips it
            continue
        scored += 1
        assert found["session"]["recall_any@50"] == 1.0, (method, record["question_id"])
        assert found["session"]["recall_all@50"] == 1.0, (method, record["question_id"])
        if len(ranking["turn"]) <= 50:  # every user turn within the cut-off
            assert found["turn"]["recall_all@50"] == 1.0, (method, record["question_id"])
    assert scored >= QUESTIONS - 2


def test_the_official_code_scores_each_method_s_own_rankings_as_the_harness_does(
    runs: dict[str, list[dict[str, Any]]],
) -> None:
    """LongMemEval's eval_utils, run as it stands on each stored ranking (every user turn of the
    haystack, so a permutation of its turn corpus): every value equal, bit for bit."""
    ns = official_namespace()
    items = {item["question_id"]: item for item in read_items("oracle", 10_000, seed=0)}
    compared = 0
    for method, records in runs.items():
        corpora = load_corpora("oracle", (r["question_id"] for r in records))
        for record in records:
            ours = record_scores(record, corpora[record["question_id"]])
            if ours is None:
                continue
            corpus_ids = official_corpus(items[record["question_id"]], "turn", ns)
            position = {as_dataset_id(doc): i for i, doc in enumerate(corpus_ids)}
            order = [position[turn] for turn in record["ranking"]["turn"]]
            assert sorted(order) == list(range(len(corpus_ids))), method  # the whole corpus
            theirs = official_metrics(corpus_ids, order, "turn", ns)
            for level, metrics in theirs.items():
                for name, value in metrics.items():
                    assert ours[level][name] == value, (method, record["question_id"], name)
                    compared += 1
    assert compared > 500


def conversation() -> Conversation:
    """Two sessions of a user turn and a reply each."""

    def session(name: str) -> Session:
        turns = tuple(
            Turn(f"{name}:{i}", name, i, speaker, f"{speaker} says {i}")
            for i, speaker in enumerate(("user", "assistant"))
        )
        return Session(name, None, "", turns)

    return Conversation("q", (session("s1"), session("answer_2")), ())


def item(turn_id: str) -> MemoryItem:
    return MemoryItem("text", (turn_id,))


def test_a_ranking_is_closed_in_conversation_order_only_when_the_method_ranks_below_its_items() -> (
    None
):
    ids = OfficialIds.of(conversation())
    deep = ids.rankings(Retrieval((item("answer_2:0"),), ranking=()))
    assert deep == {
        "turn": ["answer_2_1", "s1_1"],
        "session": ["answer_2", "s1"],
        "complete": True,
        "method_turns": 1,  # s1's turn closes the ranking, the method did not rank it
    }
    shallow = ids.rankings(Retrieval((item("answer_2:0"),)))
    assert shallow == {
        "turn": ["answer_2_1"],
        "session": ["answer_2"],
        "complete": False,
        "method_turns": 1,
    }
    ranked = ids.rankings(Retrieval((item("answer_2:1"),), ranking=("s1:0", "answer_2:0")))
    assert ranked["turn"] == ["s1_1", "answer_2_1"] and ranked["method_turns"] == 2


def test_an_incomplete_ranking_decides_only_what_its_depth_holds() -> None:
    """A record logged before full-depth rankings (no ``complete``): a cut-off deeper than its
    ranking and an MRR that found nothing are left out, never given the depth's value."""
    corpus = Corpus.build(
        "q1", [SessionTurns("s_a", ((U, None),)), SessionTurns("answer_b", ((U, True),))]
    )
    missed = record_scores({"ranking": {"turn": ["s_a_1"], "session": ["s_a"]}}, corpus)
    assert missed is not None
    assert set(missed["turn"]) == {"recall_any@1", "recall_all@1", "ndcg_any@1"}
    assert missed["turn"]["recall_all@1"] == 0.0
    hit = record_scores({"ranking": {"turn": ["answer_b_1"], "session": ["answer_b"]}}, corpus)
    assert hit is not None and hit["session"]["mrr"] == 1.0 and "recall_all@5" not in hit["session"]
    complete = {"turn": ["s_a_1", "answer_b_1"], "session": ["s_a", "answer_b"], "complete": True}
    full = record_scores({"ranking": complete}, corpus)
    assert full is not None and full["session"]["recall_all@50"] == 1.0
    assert full["turn"]["mrr"] == 0.5
