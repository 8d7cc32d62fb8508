"""LongMemEval's official retrieval definition: hand-computed cases for every rule, then parity
with the official code itself (``data/evaluators/longmemeval/``) on random and near-perfect
rankings of real questions."""

from __future__ import annotations

import ast
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.data.longmemeval import iter_longmemeval
from benchmarks.data.paths import resolve_data_dir
from benchmarks.metrics.longmemeval_official import (
    CUTOFFS,
    SKIP_ABSTENTION,
    SKIP_NO_TARGET,
    Corpus,
    RankingError,
    SessionTurns,
    score,
)
from benchmarks.metrics.ranking import corpus_of, official_turn_id

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

EVALUATORS = resolve_data_dir() / "evaluators" / "longmemeval"


def official_namespace() -> dict[str, Any]:
    """eval_utils.py run as it stands, and run_retrieval.py's ``process_item_flat_index`` (the
    rest of that file needs GPUs and models). numpy 2 removed ``asfarray``, which eval_utils
    calls: the shim gives it back with its old meaning (a float array)."""
    namespace: dict[str, Any] = {"np": np}
    if not hasattr(np, "asfarray"):
        namespace["np"] = type("NumpyShim", (), {})()
        for name in ("sum", "log2", "arange"):
            setattr(namespace["np"], name, getattr(np, name))
        namespace["np"].asfarray = lambda values: np.asarray(values, dtype=float)
    source = (EVALUATORS / "eval_utils.py").read_text(encoding="utf-8")
    tree = ast.parse(source.replace("import numpy as np\n", ""))
    retrieval = ast.parse((EVALUATORS / "run_retrieval.py").read_text(encoding="utf-8"))
    tree.body += [
        node
        for node in retrieval.body
        if isinstance(node, ast.FunctionDef) and node.name == "process_item_flat_index"
    ]
    exec(compile(tree, "official", "exec"), namespace)
    return namespace


def official_metrics(item: dict[str, Any], ranking: list[int], granularity: str, ns: dict) -> dict:
    """What run_retrieval.py records for one question and one ranking of corpus positions."""
    corpus_ids: list[str] = []
    for sid, session, date in zip(
        item["haystack_session_ids"], item["haystack_sessions"], item["haystack_dates"], strict=True
    ):
        corpus_ids += ns["process_item_flat_index"](session, granularity, sid, date)[1]
    correct = list({doc for doc in corpus_ids if "answer" in doc})
    metrics: dict[str, dict[str, float]] = {"session": {}, "turn": {}}
    for k in CUTOFFS:
        values = ns["evaluate_retrieval"](ranking, correct, corpus_ids, k=k)
        metrics[granularity] |= dict(zip(_names(k), map(float, values), strict=True))
        if granularity == "turn":
            values = ns["evaluate_retrieval_turn2session"](ranking, correct, corpus_ids, k=k)
            metrics["session"] |= dict(zip(_names(k), map(float, values), strict=True))
    return {level: found for level, found in metrics.items() if found}, corpus_ids


def _names(k: int) -> tuple[str, str, str]:
    return (f"recall_any@{k}", f"recall_all@{k}", f"ndcg_any@{k}")


def official_skipped(item: dict[str, Any]) -> bool:
    """The main loop's averaging rule: no _abs question, none without a user has_answer turn."""
    user_turns = [t for s in item["haystack_sessions"] for t in s if t["role"] == "user"]
    return "_abs" in item["question_id"] or not any(t.get("has_answer") for t in user_turns)


def raw_items(variant: str, limit: int) -> list[dict[str, Any]]:
    import json
    import tarfile

    archive = resolve_data_dir() / "longmemeval" / f"longmemeval_{variant}_lme_jsons.tar.xz"
    items = []
    with tarfile.open(archive, "r|xz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".json"):
                items.append(json.loads(tar.extractfile(member).read()))  # type: ignore[union-attr]
            if len(items) >= limit:
                break
    return items


def rankings_of(corpus_ids: list[str], rng: random.Random) -> list[list[int]]:
    """A random permutation, and a near-perfect one (gold first, one gold entry moved down)."""
    shuffled = list(range(len(corpus_ids)))
    rng.shuffle(shuffled)
    gold = [i for i in shuffled if "answer" in corpus_ids[i]]
    rest = [i for i in shuffled if "answer" not in corpus_ids[i]]
    near = gold + rest
    if gold and rest:
        moved = near.pop(0)
        near.insert(min(len(near), rng.randint(1, 12)), moved)
    return [shuffled, near, shuffled[: len(shuffled) // 3]]


def check_parity(variant: str, dataset_variant: str, limit: int) -> int:
    """Per-question equality of every metric, turn and session granularity; questions checked."""
    ns = official_namespace()
    rng = random.Random(0)
    items = {item["question_id"]: item for item in raw_items(variant, limit)}
    checked = 0
    for conversation in iter_longmemeval(dataset_variant, question_ids=items):  # type: ignore[arg-type]
        item = items[conversation.conversation_id]
        ours = corpus_of(conversation)
        assert (ours.skipped is not None) == official_skipped(item), item["question_id"]
        for granularity in ("turn", "session"):
            corpus_ids = official_metrics(item, [], granularity, ns)[1]
            for ranking in rankings_of(corpus_ids, rng):
                expected, _ = official_metrics(item, ranking, granularity, ns)
                ranked_ids = [_raw(corpus_ids[i]) for i in ranking]
                found = score(ours, granularity, ranked_ids)  # type: ignore[arg-type]
                for level, metrics in expected.items():
                    for name, value in metrics.items():
                        assert found[level][name] == pytest.approx(value, abs=1e-12), (
                            item["question_id"],
                            granularity,
                            level,
                            name,
                        )
        checked += 1
    return checked


def _raw(corpus_id: str) -> str:
    """The dataset's form of an official corpus id (a ranking may give either)."""
    return corpus_id.replace("noans", "answer")


def test_parity_with_the_official_code_on_every_oracle_question() -> None:
    assert check_parity("oracle", "oracle", 500) == 500


def test_parity_with_the_official_code_on_longmemeval_s() -> None:
    assert check_parity("s_cleaned", "s", 120) == 120


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
