"""The run log's resume and duplicate rules on files written by hand (``RecordLog``): the
partial tail a kill leaves (found across 4096-byte chunks), the line numbers its refusals name,
what a retry supersedes, the bytes on disk, and the errors that name the file. Written for
``make mutation`` (docs/development.md): each test pins a value a mutant would change."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from benchmarks.pipeline.runlog import (
    DamagedLogError,
    ForeignRowsError,
    RecordLog,
    ResultsWriteError,
    _drop_partial_tail,
    latest_records,
)

#: A mutant that loops forever fails here in seconds, not at mutmut's CPU limit.
pytestmark = pytest.mark.timeout(10)


def line(question: str, **fields: object) -> bytes:
    return (json.dumps({"question_id": question, **fields}, sort_keys=True) + "\n").encode()


def test_a_new_log_repairs_nothing_and_creates_its_missing_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "predictions.jsonl"
    log = RecordLog(path)
    assert log.repaired_bytes == 0
    assert path.parent.is_dir() and not path.exists()
    assert len(log) == 0 and log.done() == set() and "q1" not in log


def test_an_empty_log_repairs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"")
    assert RecordLog(path).repaired_bytes == 0


@pytest.mark.parametrize("tail", [b"x", b'{"question_id": "q', b"y" * 5000])
def test_a_log_with_no_whole_line_is_cut_to_nothing(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(tail)
    log = RecordLog(path)
    assert log.repaired_bytes == len(tail)
    assert path.read_bytes() == b"" and len(log) == 0


def test_a_partial_tail_is_dropped_and_whole_lines_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    whole = line("q1") + line("q2")
    path.write_bytes(whole + b'{"question_id": "q3", "answ')
    log = RecordLog(path)
    assert log.repaired_bytes == len(b'{"question_id": "q3", "answ')
    assert path.read_bytes() == whole
    assert [r["question_id"] for r in log.records()] == ["q1", "q2"]
    assert "q1" in log and "q3" not in log and len(log) == 2


def test_a_newline_that_opens_the_last_4096_byte_chunk_is_found(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    record = line("q1")
    path.write_bytes(record + b"z" * 4095)  # the newline is the first byte of the last chunk
    assert RecordLog(path).repaired_bytes == 4095
    assert path.read_bytes() == record


def test_a_newline_one_byte_into_the_file_behind_a_full_chunk_is_found(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n" + b"z" * 4096)  # 4097 bytes: one full chunk, then one byte left
    assert _drop_partial_tail(path) == 4096  # (a blank line is damage to RecordLog)
    assert path.read_bytes() == b"\n"


def test_a_tail_longer_than_a_chunk_keeps_every_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    whole = line("q1", pad="a" * 3000) + line("q2", pad="b" * 3000)
    path.write_bytes(whole + b"c" * 5000)
    assert RecordLog(path).repaired_bytes == 5000
    assert path.read_bytes() == whole


def test_a_settled_record_repeated_is_a_duplicate_named_by_its_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line("q1", v=1) + line("q2") + line("q1", v=2))
    log = RecordLog(path)
    assert log["q1"]["v"] == 1
    assert log.duplicates == [(3, "question_id 'q1' is settled on line 1")]
    with pytest.raises(ForeignRowsError) as refused:
        log.check_ids(["q1", "q2"], "the run's questions")
    assert refused.value.problems == [(3, "question_id 'q1' is settled on line 1")]


def test_a_retryable_record_is_superseded_by_its_next_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line("q1", failed=True) + line("q1", failed=False) + line("q2", failed=True))
    log = RecordLog(path, retryable=lambda record: record["failed"])
    assert log.duplicates == []
    assert log["q1"]["failed"] is False and log.done() == {"q1"}
    assert [r["question_id"] for r in log.records()] == ["q1", "q2"]
    log.check_ids(["q1", "q2"], "the run's questions")  # nothing foreign: no error
    assert log.superseded == 0
    log.append([{"question_id": "q2", "failed": True}])
    log.append([{"question_id": "q2", "failed": False}])
    assert log.superseded == 2 and log.done() == {"q1", "q2"} and len(log) == 2


def test_appending_a_settled_id_is_refused(tmp_path: Path) -> None:
    log = RecordLog(tmp_path / "log.jsonl")
    log.append([{"question_id": "q1"}])
    with pytest.raises(ValueError, match=r"question_id q1 is already logged"):
        log.append([{"question_id": "q1"}])
    assert log.count_on_disk() == 1


def test_foreign_rows_are_named_by_the_line_they_were_appended_on(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line("q1"))
    log = RecordLog(path)
    log.append([{"question_id": "q2"}, {"question_id": "q9"}])
    with pytest.raises(ForeignRowsError) as refused:
        log.check_ids(["q1", "q2"], "the run's questions")
    assert refused.value.problems == [(3, "question_id 'q9' is not in the run's questions")]
    assert RecordLog(path).count_on_disk() == 3


def test_a_new_logs_first_record_is_line_one(tmp_path: Path) -> None:
    log = RecordLog(tmp_path / "log.jsonl")
    log.append([{"question_id": "q9"}])
    with pytest.raises(ForeignRowsError) as refused:
        log.check_ids(["q1"], "the run's questions")
    assert refused.value.problems == [(1, "question_id 'q9' is not in the run's questions")]


def test_a_record_is_one_line_of_sorted_keys_with_its_text_unescaped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    previous = os.umask(0o022)
    try:
        RecordLog(path).append([{"question_id": "q1", "answer": "café", "a": 1}])
    finally:
        os.umask(previous)
    assert path.read_text(encoding="utf-8") == '{"a": 1, "answer": "café", "question_id": "q1"}\n'
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_damaged_line_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(line("q1") + b'{"other": 1}\n')
    with pytest.raises(DamagedLogError, match=r"log\.jsonl:2: .* with a 'question_id'") as raised:
        RecordLog(path)
    assert raised.value.line == 2


def test_a_log_that_cannot_be_opened_names_its_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    path = blocker / "log.jsonl"
    with pytest.raises(ResultsWriteError, match=r"cannot write .*file/log.jsonl") as raised:
        RecordLog(path)
    assert raised.value.path == path


def test_an_append_that_cannot_open_the_file_names_it(tmp_path: Path) -> None:
    log = RecordLog(tmp_path / "log.jsonl")
    log.path.mkdir()  # a folder where the file should be
    with pytest.raises(
        ResultsWriteError, match=r"cannot write .*log.jsonl: Is a directory"
    ) as raised:
        log.append([{"question_id": "q1"}])
    assert raised.value.path == log.path
    assert isinstance(raised.value.__cause__, OSError)
    assert raised.value.__cause__.errno == errno.EISDIR


def test_latest_records_keep_each_ids_last_record_in_first_seen_order() -> None:
    records = [
        {"question_id": 1, "v": "a"},
        {"question_id": "2", "v": "b"},
        {"question_id": "1", "v": "c"},
    ]
    assert latest_records(records, "question_id") == {
        "1": {"question_id": "1", "v": "c"},
        "2": {"question_id": "2", "v": "b"},
    }
    assert list(latest_records(records, "question_id")) == ["1", "2"]
