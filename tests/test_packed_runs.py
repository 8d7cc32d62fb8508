"""A packed run folder (``memsys-bench results pack``) reads as the plain one: the report, the
inspector and a resumed run see the same records; packing is deterministic and verified."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_helpers import FIXTURE, compose_config, fixture_overrides

from benchmarks.inspection.index import Index
from benchmarks.pipeline.packed import PACKED, PLAIN, main, pack, unpack
from benchmarks.pipeline.run import run
from benchmarks.runs.folders import own_records
from benchmarks.tables.report.cli import main as report


def test_a_packed_run_reads_renders_and_resumes_as_the_plain_one(tmp_path: Path) -> None:
    overrides = [*fixture_overrides(tmp_path / "runs", tmp_path / "cache"), "method=turn_rag_bm25",
                 "answer=none"]  # fmt: skip
    run_dir = Path(run(compose_config(overrides))["run_dir"])
    argv = ["--runs", str(tmp_path / "runs"), "--dataset", "locomo", "--subset", "full"]
    assert report([*argv, "--out", str(tmp_path / "plain")]) == 0
    records = own_records(run_dir)
    plain_bytes = (run_dir / PLAIN).read_bytes()

    assert main([str(run_dir)]) == 0
    assert not (run_dir / PLAIN).exists()
    packed_bytes = (run_dir / PACKED).read_bytes()
    assert len(packed_bytes) < len(plain_bytes)
    assert own_records(run_dir) == records
    assert report([*argv, "--out", str(tmp_path / "packed")]) == 0
    assert (tmp_path / "packed.md").read_text() == (tmp_path / "plain.md").read_text()
    index = Index([run_dir], str(FIXTURE), "packed")
    found = index.question(str(records[0]["question_id"]))
    assert found is not None
    (result,) = found["results"].values()
    assert result["context_tokens"] == records[0]["context_tokens"] > 0
    assert result["retrieved"] == records[0]["retrieved_turn_ids"]

    unpack(run_dir)
    assert (run_dir / PLAIN).read_bytes() == plain_bytes
    pack(run_dir)
    assert (run_dir / PACKED).read_bytes() == packed_bytes  # deterministic

    again = run(compose_config(overrides))  # resumed in the packed folder: unpacked, nothing redone
    assert again["invocation"]["questions"] == 0 and own_records(run_dir) == records


def test_an_unfinished_run_is_not_packed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / PLAIN).write_text('{"question_id": "q"}\n')
    assert main([str(tmp_path)]) == 1
    assert "unfinished (no metrics.json)" in capsys.readouterr().err
    assert (tmp_path / PLAIN).exists()
