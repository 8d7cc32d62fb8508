"""Corrupt caches and memory files are detected and rebuilt, never trusted."""

from __future__ import annotations

import errno
import json
import logging
import multiprocessing
import os
import random
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes.chat_server import FakeChatServer
from fakes.dialogues import tiny_fixture
from fakes.llm import ScriptedProvider, ask, make_backbone
from reliability_helpers import (
    CORRECT,
    JUDGE,
    server_backbone,
)
from run_helpers import (
    compose_config,
    fixture_overrides,
    read_records,
)

from benchmarks.metrics.aggregate import format_summary
from benchmarks.pipeline.memory_store import STALE_PART_S, MemoryStore
from benchmarks.pipeline.run import run
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.kvstore import CacheError, SQLiteKV
from memsys.llm import Completion, LLMRequest, ResponseCache
from memsys.llm.cache import request_key
from memsys.methods.baselines import FullHistory

pytestmark = pytest.mark.usefixtures("no_env_overrides")

# Corrupt caches and memory files are detected and rebuilt, never trusted.


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["responses", "embeddings"])
def test_a_cache_file_that_is_not_a_database_is_moved_aside(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / f"{kind}.sqlite"
    garbage = b"these bytes were never an SQLite database\n" * 50
    path.write_bytes(garbage)
    (tmp_path / f"{kind}.sqlite.corrupt").write_bytes(b"an earlier casualty")
    with caplog.at_level(logging.WARNING, logger="memsys.kvstore"):
        if kind == "responses":
            cache = ResponseCache(path)
            assert cache.get("m", LLMRequest(ask("hello"))) is None
            cache.put("m", LLMRequest(ask("hello")), Completion("hi", 1, 1))
            assert cache.get("m", LLMRequest(ask("hello"))) == Completion("hi", 1, 1)
        else:
            cache = EmbeddingCache(path)
            vector = np.array([0.6, 0.8], dtype=np.float32)
            assert cache.get_many(["k"]) == {}
            cache.put_many({"k": vector})
            assert EmbeddingCache(path).get_many(["k"])["k"].tolist() == vector.tolist()
    moved = tmp_path / f"{kind}.sqlite.1.corrupt"
    assert moved.read_bytes() == garbage
    assert (tmp_path / f"{kind}.sqlite.corrupt").read_bytes() == b"an earlier casualty"
    assert cache.integrity() == {"corrupt_rows": 0, "moved_aside": str(moved), "salvaged_rows": 0}
    assert f"{path} is damaged" in caplog.text and str(moved) in caplog.text


def test_a_response_that_fails_its_checksum_is_dropped_and_asked_again(tmp_path: Path) -> None:
    path = tmp_path / "llm_responses.sqlite"
    provider = ScriptedProvider()
    cache = ResponseCache(path)
    backbone = make_backbone(provider, cache=cache)
    first = backbone.complete(ask("What did Ana adopt?"))
    with closing(sqlite3.connect(path)) as db, db:
        (value,) = db.execute("SELECT value FROM responses").fetchone()
        tampered = value.replace(b"echo", b"echp")  # still a valid completion, a changed reply
        db.execute("UPDATE responses SET value = ?", (tampered,))
    again = backbone.complete(ask("What did Ana adopt?"))
    assert (again.text, again.cached, provider.calls) == (first.text, False, 2)
    assert cache.integrity()["corrupt_rows"] == 1
    assert backbone.complete(ask("What did Ana adopt?")).cached  # the fresh reply was stored


def test_legacy_rows_are_served_and_undecodable_ones_replaced(tmp_path: Path) -> None:
    """A cache written before rows had digests: the column is added, good rows are served as
    they are, rows that do not decode to a completion are asked again and overwritten."""
    path = tmp_path / "llm_responses.sqlite"
    model = ScriptedProvider.model_id
    kept = {"text": "an old reply", "prompt_tokens": 3, "completion_tokens": 2}
    legacy = {
        "kept": json.dumps({**kept, "finish_reason": "stop"}).encode(),
        "not json": b'{"text": "cut short',
        "not utf-8": b"\xff\xfe",
        "wrong fields": json.dumps({"reply": "hi"}).encode(),
        "wrong types": json.dumps({**kept, "prompt_tokens": "three"}).encode(),
        "not an object": b"[1, 2]",
    }
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "CREATE TABLE responses (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID"
        )
        db.executemany(
            "INSERT INTO responses VALUES (?, ?)",
            [(request_key(model, LLMRequest(ask(name))), value) for name, value in legacy.items()],
        )
    provider = ScriptedProvider()
    cache = ResponseCache(path)
    backbone = make_backbone(provider, cache=cache)
    assert backbone.complete(ask("kept")).text == "an old reply" and provider.calls == 0
    broken = [name for name in legacy if name != "kept"]
    for name in broken:
        reply = backbone.complete(ask(name))
        assert (reply.text, reply.cached) == (f"echo: {name}", False)
    assert provider.calls == len(broken)
    assert cache.integrity()["corrupt_rows"] == len(broken)
    fresh = ResponseCache(path)  # the replacements are on disk, with digests
    for name in broken:
        assert fresh.get(model, LLMRequest(ask(name))).text == f"echo: {name}"
    with closing(sqlite3.connect(path)) as db:
        digests = dict(db.execute("SELECT key, digest FROM responses"))
    assert sum(digest is None for digest in digests.values()) == 1  # "kept" is served as it was
    assert fresh.integrity()["corrupt_rows"] == 0


