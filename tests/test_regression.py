"""The CI regression's machinery: cases, comparison, and the record → replay round trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fakes.llm import ScriptedProvider, ask, make_backbone

from benchmarks.checks import regression
from benchmarks.checks.regression import (
    CONF,
    differences,
    export_embeddings,
    load_cases,
    method_of,
    seed_embeddings,
)
from memsys.embed import EmbeddingCache
from memsys.llm import LLMRequest, ResponseCache
from memsys.llm.errors import CacheMissError
from memsys.llm.replay import ReplayJournal, read_entries, seed_cache, write_replay_file


def test_every_case_names_an_existing_config_and_is_unique() -> None:
    cases, tolerance = load_cases()
    assert 0 < tolerance < 1e-3
    assert len({case.name for case in cases}) == len(cases)
    folders = {"method": "method", "segmenter": "segmenter"}
    for case in cases:
        for override in case.overrides:
            key, _, value = override.partition("=")
            if key in folders:
                assert (CONF / folders[key] / f"{value}.yaml").exists(), case.name
    groups = {case.name.split("/")[0] for case in cases}
    assert {"locomo_qa", "longmemeval_qa", "segmentation_lite", "segmentation_llm"} <= groups


def test_differences_are_exact_for_counts_and_tolerant_for_floats() -> None:
    expected = {"questions": 10, "scores.f1": 0.5, "failures": {"answer": 0}, "gone": 1}
    actual = {"questions": 11, "scores.f1": 0.5 + 1e-9, "failures": {"answer": 1}, "new": 2}
    found = sorted(differences(expected, actual, tolerance=1e-6))
    assert found == [
        "failures.answer: expected 0, got 1",
        "gone: expected 1, missing",
        "new: unexpected 2",
        "questions: expected 10, got 11",
    ]
    assert list(differences({"x": 0.5}, {"x": 0.51}, tolerance=1e-6)) == [
        "x: expected 0.5, got 0.51"
    ]


def test_recorded_replies_replay_and_a_changed_prompt_stops_the_run(tmp_path: Path) -> None:
    journal = ReplayJournal(tmp_path / "journal.jsonl")
    recording = make_backbone(
        ScriptedProvider(), cache=ResponseCache(tmp_path / "live.sqlite", journal=journal)
    )
    requests = [LLMRequest(tuple(ask(f"question {i}")), shared_prefix=i) for i in range(3)]
    recorded = [reply.text for reply in recording.complete_many(requests)]
    recording.complete_many(requests[:1])  # a cache hit is journaled once, not twice
    assert len((tmp_path / "journal.jsonl").read_text().splitlines()) == 3

    replay_file = tmp_path / "replay.jsonl"
    write_replay_file(read_entries([tmp_path / "journal.jsonl"]), replay_file)
    lines = replay_file.read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == sorted(
        json.loads(line)["key"] for line in lines
    )
    fresh = tmp_path / "ci"
    assert seed_cache(ResponseCache(fresh / "cache.sqlite"), replay_file) == 3

    provider = ScriptedProvider()
    replaying = make_backbone(provider, cache=ResponseCache(fresh / "cache.sqlite", "replay"))
    assert [reply.text for reply in replaying.complete_many(requests)] == recorded
    assert provider.calls == 0
    changed = [*requests, LLMRequest(tuple(ask("a prompt that changed")))]
    with pytest.raises(CacheMissError, match="a prompt that changed"):
        replaying.complete_many(changed, return_exceptions=True)


def test_an_edited_replay_entry_is_refused(tmp_path: Path) -> None:
    journal = ReplayJournal(tmp_path / "journal.jsonl")
    backbone = make_backbone(
        ScriptedProvider(), cache=ResponseCache(tmp_path / "live.sqlite", journal=journal)
    )
    backbone.complete(ask("original"))
    entry = json.loads((tmp_path / "journal.jsonl").read_text())
    entry["request"]["messages"][0]["content"] = "edited"
    (tmp_path / "replay.jsonl").write_text(json.dumps(entry) + "\n")
    with pytest.raises(ValueError, match="does not match its request"):
        seed_cache(ResponseCache(tmp_path / "ci.sqlite"), tmp_path / "replay.jsonl")


def test_recorded_embeddings_round_trip_bit_for_bit(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((3, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keys = [EmbeddingCache.key("m", text) for text in ("a", "b", "c")]
    EmbeddingCache(tmp_path / "recorded.sqlite").put_many(dict(zip(keys, vectors, strict=True)))
    assert export_embeddings(tmp_path / "recorded.sqlite", tmp_path / "e.npz") == 3
    assert seed_embeddings(tmp_path / "ci.sqlite", tmp_path / "e.npz") == 3
    found = EmbeddingCache(tmp_path / "ci.sqlite").get_many(keys)
    assert all(
        np.array_equal(found[key], vector) for key, vector in zip(keys, vectors, strict=True)
    )


def test_a_case_with_no_expectation_is_new_and_fails_naming_its_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A method that joins a regression group (its registry block) brings cases that have no
    expectation yet: the check names them and the refresh that records exactly them, runs
    nothing for them, and fails until they are recorded, so a new method never passes
    unmeasured."""
    cases, tolerance = load_cases()
    joined = [case for case in cases if method_of(case) == "turn_rag_bm25"]
    assert [case.name for case in joined] == [
        "locomo_retrieval/method=turn_rag_bm25",
        "locomo_qa/method=turn_rag_bm25",
    ]
    assert method_of(next(c for c in cases if c.runner == "segment")) is None
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps({"other/method=x": {}}))
    monkeypatch.setattr(regression, "EXPECTED_FILE", expected)
    monkeypatch.setattr(regression, "run_cases", lambda *args: pytest.fail("ran a new case"))
    assert regression.check(joined, tolerance) == 1
    printed = capsys.readouterr().out
    assert "NEW locomo_qa/method=turn_rag_bm25: no expectation recorded" in printed
    assert (
        "record them: memsys-bench regression refresh --case "
        "'locomo_retrieval/method=turn_rag_bm25' --case 'locomo_qa/method=turn_rag_bm25'; "
        "review and commit git diff results/regression"
    ) in printed


def test_cases_that_embedded_nothing_export_no_embeddings(tmp_path: Path) -> None:
    """A one-method refresh of a method with no embedder (the doc's examples) computes no vector:
    nothing to export, and the embeddings file is left as it was."""
    assert export_embeddings(tmp_path / "embeddings.sqlite", tmp_path / "e.npz") == 0
    assert not (tmp_path / "e.npz").exists()
    EmbeddingCache(tmp_path / "empty.sqlite")  # the table, no vector
    assert export_embeddings(tmp_path / "empty.sqlite", tmp_path / "e.npz") == 0
    assert not (tmp_path / "e.npz").exists()
