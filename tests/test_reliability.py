"""Reliability of the QA runner: killed mid-phase, a failing backbone, corrupt caches, fuzzed
inputs, and no credential in anything it writes."""

from __future__ import annotations

import copy
import io
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_fakes import ScriptedProvider, ask, make_backbone
from omegaconf import DictConfig, OmegaConf
from run_helpers import (
    FIXTURE,
    compose_config,
    fixture_overrides,
    kill_when,
    read_ledger,
    read_records,
    stable,
    start_cli,
)

from benchmarks.answering.prompts import TEMPLATES
from benchmarks.data import DatasetError, iter_longmemeval, read_locomo
from benchmarks.data.longmemeval import parse_instance
from benchmarks.data.paths import REPO_ROOT
from benchmarks.data.segmentation import (
    read_dts_hub,
    read_superdialseg_json,
    read_tiage_official,
    read_topic_id_txt,
)
from benchmarks.harness import instantiate_method
from benchmarks.metrics.judge import LOCOMO_INSTRUCTION
from benchmarks.report import load_runs
from benchmarks.run import run
from benchmarks.runlog import latest_records
from benchmarks.settings import CACHE_MODES, ConfigError, validate
from benchmarks.summary import format_summary
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm import Completion, LLMRequest, ResponseCache
from memsys.llm.cache import request_key
from memsys.llm.fake_server import FakeChatServer