class UnitVectors:
    """A stand-in sentence encoder: a fixed unit vector per text, and a count of calls."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        self.texts.extend(texts)
        rows = [np.random.default_rng(len(text)).normal(size=8) for text in texts]
        return np.stack([row / np.linalg.norm(row) for row in rows]).astype(np.float32)


def test_damaged_embeddings_are_dropped_and_encoded_again(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    texts = ["Ana adopted Pepper.", "Ben makes bowls.", "A 5k in 31 minutes."]
    expected = Embedder(EmbedderConfig(), EmbeddingCache(path), model=UnitVectors()).encode(texts)
    keys = [EmbeddingCache.key(EmbedderConfig().model, text) for text in texts]
    with closing(sqlite3.connect(path)) as db, db:
        (value,) = db.execute("SELECT value FROM embeddings WHERE key = ?", (keys[0],)).fetchone()
        # A flip in the lowest mantissa bits: only the row's digest can tell.
        low_bit = bytes([value[0] ^ 0x01]) + value[1:]
        db.execute("UPDATE embeddings SET value = ? WHERE key = ?", (low_bit, keys[0]))
        # Legacy rows (no digest): a wrong byte length, and a damaged exponent.
        exponent = value[:3] + bytes([value[3] ^ 0x40]) + value[4:]
        for key, damaged in ((keys[1], value[:-4]), (keys[2], exponent)):
            db.execute(
                "UPDATE embeddings SET value = ?, digest = NULL WHERE key = ?", (damaged, key)
            )
    model = UnitVectors()
    cache = EmbeddingCache(path)
    vectors = Embedder(EmbedderConfig(), cache, model=model).encode(texts)
    np.testing.assert_array_equal(vectors, expected)
    assert sorted(model.texts) == sorted(texts) and cache.integrity()["corrupt_rows"] == 3
    untouched = UnitVectors()
    Embedder(EmbedderConfig(), EmbeddingCache(path), model=untouched).encode(texts)
    assert untouched.texts == [], "the recomputed vectors replaced the damaged rows"


def test_runner_rebuilds_a_corrupt_memory_and_replaces_an_unreadable_cache(
    tmp_path: Path, server: FakeChatServer
) -> None:
    """Run, flip one byte inside the stored memory and garble the response cache, then run a
    config that loads that memory (another answer template): the memory is rebuilt, the cache
    moved aside, and retrieval is what it was."""
    server.on(JUDGE, reply=CORRECT)
    cache = tmp_path / "cache"
    common = [
        *fixture_overrides(tmp_path / "runs", cache),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    first = run(compose_config([*common, "answer=uniform"]))
    (memory_file,) = (cache / "memories").rglob("*.json")
    original = json.loads(memory_file.read_text())
    flip_byte(memory_file, memory_file.read_bytes().index(b"Pepper"))  # "Pepper" -> "Qepper"
    assert b"Qepper" in memory_file.read_bytes()
    (cache / "llm_responses.sqlite").write_bytes(b"\x00garbage" * 512)

    second = run(compose_config([*common, "answer=locomo"]))
    assert second["run_dir"] != first["run_dir"]
    assert second["construction"]["corrupt_memories_rebuilt"] == 1
    assert (second["construction"]["built"], second["construction"]["loaded"]) == (1, 0)
    moved = str(cache / "llm_responses.sqlite.corrupt")
    assert second["caches"]["llm_responses"] == {
        "corrupt_rows": 0,
        "moved_aside": moved,
        "salvaged_rows": 0,
    }
    assert json.loads(memory_file.read_text()) == original
    retrieved = [
        [r["retrieved_turn_ids"] for r in read_records(Path(summary["run_dir"]))]
        for summary in (first, second)
    ]
    assert retrieved[0] == retrieved[1]
    assert second["failures"] == {"answer": 0, "judge": 0}
    screen = format_summary(second)
    assert "1 corrupt file(s) rebuilt" in screen and moved in screen
    assert "(0 readable row(s) kept)" in screen  # garbage, not a database: nothing to salvage


#: Rows in the caches damaged below, and the pages (1-based, 4096 bytes) overwritten in them.
ROWS = 300
PAGE = 4096
DAMAGED_PAGES = (3, 4, 5)


def response_key(number: int) -> str:
    return request_key("m", LLMRequest(ask(f"question {number}")))


def reply(number: int) -> Completion:
    return Completion(f"reply {number} " * 8, 1, 1)


def embedding_key(number: int) -> str:
    return EmbeddingCache.key("m", f"text {number}")


def vector(number: int) -> np.ndarray:
    return np.full(32, number, dtype=np.float32)


def filled_cache(kind: str, path: Path) -> dict[str, bytes]:
    """A closed cache of ``ROWS`` entries (``kind`` is its table), and its rows as stored."""
    if kind == "responses":
        responses = ResponseCache(path)
        for number in range(ROWS):
            responses.put("m", LLMRequest(ask(f"question {number}")), reply(number))
        responses.close()
    else:
        embeddings = EmbeddingCache(path)
        embeddings.put_many({embedding_key(number): vector(number) for number in range(ROWS)})
        embeddings.close()
    assert path.stat().st_size > 3 * max(DAMAGED_PAGES) * PAGE  # the damage is in the middle
    return stored_rows(path, kind)


def stored_rows(path: Path, table: str) -> dict[str, bytes]:
    with closing(sqlite3.connect(path)) as db:
        return dict(db.execute(f"SELECT key, value FROM {table}"))


def overwrite_pages(path: Path, pages: tuple[int, ...], seed: int = 37) -> None:
    """Random bytes over whole pages, as a bad sector or a stray write leaves them."""
    rng = random.Random(seed)
    with path.open("r+b") as handle:
        for page in pages:
            handle.seek((page - 1) * PAGE)
            handle.write(rng.randbytes(PAGE))


#: The key :func:`served` writes.
ONE_MORE = {
    "responses": request_key("m", LLMRequest(ask("one more"))),
    "embeddings": embedding_key(ROWS),
}


def served(kind: str, path: Path) -> tuple[set[str], ResponseCache | EmbeddingCache]:
    """Keys a fresh cache on ``path`` serves (checking each value), after a write to it."""
    if kind == "responses":
        responses = ResponseCache(path)
        found = set()
        for number in range(ROWS):
            completion = responses.get("m", LLMRequest(ask(f"question {number}")))
            assert completion in (None, reply(number))
            if completion is not None:
                found.add(response_key(number))
        responses.put("m", LLMRequest(ask("one more")), Completion("more", 1, 1))
        assert len(responses) == len(found) + 1
        return found, responses
    embeddings = EmbeddingCache(path)
    vectors = embeddings.get_many([embedding_key(number) for number in range(ROWS)], unit=False)
    for number in range(ROWS):
        if embedding_key(number) in vectors:
            assert vectors[embedding_key(number)].tolist() == vector(number).tolist()
    embeddings.put_many({embedding_key(ROWS): vector(ROWS)})
    assert len(SQLiteKV(path, table="embeddings")) == len(vectors) + 1
    return set(vectors), embeddings


@pytest.mark.parametrize("kind", ["responses", "embeddings"])
def test_a_cache_with_damaged_pages_is_moved_aside_and_its_readable_rows_kept(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / f"{kind}.sqlite"
    original = filled_cache(kind, path)
    overwrite_pages(path, DAMAGED_PAGES)
    with caplog.at_level(logging.WARNING, logger="memsys.kvstore"):
        found, cache = served(kind, path)
    moved = tmp_path / f"{kind}.sqlite.corrupt"
    (warning,) = [record.getMessage() for record in caplog.records]
    assert str(path) in warning and str(moved) in warning
    salvaged = stored_rows(path, kind)
    del salvaged[ONE_MORE[kind]]  # written after the repair
    assert 0 < len(salvaged) < ROWS
    assert all(original.get(key) == value for key, value in salvaged.items())
    assert found == set(salvaged)
    report = cache.integrity()
    assert (report["moved_aside"], report["salvaged_rows"]) == (str(moved), len(salvaged))

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memsys.kvstore"):
        again, cache = served(kind, path)  # a rerun: nothing left to repair
    assert again == found and not caplog.records
    assert cache.integrity() == {"corrupt_rows": 0, "moved_aside": None}
    assert sorted(p.name for p in tmp_path.glob("*corrupt")) == [moved.name]


@pytest.mark.parametrize("first", ["get_many", "len", "put_many", "discard"])
def test_damage_found_by_any_operation_is_repaired_and_the_operation_completes(
    tmp_path: Path, first: str
) -> None:
    path = tmp_path / "responses.sqlite"
    original = filled_cache("responses", path)
    overwrite_pages(path, DAMAGED_PAGES)
    store = SQLiteKV(path, table="responses")
    operations = {
        "get_many": lambda: store.get_many(list(original)),
        "len": lambda: len(store),
        "put_many": lambda: store.put_many(original.items()),
        "discard": lambda: [store.discard(key, b"other", "test") for key in original],
    }
    operations[first]()
    assert store.moved_aside == tmp_path / "responses.sqlite.corrupt"
    salvaged = store.integrity()["salvaged_rows"]
    assert 0 < salvaged < ROWS
    expected = ROWS if first == "put_many" else salvaged
    assert len(store) == len(SQLiteKV(path, table="responses")) == expected


def test_a_digest_or_key_that_is_not_utf8_loses_only_its_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "llm_responses.sqlite"
    original = filled_cache("responses", path)
    bad_digest, bad_key = response_key(7), response_key(8)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "UPDATE responses SET digest = CAST(x'fffe' AS TEXT) WHERE key = ?", (bad_digest,)
        )
        db.execute(
            "UPDATE responses SET key = CAST(x'ff' AS TEXT) || key WHERE key = ?", (bad_key,)
        )
    cache = ResponseCache(path)
    with caplog.at_level(logging.WARNING, logger="memsys.kvstore"):
        assert cache.get("m", LLMRequest(ask("question 7"))) is None
        assert cache.get("m", LLMRequest(ask("question 9"))) == reply(9)
    moved = tmp_path / "llm_responses.sqlite.corrupt"
    assert str(path) in caplog.text and str(moved) in caplog.text
    assert cache.integrity() == {
        "corrupt_rows": 2,
        "moved_aside": str(moved),
        "salvaged_rows": ROWS - 2,
    }
    kept = {key: value for key, value in original.items() if key not in (bad_digest, bad_key)}
    assert stored_rows(path, "responses") == kept


def test_two_users_of_a_damaged_file_move_it_aside_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two stores on one file (as two sweep workers): the second finds the file replaced and
    uses the fresh one, instead of moving it aside again."""
    path = tmp_path / "responses.sqlite"
    original = filled_cache("responses", path)
    overwrite_pages(path, DAMAGED_PAGES)
    first, second = SQLiteKV(path, table="responses"), SQLiteKV(path, table="responses")
    for store in (first, second):
        assert store.get_many([]) == {}  # both have the damaged file open
    with caplog.at_level(logging.WARNING, logger="memsys.kvstore"):
        found = first.get_many(list(original))
        assert second.get_many(list(original)) == found
        second.put("new", b"value")
        assert first.get("new") == b"value"
    assert len(caplog.records) == 1 and second.moved_aside is None
    assert [p.name for p in tmp_path.glob("*corrupt")] == ["responses.sqlite.corrupt"]


