"""Killed mid-phase (SIGKILL during construction or judging): the rerun resumes and matches an
uninterrupted run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from reliability_helpers import (
    EMBEDDED_ONE_THREAD,
    memory_payloads,
    stages,
)
from run_helpers import (
    compose_config,
    fixture_overrides,
    kill_when,
    read_records,
    stable,
    start_cli,
)

from benchmarks.pipeline.run import run

pytestmark = pytest.mark.usefixtures("no_env_overrides")


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
