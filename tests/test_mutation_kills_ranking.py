"""LongMemEval's stored rankings on hand-made conversations (``benchmarks.metrics.ranking``): what
a record keeps (user turns in official ids, sessions by dataset id, the 50-session cap, the
method's own depth), when an incomplete ranking decides a metric, and the scorer's lines. Written
for ``make mutation`` (docs/development.md): each test pins a value a mutant would change."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.metrics.jsonl import InputError
from benchmarks.metrics.longmemeval_official import Corpus, SessionTurns, score
from benchmarks.metrics.ranking import (
    STORED_SESSIONS,
    OfficialIds,
    RankingLine,
    corpus_of,
    decided,
    official_turn_id,
    record_scores,
    score_lines,
    stored_turn_ranking,
)
from memsys.types import Conversation, MemoryItem, Retrieval, Session, Turn

#: A mutant that loops forever fails here in seconds, not at mutmut's CPU limit.
pytestmark = pytest.mark.timeout(10)


def conversation(*sessions: tuple[str, tuple[tuple[str, bool | None], ...]]) -> Conversation:
    """Sessions ``(session_id, ((speaker, has_answer), ...))``; turn ids ``D<i>:<j>``."""
    built = []
    for i, (sid, turns) in enumerate(sessions, 1):
        built.append(
            Session(
                sid,
                None,
                "",
                tuple(
                    Turn(f"D{i}:{j}", sid, j - 1, speaker, "text", None, None, has_answer)
                    for j, (speaker, has_answer) in enumerate(turns, 1)
                ),
            )
        )
    return Conversation("q1", tuple(built), ())


SMALL = conversation(
    ("s1", (("user", False), ("assistant", None), ("user", False))),
    ("answer_s2#1", (("user", True), ("assistant", None))),
)


def retrieval(*turns: str, ranking: tuple[str, ...] | None = None) -> Retrieval:
    return Retrieval(tuple(MemoryItem("x", (turn,)) for turn in turns), None, ranking)


def test_official_turn_ids_drop_the_copy_mark_and_count_from_one() -> None:
    turn = SMALL.sessions[1].turns[0]
    assert official_turn_id(turn) == "answer_s2_1"
    assert official_turn_id(SMALL.sessions[0].turns[2]) == "s1_3"


def test_the_corpus_of_a_conversation_is_the_official_build_of_its_sessions() -> None:
    expected = Corpus.build(
        "q1",
        [
            SessionTurns("s1", (("user", False), ("assistant", None), ("user", False))),
            SessionTurns("answer_s2", (("user", True), ("assistant", None))),
        ],
    )
    assert corpus_of(SMALL) == expected
    assert corpus_of(SMALL).skipped is None


def test_an_incomplete_ranking_keeps_the_methods_user_turns_only() -> None:
    ids = OfficialIds.of(SMALL)
    assert ids.user_turns == {"D1:1": "s1_1", "D1:3": "s1_3", "D2:1": "answer_s2_1"}
    assert ids.sessions["D2:2"] == "answer_s2#1"
    stored = ids.rankings(retrieval("D2:1", "X:9", "D1:2"))
    assert stored == {
        "turn": ["answer_s2_1"],
        "session": ["answer_s2", "s1"],
        "complete": False,
        "method_turns": 1,
    }


def test_a_complete_ranking_is_closed_by_every_other_turn_in_conversation_order() -> None:
    stored = OfficialIds.of(SMALL).rankings(retrieval("D2:1", "D1:2", ranking=()))
    assert stored == {
        "turn": ["answer_s2_1", "s1_1", "s1_3"],
        "session": ["answer_s2", "s1"],
        "complete": True,
        "method_turns": 1,
    }


def test_method_turns_counts_the_user_turns_the_method_ranked_itself() -> None:
    stored = OfficialIds.of(SMALL).rankings(retrieval("D1:3", "D1:1", ranking=()))
    assert stored["turn"] == ["s1_3", "s1_1", "answer_s2_1"]
    assert stored["method_turns"] == 2


def test_a_stored_ranking_stops_before_the_51st_distinct_session() -> None:
    sessions = [(f"s{i}", (("user", i == 0), ("user", False))) for i in range(STORED_SESSIONS + 2)]
    many = conversation(*sessions)
    firsts = [f"D{i}:1" for i in range(1, STORED_SESSIONS + 3)]
    stored = OfficialIds.of(many).rankings(retrieval(*firsts, ranking=()))
    assert STORED_SESSIONS == 50
    assert stored["turn"] == [f"s{i}_1" for i in range(STORED_SESSIONS)]
    assert stored["session"] == [f"s{i}" for i in range(STORED_SESSIONS)]
    assert stored["method_turns"] == STORED_SESSIONS


def test_a_stored_ranking_keeps_later_turns_of_sessions_it_already_covers() -> None:
    sessions = [(f"s{i}", (("user", i == 0), ("user", False))) for i in range(STORED_SESSIONS)]
    many = conversation(*sessions)
    order = [f"D{i}:1" for i in range(1, STORED_SESSIONS + 1)] + ["D1:2", "D2:2"]
    stored = OfficialIds.of(many).rankings(retrieval(*order))
    assert stored["turn"][-2:] == ["s0_2", "s1_2"]
    assert len(stored["turn"]) == STORED_SESSIONS + 2


def test_stored_turn_ranking_reads_only_a_list_under_ranking_turn() -> None:
    assert stored_turn_ranking({"ranking": {"turn": ["a_1"]}}) == ["a_1"]
    assert stored_turn_ranking({"ranking": {"turn": "a_1"}}) is None
    assert stored_turn_ranking({"ranking": {"recall_any@5": 1.0}}) is None
    assert stored_turn_ranking({"ranking": 0.5}) is None
    assert stored_turn_ranking({}) is None


CORPUS = Corpus.build(
    "q1",
    [
        SessionTurns("s1", (("user", False), ("user", False))),
        SessionTurns("answer_a", (("user", True),)),
    ],
)


def test_a_complete_record_scores_every_metric_of_its_ranking() -> None:
    turns = ["s1_1", "answer_a_1", "s1_2"]
    record = {"ranking": {"turn": turns, "complete": True}}
    assert record_scores(record, CORPUS) == score(CORPUS, "turn", turns)


def test_an_incomplete_record_keeps_only_the_metrics_its_depth_decides() -> None:
    turns = ["s1_1", "answer_a_1"]
    found = record_scores({"ranking": {"turn": turns, "complete": False}}, CORPUS)
    assert found is not None
    full = score(CORPUS, "turn", turns)
    assert found["turn"] == {
        name: value for name, value in full["turn"].items() if decided(name, value, 2)
    }
    assert "recall_any@1" in found["turn"] and "recall_any@3" not in found["turn"]
    assert found["turn"]["mrr"] == 0.5
    # two distinct sessions deep at the session level
    assert "recall_any@3" not in found["session"] and found["session"]["recall_any@1"] == 0.0
    assert found["session"].keys() == {
        name for name, value in full["session"].items() if decided(name, value, 2)
    }


def test_a_skipped_question_or_a_record_without_a_ranking_scores_nothing() -> None:
    record = {"ranking": {"turn": ["s1_1"], "complete": True}}
    skipped = Corpus.build("q1_abs", [SessionTurns("answer_a", (("user", True),))])
    assert record_scores(record, skipped) is None
    assert record_scores({"ranking": {"recall_any@5": 1.0}}, CORPUS) is None


@pytest.mark.parametrize(
    ("metric", "value", "depth", "expected"),
    [
        ("recall_all@5", 0.0, 5, True),
        ("recall_all@5", 1.0, 4, False),
        ("ndcg_any@10", 0.3, 11, True),
        ("mrr", 0.0, 50, False),
        ("mrr", 0.25, 1, True),
    ],
)
def test_decided_at_the_depth_exactly(
    metric: str, value: float, depth: int, expected: bool
) -> None:
    assert decided(metric, value, depth) is expected


def test_score_lines_scores_skips_and_names_the_bad_line() -> None:
    corpora = {"q1": CORPUS, "q2_abs": Corpus.build("q2_abs", [])}
    lines = [
        RankingLine(1, "q1", "turn", ("answer_a_1",)),
        RankingLine(2, "q2_abs", "session", ()),
    ]
    out = score_lines(Path("r.jsonl"), lines, corpora)
    assert out[0] == {
        "question_id": "q1",
        "granularity": "turn",
        **score(CORPUS, "turn", ["answer_a_1"]),
    }
    assert out[1] == {"question_id": "q2_abs", "skipped": corpora["q2_abs"].skipped}
    with pytest.raises(InputError, match=r"^r\.jsonl:3: question 'q9' is not in the dataset$"):
        score_lines(Path("r.jsonl"), [RankingLine(3, "q9", "turn", ())], corpora)
    with pytest.raises(InputError, match=r"^r\.jsonl:4: .*nowhere_1") as raised:
        score_lines(Path("r.jsonl"), [RankingLine(4, "q1", "turn", ("nowhere_1",))], corpora)
    assert raised.value.line == 4