def _count_rows_at_once(path: Path, barrier: Any, counts: Any) -> None:
    store = SQLiteKV(path, table="responses")
    store.get_many([])  # the damaged file is open before any worker finds the damage
    barrier.wait()
    counts.put(len(store))


def test_worker_processes_that_find_the_damage_at_once_repair_it_once(tmp_path: Path) -> None:
    """They take turns: one moves the file aside and salvages it, the others wait, find it
    replaced, and read the complete fresh file."""
    path = tmp_path / "responses.sqlite"
    filled_cache("responses", path)
    overwrite_pages(path, DAMAGED_PAGES)
    context = multiprocessing.get_context("fork")
    barrier, counts = context.Barrier(3), context.Queue()
    workers = [
        context.Process(target=_count_rows_at_once, args=(path, barrier, counts)) for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    seen = [counts.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    salvaged = len(SQLiteKV(path, table="responses"))
    assert 0 < salvaged < ROWS and seen == [salvaged] * 3
    assert [p.name for p in tmp_path.glob("*corrupt")] == ["responses.sqlite.corrupt"]


def test_a_locked_cache_is_not_mistaken_for_a_damaged_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "responses.sqlite"
    filled_cache("responses", path)
    monkeypatch.setattr("memsys.kvstore.BUSY_TIMEOUT_S", 0.05)
    store = SQLiteKV(path, table="responses")
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(CacheError, match="locked"):  # one error line naming the file
            store.put("k", b"v")
        other.execute("ROLLBACK")
    assert store.moved_aside is None and not list(tmp_path.glob("*corrupt"))


def test_a_full_cache_disk_leaves_values_uncached_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "llm_responses.sqlite"
    cache = ResponseCache(path)
    cache.put("m", LLMRequest(ask("before")), Completion("kept", 1, 1))
    # Fault injection: cap the file at its current size, as a full disk would.
    cache._store._connect().execute("PRAGMA max_page_count = 1")  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, logger="memsys.kvstore"):
        for number in range(20):
            cache.put("m", LLMRequest(ask(f"q {number}")), Completion("x" * 2000, 1, 1))
    (warning,) = caplog.records
    assert str(path) in warning.getMessage() and "full" in warning.getMessage()
    assert cache.get("m", LLMRequest(ask("before"))) == Completion("kept", 1, 1)


@pytest.fixture
def services() -> Services:
    return Services(embedder=Embedder(EmbedderConfig(), EmbeddingCache()), tokens=None)  # type: ignore[arg-type]


def test_a_memory_that_cannot_be_stored_is_used_and_leaves_no_part_file(
    tmp_path: Path,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, system, conversation = MemoryStore(tmp_path), FullHistory(services), tiny_fixture()

    def disk_full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("memsys.files.os.fsync", disk_full)
    with caplog.at_level(logging.WARNING, logger="benchmarks.pipeline.memory_store"):
        got = store.load_or_build(system, conversation)
        memory, loaded = got.memory, got.loaded
    assert not loaded and memory.items
    path = store.path(system, conversation)
    assert str(path) in caplog.text and os.strerror(errno.ENOSPC) in caplog.text
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    monkeypatch.undo()
    assert store.load_or_build(system, conversation).loaded is False  # stored this time
    assert store.load_or_build(system, conversation).loaded is True


def test_opening_the_memory_store_removes_part_files_of_killed_writers(tmp_path: Path) -> None:
    folder = tmp_path / "fullhistory"
    folder.mkdir()
    stale, live = folder / "tmpstale.part", folder / "tmplive.part"
    for part in (stale, live):
        part.write_text('{"sha256": "')
    old = time.time() - STALE_PART_S - 60
    os.utime(stale, (old, old))
    MemoryStore(tmp_path)
    assert (stale.exists(), live.exists()) == (False, True)
