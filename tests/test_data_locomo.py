from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.data import DatasetError, load_locomo, read_locomo


@pytest.fixture(scope="module")
def locomo(data_dir: Path):
    return read_locomo(data_dir / "locomo" / "locomo10.json")


def test_counts_match_the_release(locomo) -> None:
    conversations, _ = locomo
    assert len(conversations) == 10
    assert sum(len(c.sessions) for c in conversations) == 272
    assert sum(len(c.turns) for c in conversations) == 5882
    categories = Counter(q.category for c in conversations for q in c.questions)
    assert categories == {
        "multi_hop": 282,
        "temporal": 321,
        "open_domain": 96,
        "single_hop": 841,
        "adversarial": 446,
    }


def test_turns_have_stable_ids_and_session_dates(locomo) -> None:
    conversations, _ = locomo
    first = conversations[0]
    turn = first.sessions[0].turns[0]
    assert (turn.turn_id, turn.session_id, turn.index) == ("D1:1", "session_1", 0)
    assert turn.timestamp is not None and turn.timestamp.year == 2023
    assert first.sessions[0].date_text == "1:56 pm on 8 May, 2023"
    assert first.sessions[0].timestamp.hour == 13 and first.sessions[0].timestamp.minute == 56
    assert first.speakers == ("Caroline", "Melanie")


def test_image_turns_keep_their_caption(locomo) -> None:
    conversations, _ = locomo
    turn = next(t for t in conversations[0].turns if t.turn_id == "D1:5")
    assert turn.image_caption == "a photo of a dog walking past a wall with a painting of a woman"
    assert turn.text.endswith(f" [shares an image: {turn.image_caption}]")


def test_adversarial_items_use_adversarial_answer(locomo) -> None:
    conversations, _ = locomo
    adversarial = [q for c in conversations for q in c.questions if q.category == "adversarial"]
    assert all(q.answer == q.adversarial_answer for q in adversarial)
    both = [q for q in adversarial if q.original_answer is not None]
    assert [(q.answer, q.original_answer) for q in both] == [("Yes", "No"), ("Yes", "No")]
    assert all(q.category_code == 5 for q in adversarial)


def test_malformed_evidence_is_parsed_or_reported(locomo) -> None:
    conversations, notes = locomo
    assert len(notes) == 9
    by_id = {q.question_id: q for c in conversations for q in c.questions}
    assert {"D8:6", "D9:17"} <= set(by_id["conv-26:q37"].evidence)
    assert "D11:26" in by_id["conv-43:q18"].evidence
    assert "D30:5" in by_id["conv-50:q69"].evidence
    assert {"D9:1", "D4:4", "D4:6"} <= set(by_id["conv-49:q31"].evidence)
    assert "D" not in by_id["conv-42:q88"].evidence
    assert any("conv-42:q58" in note and "dropped" in note for note in notes)
    known = {(c.conversation_id, t.turn_id) for c in conversations for t in c.turns}
    assert all((q.conversation_id, e) in known for q in by_id.values() for e in q.evidence)


def test_answers_are_strings(locomo) -> None:
    """LoCoMo's key holds six answers as JSON numbers (a year, a count): each is read as its
    text, so scorers and judges compare strings."""
    conversations, _ = locomo
    by_id = {q.question_id: q for c in conversations for q in c.questions}
    assert {type(q.answer) for q in by_id.values()} == {str}
    assert (by_id["conv-26:q1"].answer, by_id["conv-26:q40"].answer) == ("2022", "2")


def _write_mutated(tmp_path: Path, data_dir: Path, mutate) -> Path:
    raw = json.loads((data_dir / "locomo" / "locomo10.json").read_text())
    mutate(raw)
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(raw))
    return path


def test_truncated_file_names_the_file(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "locomo10.json"
    path.write_bytes((data_dir / "locomo" / "locomo10.json").read_bytes()[:5000])
    with pytest.raises(DatasetError, match=r"locomo10\.json: not valid JSON"):
        read_locomo(path)


def test_missing_question_field_names_the_record(tmp_path: Path, data_dir: Path) -> None:
    path = _write_mutated(tmp_path, data_dir, lambda raw: raw[1]["qa"][3].pop("question"))
    with pytest.raises(DatasetError, match=r"locomo10\.json: record conv-30.*'question'"):
        read_locomo(path)


def test_missing_answer_names_the_question(tmp_path: Path, data_dir: Path) -> None:
    path = _write_mutated(tmp_path, data_dir, lambda raw: raw[0]["qa"][0].pop("answer"))
    with pytest.raises(DatasetError, match=r"record conv-26:q0: missing field 'answer'"):
        read_locomo(path)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda raw: raw[0]["qa"][2].update(question=None),
            r"conv-26:q2: field 'question': expected a string, got None",
        ),
        (
            lambda raw: raw[0]["qa"][2].update(answer=["a", "b"]),
            r"conv-26:q2: field 'answer': expected a string or a number",
        ),
        (
            lambda raw: raw[1]["conversation"]["session_1"][0].update(text=None),
            r"conv-30/session_1 turn 0: field 'text'",
        ),
        (
            lambda raw: raw[1]["conversation"].update(speaker_a=7),
            r"record conv-30: field 'speaker_a'",
        ),
    ],
)
def test_a_null_or_wrongly_typed_text_is_named_not_read_as_a_string(
    tmp_path: Path, data_dir: Path, mutate, message: str
) -> None:
    """``str(None)`` would make a question "None" and score it silently."""
    with pytest.raises(DatasetError, match=message):
        read_locomo(_write_mutated(tmp_path, data_dir, mutate))


def test_bad_session_date_names_the_session(tmp_path: Path, data_dir: Path) -> None:
    def mutate(raw) -> None:
        raw[2]["conversation"]["session_3_date_time"] = "sometime in spring"

    path = _write_mutated(tmp_path, data_dir, mutate)
    with pytest.raises(DatasetError, match=r"record conv-41/session_3: bad session date"):
        read_locomo(path)


def test_missing_data_names_the_path_and_the_fetch_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMBENCH_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"locomo/locomo10\.json.*make data"):
        load_locomo()
