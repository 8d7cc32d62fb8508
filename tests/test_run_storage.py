"""The run log and the memory cache: durable, resumable, never trusting a corrupt file."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime
from pathlib import Path

import pytest

from benchmarks.pipeline.memory_store import MemoryStore, conversation_digest
from benchmarks.pipeline.runlog import (
    RecordLog,
    RunInProgressError,
    exclusive,
    summarize_invocations,
)
from benchmarks.pipeline.subsets import SubsetSpec, select, stratified_sample
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.methods.baselines import FullHistory, SessionRAG, TurnRAG
from memsys.types import Conversation, Question, Session, Turn


def test_log_drops_a_partial_last_line_and_refuses_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "predictions.jsonl"
    log = RecordLog(path)
    log.append([{"question_id": "q1", "x": 1}, {"question_id": "q2", "x": 2}])
    with path.open("a") as handle:
        handle.write('{"question_id": "q3", "x"')
    reopened = RecordLog(path)
    assert reopened.repaired_bytes == len('{"question_id": "q3", "x"')
    assert reopened.done() == {"q1", "q2"}
    reopened.append([{"question_id": "q3", "x": 3}])
    assert [json.loads(line)["question_id"] for line in path.read_text().splitlines()] == [
        "q1",
        "q2",
        "q3",
    ]
    with pytest.raises(ValueError, match="question_id q2 is already logged"):
        reopened.append([{"question_id": "q2", "x": 9}])


def test_log_lets_a_retryable_record_be_superseded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "predictions.jsonl"

    def failed(record: dict) -> bool:
        return record["failure"] is not None

    log = RecordLog(path, retryable=failed)
    log.append(
        [
            {"question_id": f"q{i}", "failure": "answer: HTTP 500" if i == 2 else None}
            for i in (1, 2, 3)
        ]
    )
    assert log.done() == {"q1", "q3"} and len(log) == 3
    with pytest.raises(ValueError, match="question_id q1 is already logged"):
        log.append([{"question_id": "q1", "failure": None}])

    reopened = RecordLog(path, retryable=failed)
    reopened.append([{"question_id": "q2", "failure": None}])
    assert reopened.superseded == 1 and reopened.done() == {"q1", "q2", "q3"}
    again = RecordLog(path, retryable=failed)
    assert [(r["question_id"], r["failure"]) for r in again.records()] == [
        ("q1", None),
        ("q2", None),
        ("q3", None),
    ]
    assert len(path.read_text().splitlines()) == 4  # append-only: the failure line stays


def test_log_with_a_corrupt_middle_line_names_it(tmp_path: Path) -> None:
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"question_id": "q1"}\nnot json\n')
    with pytest.raises(ValueError, match=r"predictions\.jsonl:2: corrupt record"):
        RecordLog(path)


def _conversation(text: str = "hello") -> Conversation:
    stamp = datetime(2023, 1, 1)
    turns = (
        Turn("D1:1", "session_1", 0, "Ana", text, stamp),
        Turn("D1:2", "session_1", 1, "Ben", "hi", stamp),
    )
    return Conversation("c1", (Session("session_1", stamp, "1 Jan", turns),), ())


@pytest.fixture
def services() -> Services:
    return Services(embedder=Embedder(EmbedderConfig(), EmbeddingCache()), tokens=None)  # type: ignore[arg-type]


def test_memory_is_cached_keyed_and_checked(tmp_path: Path, services: Services) -> None:
    store = MemoryStore(tmp_path)
    system = FullHistory(services)
    got = store.load_or_build(system, _conversation())
    memory, loaded = got.memory, got.loaded
    assert not loaded
    got = store.load_or_build(system, _conversation())
    again, loaded = got.memory, got.loaded
    assert loaded and again.items == memory.items
    assert store.path(system, _conversation("changed")) != store.path(system, _conversation())

    path = store.path(system, _conversation())
    envelope = json.loads(path.read_text())
    envelope["payload"]["items"][0]["text"] = "tampered"
    path.write_text(json.dumps(envelope))
    got = store.load_or_build(system, _conversation())
    rebuilt, loaded = got.memory, got.loaded
    assert not loaded and store.rebuilt_corrupt == 1
    assert rebuilt.items[0].text == "Ana: hello"
    path.write_text("{truncated")
    assert store.load_or_build(system, _conversation()).loaded is False
    assert store.rebuilt_corrupt == 2


def test_memory_key_ignores_retrieval_settings(tmp_path: Path, services: Services) -> None:
    store = MemoryStore(tmp_path)
    conversation = _conversation()
    assert store.key(TurnRAG(services, retriever="bm25", top_k=3), conversation) == store.key(
        TurnRAG(services, retriever="dense", top_k=9), conversation
    )
    assert store.key(TurnRAG(services), conversation) != store.key(
        FullHistory(services), conversation
    )
    assert conversation_digest(conversation) != conversation_digest(_conversation("other"))


@pytest.mark.parametrize("system_class", [TurnRAG, SessionRAG])
def test_ranked_baselines_embed_their_items_at_construction_not_at_retrieval(
    tmp_path: Path, services: Services, system_class: type[TurnRAG | SessionRAG]
) -> None:
    store, system, embedder = MemoryStore(tmp_path), system_class(services), services.embedder
    got = store.load_or_build(system, _conversation())
    memory, loaded = got.memory, got.loaded
    asked_at_construction = embedder.texts_requested
    assert not loaded and asked_at_construction == len(memory.items) > 0
    question = Question("c1:q0", "c1", "Who said hello?", "Ana", "single_hop")
    encoded_at_construction = embedder.texts_encoded
    # The question is all retrieval embeds, asked once: one search gives the reader's items and
    # the full-depth ranking.
    assert system.retrieve(memory, question).items
    assert embedder.texts_requested == asked_at_construction + 1
    assert embedder.texts_encoded == encoded_at_construction + 1
    got = store.load_or_build(system, _conversation())  # loaded: indexed on load
    again, loaded = got.memory, got.loaded
    assert loaded and embedder.texts_requested == 2 * asked_at_construction + 1
    system.retrieve(again, question)
    assert embedder.texts_requested == 2 * asked_at_construction + 2
    assert embedder.texts_encoded == encoded_at_construction + 1


def test_stratified_sample_is_deterministic_and_proportional() -> None:
    questions = [
        Question(f"q{i}", "c", "?", "a", ["a", "b", "c"][i % 3] if i < 60 else "d")
        for i in range(100)
    ]
    sample = stratified_sample(questions, 10, seed=0)
    assert sample == stratified_sample(questions, 10, seed=0)
    counts = {category: sum(q.category == category for q in sample) for category in "abcd"}
    assert counts == {"a": 2, "b": 2, "c": 2, "d": 4}
    assert [q.question_id for q in sample] == sorted(
        (q.question_id for q in sample), key=lambda i: int(i[1:])
    )


def test_select_caps_questions_across_conversations() -> None:
    conversations = [
        Conversation(f"c{i}", (), (Question(f"q{i}", f"c{i}", "?", "a", "x" if i % 2 else "y"),))
        for i in range(10)
    ]
    chosen = list(select(lambda wanted=None: iter(conversations), SubsetSpec("smoke", None, 4)))
    assert len(chosen) == 4
    assert {c.questions[0].category for c in chosen} == {"x", "y"}
    assert [
        c.conversation_id for c in select(lambda: iter(conversations), SubsetSpec("s", 3, None))
    ] == ["c0", "c1", "c2"]
    with pytest.raises(ValueError, match=r"subset\.max_questions"):
        SubsetSpec("bad", None, 0)


def test_select_reads_the_sample_by_id_and_draws_it_once_per_data_key() -> None:
    conversations = [
        Conversation(f"c{i}", (), (Question(f"q{i}", f"c{i}", "?", "a", "x" if i % 2 else "y"),))
        for i in range(10)
    ]
    asked: list[list[str] | None] = []

    def stream(wanted: Collection[str] | None = None) -> list[Conversation]:
        asked.append(None if wanted is None else sorted(wanted))
        return [c for c in conversations if wanted is None or c.conversation_id in wanted]

    spec = SubsetSpec("smoke", None, 4)
    first = [c.conversation_id for c in select(stream, spec, "data 1")]
    assert first == [c.conversation_id for c in select(stream, spec, "data 1")]
    assert len(first) == 4 and asked == [None, sorted(first), sorted(first)]
    assert [c.conversation_id for c in select(stream, spec, "data 2")] == first
    assert asked[3:] == [None, sorted(first)]  # another data key draws its own sample


def test_a_run_directory_is_held_by_one_process_at_a_time(tmp_path: Path) -> None:
    with (
        exclusive(tmp_path),
        pytest.raises(RunInProgressError, match="another process"),
        exclusive(tmp_path),
    ):
        pass
    with exclusive(tmp_path):  # released: the next run may go on
        pass


def test_invocation_costs_add_up_leaving_out_work_some_invocation_did_not_log() -> None:
    older = {  # logged before parses were counted
        "questions": 3,
        "wall_s": 10.5,
        "peak_rss_mb": 900,
        "construction_s": 8.0,
        "embedding": {"requested": 10, "encoded": 4, "encode_seconds": 1.5, "model_calls": 1},
    }
    newer = {
        "questions": 2,
        "wall_s": 5.0,
        "peak_rss_mb": 700,
        "construction_s": 4.5,
        "workers": 2,
        "embedding": {"requested": 6, "encoded": 1, "encode_seconds": 0.25, "model_calls": 1},
        "parsing": {"requested": 40, "parsed": 12, "parse_seconds": 0.5},
    }
    assert summarize_invocations([older, newer]) == {
        "count": 2,
        "questions": 5,
        "wall_s": 15.5,
        "peak_rss_mb": 900,
        "construction_s": 12.5,
        "workers": 2,
        "data": {},  # neither recorded its dataset digests
        "embedding": {"requested": 16, "encoded": 5, "encode_seconds": 1.75},
    }
    assert summarize_invocations([newer])["parsing"] == newer["parsing"]
    assert summarize_invocations([])["questions"] == 0
