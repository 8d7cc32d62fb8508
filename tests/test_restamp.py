"""``memsys-bench results restamp``: a run whose method fingerprint moved is stamped fresh only
when today's code recomputes its sampled records identical; tables then render it fresh."""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import FIXTURE, compose_config, fixture_overrides, pretend_produced_under

from benchmarks.checks.restamp import differences, main, sample
from benchmarks.pipeline.run import run
from benchmarks.runs.folders import load_runs
from benchmarks.runs.restamps import RESTAMPS_FILE, read_restamps
from benchmarks.runs.rows import build_row, mark_stale


def test_a_run_is_stamped_only_when_its_records_recompute_identical(tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    overrides = [*fixture_overrides(tmp_path / "runs", cache), "method=turn_rag_bm25",
                 "answer=none"]  # fmt: skip
    run_dir = Path(run(compose_config(overrides))["run_dir"])
    argv = [str(run_dir), "--cache-dir", str(cache), "--questions", "4", "--data-dir", str(FIXTURE)]
    assert main(argv) == 0  # produced under today's source: nothing to do
    assert read_restamps(run_dir) == []

    pretend_produced_under(run_dir, "0ld50urce000")
    predictions = run_dir / "predictions.jsonl"
    pristine = predictions.read_text()
    records = [json.loads(line) for line in pristine.splitlines()]
    records[0]["evidence_recall"] = 0.123  # a committed number today's code does not give
    predictions.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main([*argv, "--questions", "6"]) == 1
    assert "evidence_recall: committed '0.123', now '1.0'" in capsys.readouterr().err
    assert not (run_dir / RESTAMPS_FILE).exists()

    predictions.write_text(pristine)
    assert main(argv) == 0
    (stamp,) = read_restamps(run_dir)
    assert stamp["recorded"] == "0ld50urce000" and stamp["questions"] == 4
    assert stamp["conversations"] == 1 and len(stamp["question_ids"]) == 4

    # The table renders the row fresh, the stamp named; a later change makes it stale again.
    (found,) = load_runs(tmp_path / "runs", "locomo", "full")
    row = build_row(found, ["single_hop"], None, 0.5, "question", ["f1_set"])
    mark_stale([row])
    assert row.source_changed is None and row.restamped == [stamp]
    mark_stale([row], fingerprint=lambda _: "n3w50urce000")
    assert row.source_changed == ("0ld50urce000", "n3w50urce000")


def test_the_sample_spreads_over_conversations_and_fields_compare_as_stored() -> None:
    records = [{"conversation_id": c, "question_id": f"{c}:{i}"} for c in "abc" for i in range(4)]
    chosen = sample(records, 5, seed=0)
    assert sorted(map(len, chosen.values())) == [1, 2, 2] and set(chosen) == {"a", "b", "c"}
    assert sample(records, 5, seed=0) == chosen
    committed = {"scores": {"f1": 0.5}, "latency_s": {"retrieve": 1.0}, "evidence": ["D1:1"]}
    now = {"scores": {"f1": 0.5}, "latency_s": {"retrieve": 9.0}, "evidence": ["D1:1"],
           "context": "text"}  # fmt: skip
    assert list(differences(committed, now)) == []  # timings differ; context stored without
    now["ranking"] = {"turn": []}
    now["scores"]["f1"] = 0.25
    assert list(differences(committed, now)) == [
        "ranking: only in the recomputed record",
        "scores.f1: committed '0.5', now '0.25'",
    ]
