from __future__ import annotations

import io
import json
import lzma
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.data import DatasetError, iter_longmemeval

ORACLE_TYPES = {
    "single_session_user": 70,
    "multi_session": 133,
    "single_session_preference": 30,
    "temporal_reasoning": 133,
    "knowledge_update": 78,
    "single_session_assistant": 56,
}


def test_oracle_counts_and_fields(data_dir: Path) -> None:
    conversations = list(iter_longmemeval("oracle", data_dir))
    assert len(conversations) == 500
    questions = [c.questions[0] for c in conversations]
    assert Counter(q.category for q in questions) == ORACLE_TYPES
    assert sum(q.is_abstention for q in questions) == 30
    assert sum(len(q.evidence) for q in questions) == 896
    for conversation in conversations:
        question = conversation.questions[0]
        session_ids = {s.session_id for s in conversation.sessions}
        assert set(question.evidence_sessions) <= session_ids
        assert question.question_date is not None
        dates = [s.timestamp for s in conversation.sessions]
        assert dates == sorted(dates)


def test_turn_ids_and_evidence_flags(data_dir: Path) -> None:
    conversation = next(iter_longmemeval("oracle", data_dir))
    session = conversation.sessions[0]
    assert [t.turn_id for t in session.turns[:2]] == [
        f"{session.session_id}:0",
        f"{session.session_id}:1",
    ]
    assert {t.speaker for t in session.turns} <= {"user", "assistant"}
    question = conversation.questions[0]
    flagged = [t.turn_id for s in conversation.sessions for t in s.turns if t.has_answer]
    assert list(question.evidence) == flagged


def test_s_selection_includes_the_reconstructed_item(data_dir: Path) -> None:
    wanted = {"7e00a6cb", "gpt4_7a0daae1"}
    found = list(iter_longmemeval("s", data_dir, question_ids=wanted))
    assert [c.conversation_id for c in found] == ["7e00a6cb"]
    assert found[0].metadata == {"reconstructed": "true"}
    assert len(found[0].sessions) == 62


def _item(**changes) -> dict:
    item = {
        "question_id": "q1",
        "question_type": "multi-session",
        "question": "What?",
        "answer": 3,
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": ["2023/05/01 (Mon) 10:00"],
        "haystack_session_ids": ["answer_1"],
        "haystack_sessions": [[{"role": "user", "content": "hi", "has_answer": True}]],
        "answer_session_ids": ["answer_1"],
    }
    item.update(changes)
    return item


def _archive(tmp_path: Path, members: dict[str, bytes]) -> Path:
    folder = tmp_path / "longmemeval"
    folder.mkdir(exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(f"lme_jsons/{name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    path = folder / "longmemeval_oracle_lme_jsons.tar.xz"
    path.write_bytes(buffer.getvalue())
    return path


def test_a_small_archive_parses(tmp_path: Path) -> None:
    _archive(tmp_path, {"1_q1.json": json.dumps(_item()).encode()})
    (conversation,) = iter_longmemeval("oracle", tmp_path)
    assert conversation.questions[0].answer == "3"
    assert conversation.questions[0].evidence == ("answer_1:0",)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (_item(question_date="yesterday"), r"1_q1\.json: record q1: bad date 'yesterday'"),
        (
            {k: v for k, v in _item().items() if k != "answer"},
            r"record q1: missing field 'answer'",
        ),
        (_item(question_type="trivia"), r"record q1: unknown question_type 'trivia'"),
        (_item(haystack_dates=[]), r"record q1: haystack ids, dates and sessions differ"),
    ],
)
def test_malformed_members_name_file_and_record(tmp_path: Path, item: dict, message: str) -> None:
    _archive(tmp_path, {"1_q1.json": json.dumps(item).encode()})
    with pytest.raises(DatasetError, match=message):
        list(iter_longmemeval("oracle", tmp_path))


def test_invalid_json_member_names_the_member(tmp_path: Path) -> None:
    _archive(tmp_path, {"1_q1.json": b'{"question_id": '})
    with pytest.raises(DatasetError, match=r"lme_jsons/1_q1\.json: not valid JSON"):
        list(iter_longmemeval("oracle", tmp_path))


def test_truncated_archive_is_reported(tmp_path: Path) -> None:
    path = _archive(tmp_path, {"1_q1.json": json.dumps(_item()).encode() * 50})
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DatasetError, match=r"tar\.xz: corrupt or truncated archive"):
        list(iter_longmemeval("oracle", tmp_path))


def test_reconstructed_file_must_be_valid_xz(tmp_path: Path) -> None:
    folder = tmp_path / "longmemeval"
    folder.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz"):
        pass
    (folder / "longmemeval_s_cleaned_lme_jsons.tar.xz").write_bytes(buffer.getvalue())
    (folder / "62_7e00a6cb.reconstructed.json.xz").write_bytes(lzma.compress(b"{}")[:10])
    with pytest.raises(DatasetError, match=r"62_7e00a6cb\.reconstructed\.json\.xz: corrupt xz"):
        list(iter_longmemeval("s", tmp_path))
