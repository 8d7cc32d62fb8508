"""LongMemEval's official retrieval definition: hand-computed cases for every rule, then parity
of the scorer CLI with the official code itself (``data/evaluators/longmemeval/``) on random,
near-perfect and truncated rankings of real questions."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.data.longmemeval import iter_longmemeval
from benchmarks.metrics.longmemeval_official import (
    CUTOFFS,
    SKIP_ABSTENTION,
    SKIP_NO_TARGET,
    Corpus,
    RankingError,
    SessionTurns,
    score,
)
from benchmarks.metrics.ranking import official_turn_id
from scripts.check_longmemeval_parity import check

U, A = "user", "assistant"

# answer_a: a gold user turn, an assistant turn, a user turn without the answer (-> noans);
# s_b: a filler session with two user turns; answer_c: the answer only on the assistant side
# (the whole session is relabelled noans_c).
HAYSTACK = [
    SessionTurns("answer_a", ((U, True), (A, None), (U, False))),
    SessionTurns("s_b", ((U, None), (A, None), (U, None))),
    SessionTurns("answer_c", ((U, False), (A, True))),
]


def corpus(question_id: str = "q1", sessions: list[SessionTurns] = HAYSTACK) -> Corpus:
    return Corpus.build(question_id, sessions)


def test_the_corpus_holds_user_turns_relabelled_and_gold_is_what_still_says_answer() -> None:
    built = corpus()
    assert built.turns.ids == ("answer_a_1", "noans_a_3", "s_b_1", "s_b_3", "noans_c_1")
    assert built.turns.gold == {"answer_a_1"}
    assert built.sessions.ids == ("answer_a", "s_b", "noans_c")
    assert built.sessions.gold == {"answer_a"}
    assert built.skipped is None


def test_a_noans_turn_does_not_find_its_session() -> None:
    # The project's former definition counted any turn of an answer session.
    found = score(corpus(), "turn", ["answer_a_3", "s_b_1", "answer_a_1"])
    assert [found["session"][f"recall_any@{k}"] for k in (1, 3)] == [0.0, 1.0]
    assert found["turn"]["recall_any@1"] == 0.0
    assert found["turn"]["mrr"] == pytest.approx(1 / 3)
    assert found["session"]["mrr"] == pytest.approx(1 / 3)  # noans_a, s_b, answer_a


def test_session_metrics_grow_k_over_turn_slots_until_k_sessions() -> None:
    found = score(corpus(), "turn", ["s_b_1", "s_b_3", "answer_a_1"])
    # k=1: one slot, one session (s_b). k=2: s_b twice covers one session -> 3 slots.
    assert found["session"]["recall_any@1"] == 0.0
    assert found["session"]["recall_all@3"] == 1.0
    # nDCG@3 over the 3 turn slots: relevances 0, 0, 1 -> (1/log2 3) / ideal 1.
    assert found["session"]["ndcg_any@3"] == pytest.approx(1 / math.log2(3))
    assert found["session"]["mrr"] == pytest.approx(1 / 2)


def test_a_session_ranking_is_scored_against_the_session_corpus() -> None:
    found = score(corpus(), "session", ["s_b", "answer_a"])
    assert set(found) == {"session"}
    assert found["session"]["recall_any@1"] == 0.0
    assert found["session"]["recall_all@3"] == 1.0
    assert found["session"]["ndcg_any@3"] == pytest.approx(1.0)  # rank 2 undiscounted


def test_assistant_turns_are_not_in_the_corpus_and_unknown_ids_are_refused() -> None:
    assert score(corpus(), "turn", ["answer_a_2", "answer_a_1"])["turn"]["recall_any@1"] == 1.0
    with pytest.raises(RankingError, match="not in the question's haystack"):
        score(corpus(), "turn", ["answer_a_9"])
    with pytest.raises(RankingError, match="more often"):
        score(corpus(), "turn", ["s_b_1", "s_b_1"])


def test_the_relabelled_form_of_an_id_is_accepted() -> None:
    assert score(corpus(), "turn", ["noans_a_3"]) == score(corpus(), "turn", ["answer_a_3"])


@pytest.mark.parametrize(
    ("question_id", "sessions", "reason"),
    [
        ("q_abs", HAYSTACK, SKIP_ABSTENTION),
        ("q2", [HAYSTACK[1], HAYSTACK[2]], SKIP_NO_TARGET),  # the answer is assistant-side only
    ],
)
def test_the_skip_rule(question_id: str, sessions: list[SessionTurns], reason: str) -> None:
    assert corpus(question_id, sessions).skipped == reason


def test_a_repeated_session_is_two_corpus_entries_under_one_id() -> None:
    gold = SessionTurns("answer_d", ((U, True),))
    built = corpus("q3", [gold, HAYSTACK[1], gold])
    assert built.turns.ids.count("answer_d_1") == 2
    once = score(built, "session", ["answer_d"])["session"]
    twice = score(built, "session", ["answer_d", "answer_d"])["session"]
    # Two relevant entries: the ideal DCG@2 is 1 + 1/log2(2) = 2.
    assert once["ndcg_any@3"] == pytest.approx(0.5)
    assert twice["ndcg_any@3"] == pytest.approx(1.0)
    with pytest.raises(RankingError):
        score(built, "session", ["answer_d"] * 3)


def test_every_cutoff_and_mrr_are_reported() -> None:
    found = score(corpus(), "turn", ["answer_a_1"])
    for level in ("turn", "session"):
        assert {f"recall_all@{k}" for k in CUTOFFS} <= set(found[level])
        assert found[level]["mrr"] == 1.0


# --- parity with the official code ----------------------------------------------------------


def test_the_cli_equals_the_official_code_on_every_oracle_question() -> None:
    """Every value, per question, bit for bit, through ``python -m benchmarks.metrics.ranking``
    (scripts/check_longmemeval_parity.py runs the official code on the same rankings)."""
    questions, compared, largest, mismatches = check("oracle", 500, seed=0)
    assert (questions, mismatches, largest) == (500, [], 0.0) and compared > 50_000


@pytest.mark.slow
def test_the_cli_equals_the_official_code_on_longmemeval_s() -> None:
    questions, _, largest, mismatches = check("s", 120, seed=1)
    assert (questions, mismatches, largest) == (120, [], 0.0)


def test_official_turn_ids_number_turns_from_one_and_drop_the_copy_mark() -> None:
    conversation = next(iter_longmemeval("oracle", question_ids=["001be529"]))
    turn = conversation.sessions[0].turns[2]
    assert official_turn_id(turn) == f"{conversation.sessions[0].session_id}_3"


def test_repeated_sessions_load_as_numbered_copies(tmp_path: Path) -> None:
    from benchmarks.data.longmemeval import parse_instance

    session = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    item = {
        "question_id": "q",
        "question_type": "single-session-user",
        "question": "?",
        "answer": "a",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["s1", "s1"],
        "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00"],
        "haystack_sessions": [session, session],
        "answer_session_ids": [],
    }
    conversation = parse_instance(item, source=tmp_path / "x.json")
    assert [s.session_id for s in conversation.sessions] == ["s1", "s1#2"]
    assert len({t.turn_id for t in conversation.turns}) == 4
    assert {official_turn_id(t) for t in conversation.turns} == {"s1_1", "s1_2"}
