"""The sharded cache layout: per-process append-only shards merged on read, for a cache folder
that jobs on several machines share (:mod:`memsys.kvshards`)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from run_helpers import compose_config, fixture_overrides, read_records, stable

from benchmarks.config.values import ConfigError
from benchmarks.pipeline.run import run
from memsys.embed import EmbeddingCache
from memsys.kvshards import (
    LAYOUT_FILE,
    LayoutMismatchError,
    ShardedKV,
    claim_layout,
    folder_layout,
    open_kv,
)
from memsys.kvstore import SQLiteKV

WRITERS = 4
KEYS_EACH = 300


def write_keys(folder: str, writer: int) -> None:
    """One job: its own keys and a share of keys every job writes (the same computation)."""
    store = ShardedKV(folder, "kv")
    for start in range(0, KEYS_EACH, 25):
        batch = [(f"own-{writer}-{i}", f"{writer}:{i}".encode()) for i in range(start, start + 25)]
        batch += [(f"common-{i}", f"common:{i}".encode()) for i in range(start, start + 5)]
        store.put_many(batch)


def test_concurrent_writers_each_keep_a_shard_and_a_reader_sees_them_all(tmp_path: Path) -> None:
    folder = tmp_path / "embeddings.shards"
    context = multiprocessing.get_context("spawn")
    jobs = [context.Process(target=write_keys, args=(str(folder), w)) for w in range(WRITERS)]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(timeout=120)
        assert job.exitcode == 0
    assert len(list(folder.glob("*.jsonl"))) == WRITERS  # one writer a file, never two

    reader = ShardedKV(folder, "kv")
    keys = [f"own-{w}-{i}" for w in range(WRITERS) for i in range(KEYS_EACH)]
    found = reader.get_many(keys + [f"common-{i}" for i in range(KEYS_EACH)])
    assert found == {
        **{f"own-{w}-{i}": f"{w}:{i}".encode() for w in range(WRITERS) for i in range(KEYS_EACH)},
        **{f"common-{i}": f"common:{i}".encode() for i in range(KEYS_EACH) if i % 25 < 5},
    }
    assert len(reader) == WRITERS * KEYS_EACH + KEYS_EACH // 5
    assert reader.integrity() == {"corrupt_rows": 0, "moved_aside": None}


def line_of(tmp_path: Path, key: str, value: bytes) -> bytes:
    """The shard line a writer appends for ``(key, value)``."""
    folder = tmp_path / f"scratch-{key}.shards"
    ShardedKV(folder, "kv").put(key, value)
    (shard,) = folder.glob("*.jsonl")
    return next(line for line in shard.read_bytes().splitlines(True) if f'"{key}"'.encode() in line)


def test_a_line_being_written_waits_and_a_damaged_line_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memsys.kvshards.RESCAN_S", 0.0)
    folder = tmp_path / "kv.shards"
    ShardedKV(folder, "kv").put_many([("a", b"alpha"), ("b", b"beta")])
    damaged = line_of(tmp_path, "b", b"beta").replace(b'"k":"b"', b'"k":"c"')  # digest fails
    torn = line_of(tmp_path, "d", b"delta")
    other = folder / "other-1-ffff.jsonl"
    other.write_bytes(damaged + torn[:20])  # another job, mid-way through its line for d

    reader = ShardedKV(folder, "kv")
    assert reader.get_many(["a", "b", "c", "d"]) == {"a": b"alpha", "b": b"beta"}
    assert reader.corrupt_rows == 1
    with other.open("ab") as handle:  # that job finishes the line
        handle.write(torn[20:])
    assert reader.get("d") == b"delta"  # a miss rescans the shards that grew


def test_a_value_the_caller_rejects_is_a_miss_from_then_on(tmp_path: Path) -> None:
    store = ShardedKV(tmp_path / "kv.shards", "kv")
    store.put("a", b"not a vector")
    store.discard("a", b"not a vector", "does not decode")
    assert store.get("a") is None
    assert store.integrity()["corrupt_rows"] == 1


def test_a_folder_keeps_the_layout_its_first_job_chose(tmp_path: Path) -> None:
    assert folder_layout(tmp_path) == "sqlite"
    assert isinstance(open_kv(tmp_path / "embeddings.sqlite", "embeddings"), SQLiteKV)
    claim_layout(tmp_path / "shared", "shards")
    assert (tmp_path / "shared" / LAYOUT_FILE).exists()
    store = open_kv(tmp_path / "shared" / "embeddings.sqlite", "embeddings")
    assert isinstance(store, ShardedKV)
    assert store.path == tmp_path / "shared" / "embeddings.shards"
    with pytest.raises(LayoutMismatchError, match="holds the shards layout"):
        claim_layout(tmp_path / "shared", "sqlite")

    SQLiteKV(tmp_path / "local" / "parses.sqlite", "parses").put("k", b"v")
    with pytest.raises(LayoutMismatchError, match="holds the sqlite layout"):
        claim_layout(tmp_path / "local", "shards")  # would hide what the folder holds
    claim_layout(tmp_path / "local", "sqlite")


def test_the_embedding_cache_reads_what_another_process_stored(tmp_path: Path) -> None:
    claim_layout(tmp_path, "shards")
    vector = [0.6, 0.8]
    first = EmbeddingCache(tmp_path / "embeddings.sqlite")
    first.put_many({"k": np.array(vector, dtype=np.float32)})
    second = EmbeddingCache(tmp_path / "embeddings.sqlite")
    np.testing.assert_array_equal(second.get_many(["k"])["k"], np.array(vector, np.float32))


def test_a_run_over_a_sharded_cache_equals_one_over_sqlite(tmp_path: Path) -> None:
    records = {}
    for sharing in ("sqlite", "shards"):
        results, cache = tmp_path / sharing / "runs", tmp_path / sharing / "cache"
        overrides = fixture_overrides(results, cache)
        overrides += ["method=turn_rag_dense", "answer=none", f"cache_sharing={sharing}"]
        summary = run(compose_config(overrides))
        run_dir = Path(summary["run_dir"])
        records[sharing] = (run_dir.name, [stable(r) for r in read_records(run_dir)])
    assert records["shards"] == records["sqlite"]  # same run id: sharing is not identity
    assert list((tmp_path / "shards" / "cache" / "embeddings.shards").glob("*.jsonl"))
    assert not list((tmp_path / "shards" / "cache").glob("*.sqlite"))


def test_a_folder_of_the_other_layout_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    claim_layout(tmp_path / "cache", "shards")
    overrides = fixture_overrides(tmp_path / "runs", tmp_path / "cache")
    with pytest.raises(ConfigError, match=r"cache_sharing.*holds the shards layout"):
        run(compose_config([*overrides, "method=turn_rag_bm25", "answer=none"]))
