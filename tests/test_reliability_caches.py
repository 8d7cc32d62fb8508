"""Corrupt caches and memory files are detected and rebuilt, never trusted."""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_fakes import ScriptedProvider, ask, make_backbone
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

from benchmarks.run import run
from benchmarks.summary import format_summary
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm import Completion, LLMRequest, ResponseCache
from memsys.llm.cache import request_key
from memsys.llm.fake_server import FakeChatServer

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
    assert cache.integrity() == {"corrupt_rows": 0, "moved_aside": str(moved)}
    assert f"{path} is not a readable SQLite database" in caplog.text


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
    assert second["caches"]["llm_responses"] == {"corrupt_rows": 0, "moved_aside": moved}
    assert json.loads(memory_file.read_text()) == original
    retrieved = [
        [r["retrieved_turn_ids"] for r in read_records(Path(summary["run_dir"]))]
        for summary in (first, second)
    ]
    assert retrieved[0] == retrieved[1]
    assert second["failures"] == {"answer": 0, "judge": 0}
    screen = format_summary(second)
    assert "1 corrupt file(s) rebuilt" in screen and moved in screen