#: One llama.cpp thread: on shared cores, more threads spin against each other and run slower.
EMBEDDED_ONE_THREAD = "backbone.provider.n_threads=1"


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("MEMBENCH_DATA", "MEMSYS_CACHE_DIR", "VLLM_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)


def stages(run_dir: Path) -> list[str]:
    return [call["stage"] for call in read_ledger(run_dir)]


def memory_payloads(cache: Path) -> dict[str, Any]:
    """Constructed memories under a cache folder by path, without construction timings."""

    def untimed(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: untimed(item) for key, item in value.items() if key != "seconds"}
        return [untimed(item) for item in value] if isinstance(value, list) else value

    return {
        str(path.relative_to(cache)): untimed(json.loads(path.read_text())["payload"])
        for path in sorted((cache / "memories").rglob("*.json"))
    }


def test_kill_during_construction_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    """SIGKILL while an llm-mode method builds its memory: the rerun keeps the replies already
    cached, builds the memory once, and its records equal those of a run that built the same
    memory in one go from the same replies (so the model's determinism is not what is tested)."""
    cache = tmp_path / "cache"
    # The first session only (half the construction calls): the test's point is the kill.
    method = ["method=fracom_llm", "answer=none", "+subset.max_sessions=1", EMBEDDED_ONE_THREAD]
    overrides = [*fixture_overrides(tmp_path / "killed", cache), *method]

    def constructing(run_dir: Path) -> bool:
        return stages(run_dir).count("construction") >= 2

    run_dir = kill_when(start_cli(overrides, tmp_path / "hydra"), tmp_path / "killed", constructing)
    killed_calls = stages(run_dir)
    assert set(killed_calls) == {"construction"}
    assert not (run_dir / "predictions.jsonl").exists()
    assert memory_payloads(cache) == {}, "a memory written by a killed construction"

    resumed = run(compose_config(overrides))
    assert (resumed["construction"]["built"], resumed["construction"]["loaded"]) == (1, 0)
    now = resumed["accounting"]["this_invocation"]["stages"]["construction"]
    assert now["cache_hits"] >= len(killed_calls), "replies from before the kill were lost"
    records = read_records(run_dir)
    assert [r["question_id"] for r in records] == ["tiny-1:q0", "tiny-1:q3", "tiny-1:q4"]

    fresh_cache = tmp_path / "fresh_cache"  # same replies, no memories: construction runs again
    shutil.copytree(cache, fresh_cache, ignore=shutil.ignore_patterns("memories"))
    whole = run(compose_config([*fixture_overrides(tmp_path / "whole", fresh_cache), *method]))
    assert whole["construction"]["built"] == 1
    total = whole["accounting"]["this_invocation"]["total"]
    assert total["calls"] == total["cache_hits"] > 0
    assert [stable(r) for r in records] == [stable(r) for r in read_records(Path(whole["run_dir"]))]
    assert memory_payloads(cache) == memory_payloads(fresh_cache)


def test_kill_during_judging_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    """SIGKILL between a question's answer and its logged line (its verdict being asked for):
    the rerun answers it again from the cache, judges it, and logs each question once."""
    cache = tmp_path / "cache"
    method = ["method=turn_rag_bm25", "batch_size=1", EMBEDDED_ONE_THREAD]
    overrides = [*fixture_overrides(tmp_path / "killed", cache), *method]

    def judging(run_dir: Path) -> bool:
        log_file = run_dir / "predictions.jsonl"
        logged = len(log_file.read_text().splitlines()) if log_file.exists() else 0
        return logged >= 1 and stages(run_dir).count("answering") > logged

    run_dir = kill_when(start_cli(overrides, tmp_path / "hydra"), tmp_path / "killed", judging)
    killed_lines = len(read_records(run_dir))
    killed_answers = stages(run_dir).count("answering")
    assert 1 <= killed_lines < 6 and killed_answers >= killed_lines
    assert "judging" in stages(run_dir)

    resumed = run(compose_config(overrides))
    answering = resumed["accounting"]["this_invocation"]["stages"]["answering"]
    assert answering["calls"] == 6 - killed_lines
    assert answering["cache_hits"] >= killed_answers - killed_lines
    records = read_records(run_dir)
    assert [r["question_id"] for r in records] == [f"tiny-1:q{i}" for i in range(6)]
    assert all("judging" in r for r in records)

    whole = run(compose_config([*fixture_overrides(tmp_path / "whole", cache), *method]))
    assert [stable(r) for r in records] == [stable(r) for r in read_records(Path(whole["run_dir"]))]


# A backbone that fails in the middle of a run: an OpenAI-compatible fake server, scripted per
# question, stands in for vLLM or OpenAI.

JUDGE = LOCOMO_INSTRUCTION.splitlines()[0]
QUESTIONS = {
    "dog": "What is the name of Ana's dog?",
    "bowl": "When did Ben make his first bowl?",
    "activities": "Which activities do Ana and Ben do in their free time?",
    "beach": "Would Ana enjoy a trip to a dog-friendly beach?",
    "cat": "What is the name of Ben's cat?",
    "5k": "How long did Ana take to run the 5k?",
}
CORRECT = '{"label": "CORRECT"}'


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer(hang_s=10.0) as running:
        yield running


def server_backbone(server: FakeChatServer, api_key_env: str = "null") -> list[str]:
    """Overrides for ``backbone=openai_server`` at the fake server, with quick retries."""
    return [
        "backbone=openai_server",
        "backbone.provider.model=fake",
        f"backbone.provider.base_url={server.base_url}",
        f"backbone.provider.api_key_env={api_key_env}",
        "backbone.concurrency=4",
        "backbone.retry.request_timeout_s=2",
        "+backbone.retry.max_attempts=2",
        "+backbone.retry.initial_backoff_s=0.001",
        "+backbone.retry.max_backoff_s=0.01",
    ]


def by_question(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    names = {text: name for name, text in QUESTIONS.items()}
    return {names[record["question"]]: record for record in records}


def test_failing_backbone_gives_failure_lines_and_counts(
    tmp_path: Path, server: FakeChatServer
) -> None:
    """Answers that fail for good (HTTP 500, garbage bodies, timeouts) become failure lines;
    a judge verdict that stays unparseable after its one retry is a counted judge failure."""
    server.on(QUESTIONS["dog"], "500")
    server.on(QUESTIONS["bowl"], "malformed")
    server.on(QUESTIONS["activities"], "hang")
    server.on(QUESTIONS["beach"], "429", times=1)  # transient: retried, then answered
    server.on([QUESTIONS["beach"], JUDGE], reply="I would rather not say.")
    server.on([QUESTIONS["cat"], JUDGE], reply="CORRECT, I think", times=1)
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    summary = run(compose_config(overrides))

    run_dir = Path(summary["run_dir"])
    records = by_question(read_records(run_dir))
    assert len(records) == 6
    assert "HTTP 500" in records["dog"]["failure"]
    assert "malformed reply" in records["bowl"]["failure"]
    assert "timed out" in records["activities"]["failure"]
    for name in ("dog", "bowl", "activities"):
        assert records[name]["failure"].startswith("answer: ")
        assert records[name]["prediction"] is None and "judging" not in records[name]
    assert records["beach"]["failure"] is None and records["beach"]["prediction"]
    assert records["beach"]["judging"]["attempts"] == 2
    assert records["beach"]["judging"]["error"].startswith("unparseable verdict")
    assert records["beach"]["scores"]["judge_acc"] is None
    assert (records["cat"]["judging"]["attempts"], records["cat"]["judging"]["error"]) == (2, None)
    assert records["cat"]["scores"]["judge_acc"] == 1.0
    assert records["5k"]["judging"]["attempts"] == 1

    expected = {"answer": 3, "judge": 1}
    assert summary["failures"] == expected
    assert json.loads((run_dir / "metrics.json").read_text())["failures"] == expected
    assert summary["scores"]["judge_acc"]["n"] == 1  # 5k only: cat is adversarial, excluded
    parse = summary["judge_parse"]["locomo"]
    assert parse["unparseable"] + parse["invalid"] == 3  # beach twice, cat once
    answering = summary["accounting"]["stages"]["answering"]
    assert (answering["failed"], answering["retries"]) == (3, 4)
    assert "failures: answer 3, judge 1" in format_summary(summary)


def test_a_rerun_asks_the_failed_questions_again(tmp_path: Path, server: FakeChatServer) -> None:
    """Failed answers are not cached, so once the endpoint is back a rerun answers them; their new
    lines supersede the failure lines (same ids, same places), and every reader sees six."""
    server.on(QUESTIONS["dog"], "500")
    server.on(QUESTIONS["bowl"], "malformed")
    server.on([QUESTIONS["beach"], JUDGE], reply="I would rather not say.")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    first = run(compose_config(overrides))
    assert first["failures"] == {"answer": 2, "judge": 1}
    run_dir = Path(first["run_dir"])
    order = [r["question_id"] for r in read_records(run_dir)]

    server.clear()  # the endpoint is back; beach's unparseable verdict stays in the cache
    server.on(JUDGE, reply=CORRECT)
    second = run(compose_config(overrides))
    assert second["failures"] == {"answer": 0, "judge": 1}
    assert second["invocation"]["retried"] == 3 and second["invocation"]["questions"] == 0
    answering = second["accounting"]["this_invocation"]["stages"]["answering"]
    assert (answering["calls"], answering["cache_hits"]) == (3, 1)  # beach's answer: cached
    assert "asked 3 failed question(s) again" in format_summary(second)
    lines = read_records(run_dir)
    assert len(lines) == 9  # 6 + 3 superseding lines, appended
    latest = by_question(list(latest_records(lines, "question_id").values()))
    assert latest["dog"]["prediction"] and latest["bowl"]["scores"]["judge_acc"] == 1.0
    assert [
        r["question_id"] for r in load_runs(tmp_path / "runs", "locomo", "full")[0].records
    ] == order
    assert second["questions"] == 6 and second["invocations"]["questions"] == 6


def test_breaker_stops_the_cli_with_a_clear_message_and_a_rerun_resumes(
    tmp_path: Path, server: FakeChatServer
) -> None:
    for name in ("activities", "beach", "cat", "5k"):  # the endpoint "dies" after two questions
        server.on(QUESTIONS[name], "500")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        "batch_size=2",
        *server_backbone(server),
        "+backbone.retry.max_consecutive_failures=2",
    ]
    stopped = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", *overrides, f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert stopped.returncode == 2, stopped.stderr
    message = stopped.stderr.strip().splitlines()[-1]
    assert message.startswith("error: stopping: 2 consecutive requests to")
    assert server.base_url in message and "HTTP 500" in message
    assert "Traceback" not in stopped.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert [r["question"] for r in read_records(run_dir)] == [
        QUESTIONS["dog"],
        QUESTIONS["bowl"],
    ]

    server.clear()  # the endpoint is back
    server.on(JUDGE, reply=CORRECT)
    resumed = run(compose_config(overrides))
    assert resumed["run_dir"] == str(run_dir)
    assert resumed["accounting"]["this_invocation"]["stages"]["answering"]["calls"] == 4
    assert resumed["failures"] == {"answer": 0, "judge": 0}
    assert len({r["question_id"] for r in read_records(run_dir)}) == 6


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


# No credential in anything the harness writes.

PLANTED_KEY = "sk-planted-RELIABILITY-7c1d9e3f5a2b4c6d8e0f"


def test_no_api_key_in_any_file_a_full_cli_run_writes(
    tmp_path: Path, server: FakeChatServer
) -> None:
    server.on(QUESTIONS["dog"], "500")  # an error message in the log, too
    server.on(JUDGE, reply=CORRECT)
    hydra_dir = tmp_path / "hydra"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
            "method=turn_rag_bm25",
            *server_backbone(server, api_key_env="OPENAI_API_KEY"),
            f"hydra.run.dir={hydra_dir}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OPENAI_API_KEY": PLANTED_KEY},
    )
    assert result.returncode == 0, result.stderr
    assert "failures: answer 1, judge 0" in result.stdout
    assert server.authorization_headers, "the backbone never reached the server"
    assert set(server.authorization_headers) == {f"Bearer {PLANTED_KEY}"}, "the key was sent"
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    names = {path.name for path in written}
    assert {"predictions.jsonl", "metrics.json", "llm_calls.jsonl", "config.yaml"} <= names
    assert "llm_responses.sqlite" in names and (hydra_dir / ".hydra" / "config.yaml").exists()
    for path in written:
        assert PLANTED_KEY.encode() not in path.read_bytes(), path
    assert PLANTED_KEY not in result.stdout + result.stderr


# Fuzzed dataset files and configs: a damaged file loads, or raises DatasetError naming the file
# (and, inside a list of records, the record); a bad value is a ConfigError naming its key.
# Never a bare KeyError, TypeError, AttributeError, IndexError or ValueError.

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=5,
)
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def locations(document: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) inside a JSON document, depth first."""
    found: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict | list):
            for key in list(node) if isinstance(node, dict) else range(len(node)):
                found.append((node, key))
                walk(node[key])

    walk(document)
    return found


@st.composite
def damaged(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one to four damages: a key or item dropped, a value set to null,
    replaced by a value of another type, or a string or list truncated."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):
        spots = locations(document)
        if not spots:
            break
        container, key = spots[draw(st.integers(0, len(spots) - 1))]
        value = container[key]
        damage = draw(st.sampled_from(["drop", "null", "retype", "truncate"]))
        if damage == "drop":
            del container[key]
        elif damage == "null":
            container[key] = None
        elif damage == "truncate" and isinstance(value, str | list) and value:
            container[key] = value[: draw(st.integers(0, len(value) - 1))]
        else:
            container[key] = draw(JSON_VALUES)
    return document


@st.composite
def damaged_bytes(draw: st.DrawFn, content: bytes) -> bytes:
    """``content`` cut short, with a byte changed, or with random bytes spliced in."""
    position = draw(st.integers(0, len(content) - 1))
    damage = draw(st.sampled_from(["cut", "flip", "splice"]))
    if damage == "cut":
        return content[:position]
    if damage == "flip":
        return (
            content[:position]
            + bytes([content[position] ^ draw(st.integers(1, 255))])
            + (content[position + 1 :])
        )
    return content[:position] + draw(st.binary(min_size=1, max_size=8)) + content[position:]


def loads_or_names(load: Callable[[Path], Any], path: Path, *, record: bool) -> None:
    """``load(path)`` succeeds, or fails with a DatasetError naming ``path`` (and a record)."""
    try:
        load(path)
    except DatasetError as error:
        assert str(path) in str(error)
        assert error.record is not None or not record, f"no record named: {error}"


TINY_LOCOMO = json.loads((FIXTURE / "locomo" / "tiny_conversation.json").read_text())


@FUZZ
@given(document=damaged(TINY_LOCOMO))
def test_fuzzed_locomo_records(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(document))
    loads_or_names(read_locomo, path, record=True)


@FUZZ
@given(content=damaged_bytes(json.dumps(TINY_LOCOMO).encode()) | JSON_VALUES.map(json.dumps))
def test_fuzzed_locomo_file(tmp_path: Path, content: bytes | str) -> None:
    path = tmp_path / "locomo.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    loads_or_names(read_locomo, path, record=False)


LME_ITEM = {
    "question_id": "q1_abs",
    "question_type": "temporal-reasoning",
    "question": "How many days passed between the two trips?",
    "answer": 3,
    "question_date": "2023/05/30 (Tue) 23:40",
    "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/04/01 (Sat) 09:00"],
    "haystack_session_ids": ["answer_1", "filler_2"],
    "haystack_sessions": [
        [
            {"role": "user", "content": "I went to Porto.", "has_answer": True},
            {"role": "assistant", "content": "Lovely!"},
        ],
        [{"role": "user", "content": "Any bread tips?"}],
    ],
    "answer_session_ids": ["answer_1"],
}


@FUZZ
@given(item=damaged(LME_ITEM) | JSON_VALUES)
def test_fuzzed_longmemeval_item(item: Any) -> None:
    source = "longmemeval/longmemeval_oracle_lme_jsons.tar.xz:lme_jsons/2_q1_abs.json"
    try:
        parse_instance(item, source=source)
    except DatasetError as error:
        assert str(error).startswith(f"{source}: record ")


def lme_archive(data_dir: Path, member: bytes) -> None:
    folder = data_dir / "longmemeval"
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        info = tarfile.TarInfo("lme_jsons/2_q1_abs.json")
        info.size = len(member)
        tar.addfile(info, io.BytesIO(member))
    (folder / "longmemeval_oracle_lme_jsons.tar.xz").write_bytes(buffer.getvalue())


@settings(FUZZ, max_examples=50)
@given(member=damaged_bytes(json.dumps(LME_ITEM).encode()))
def test_fuzzed_longmemeval_archive_member(tmp_path: Path, member: bytes) -> None:
    lme_archive(tmp_path, member)
    try:
        list(iter_longmemeval("oracle", tmp_path))
    except DatasetError as error:
        assert "lme_jsons/2_q1_abs.json" in str(error) and error.record is not None


SEGMENTATION_FILES: dict[str, tuple[Callable[[Path], Any], Any]] = {
    "dts_hub": (
        read_dts_hub,
        [
            {
                "dial_id": 4,
                "utterances": ["hi", "hello", "cats?"],
                "segments": [2, 1],
                "set": "test",
            },
            {"dial_id": 5, "utterances": ["a", "b"], "segments": [2], "set": "dev"},
        ],
    ),
    "tiage": (read_tiage_official, {"7": [["hi", "-1"], ["how are you", "0"], ["cats!", "1"]]}),
    "superdialseg": (
        lambda path: read_superdialseg_json(path, "tiage"),
        {
            "dial_data": {
                "tiage": [
                    {
                        "dial_id": "d1",
                        "turns": [
                            {"utterance": "hi", "role": "user", "segmentation_label": 0},
                            {"utterance": "cats?", "role": "agent", "segmentation_label": 1},
                            {"utterance": "dogs.", "role": "user", "segmentation_label": 0},
                        ],
                    }
                ]
            }
        },
    ),
}


@pytest.mark.parametrize("name", sorted(SEGMENTATION_FILES))
def test_fuzzed_segmentation_json(tmp_path: Path, name: str) -> None:
    reader, document = SEGMENTATION_FILES[name]

    @FUZZ
    @given(content=damaged(document).map(json.dumps) | damaged_bytes(json.dumps(document).encode()))
    def check(content: str | bytes) -> None:
        path = tmp_path / f"{name}.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        loads_or_names(reader, path, record=False)

    check()


TOPIC_ID_TXT = b"call_id_0\n0 hi there\n0 hello\n1 cats?\ncall_id_1\n-1 only one\n"


@FUZZ
@given(content=damaged_bytes(TOPIC_ID_TXT))
def test_fuzzed_topic_id_txt(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "segmentation.txt"
    path.write_bytes(content)
    loads_or_names(read_topic_id_txt, path, record=False)


NOT_AN_INT = (
    st.booleans()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["${missing.key}", "12", "1e3", ""])
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2)
)
NOT_A_CHOICE = NOT_AN_INT | st.integers() | st.none()
#: Runner keys and values of a wrong type or out of range for them.
WRONG_RUN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "answer.context_budget": NOT_AN_INT | st.none() | st.integers(max_value=0),
    "answer.max_tokens": NOT_AN_INT | st.none() | st.integers(max_value=-1),
    "subset.max_questions": NOT_AN_INT | st.integers(max_value=0),
    "subset.conversations": NOT_AN_INT | st.integers(max_value=0),
    "batch_size": NOT_AN_INT | st.none() | st.integers(max_value=0),
    "seed": NOT_AN_INT | st.none() | st.integers(max_value=-1),
    "adversarial": NOT_A_CHOICE.filter(lambda value: value not in ("exclude", "include")),
    "llm_cache_mode": NOT_A_CHOICE.filter(lambda value: value not in CACHE_MODES),
    "answer.template": NOT_A_CHOICE.filter(lambda value: value not in (*TEMPLATES, None)),
    "judge.enabled": NOT_A_CHOICE.filter(lambda value: not isinstance(value, bool)),
}


@pytest.fixture(scope="module")
def base_config() -> DictConfig:
    return compose_config(["method=turn_rag_bm25"])


def with_value(cfg: DictConfig, key: str, value: Any) -> DictConfig:
    changed = copy.deepcopy(cfg)
    OmegaConf.update(changed, key, value, merge=False)
    return changed


@settings(FUZZ, max_examples=200)
@given(data=st.data())
def test_fuzzed_run_keys_are_config_errors_naming_the_key(
    base_config: DictConfig, data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from(sorted(WRONG_RUN_VALUES)))
    value = data.draw(WRONG_RUN_VALUES[key])
    with pytest.raises(ConfigError) as raised:
        validate(with_value(base_config, key, value))
    assert raised.value.key == key


#: Options of two methods (one a baseline, one with many numeric knobs) and wrong values.
WRONG_METHOD_VALUES: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "turn_rag_bm25": {
        "top_k": NOT_AN_INT | st.none() | st.integers(max_value=0),
        "retriever": NOT_A_CHOICE.filter(lambda value: value not in ("bm25", "dense")),
    },
    "cast": {
        "top_k": NOT_AN_INT | st.none() | st.integers(max_value=0),
        "window": NOT_AN_INT | st.none(),
        "max_gap_days": st.text(max_size=4) | st.none() | st.lists(st.floats(), max_size=2),
        "fusion": NOT_A_CHOICE.filter(lambda value: value not in ("rerank", "slot3")),
    },
}


@pytest.mark.parametrize("method", sorted(WRONG_METHOD_VALUES))
def test_fuzzed_method_options_are_config_errors_naming_the_key(method: str) -> None:
    cfg = compose_config([f"method={method}"])
    services = Services(embedder=Embedder(EmbedderConfig(), EmbeddingCache()), tokens=None)  # type: ignore[arg-type]
    instantiate_method(cfg.method, services)  # the config as shipped is fine

    @settings(FUZZ, max_examples=100)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        option = data.draw(st.sampled_from(sorted(WRONG_METHOD_VALUES[method])))
        value = data.draw(WRONG_METHOD_VALUES[method][option])
        changed = with_value(cfg, f"method.{option}", value)
        validate(changed)  # the runner's own keys are untouched
        with pytest.raises(ConfigError) as raised:
            instantiate_method(changed.method, services)
        error = raised.value
        assert error.key == f"method.{option}" or (error.key == "method" and option in str(error))

    check()
