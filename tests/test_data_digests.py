"""What data a run read: each invocation records the sha256 of every dataset file it read, and
a run resuming over a changed file stops with one line naming it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import FIXTURE, compose_config, fixture_overrides

from benchmarks.data.digests import DataChangedError, file_digest
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.run import run

DATASET = "locomo/tiny_conversation.json"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A copy of the tiny fixture this test may change."""
    copy = tmp_path / "data"
    shutil.copytree(FIXTURE, copy)
    return copy


def overrides(data_dir: Path, tmp_path: Path) -> list[str]:
    return [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        f"data_dir={data_dir}",
        "method=turn_rag_bm25",
        "answer=none",
    ]


def test_each_invocation_records_the_digest_of_the_data_it_read(
    data_dir: Path, tmp_path: Path
) -> None:
    summary = run(compose_config(overrides(data_dir, tmp_path)))
    digest = file_digest(data_dir / DATASET)
    assert len(digest) == 12 and summary["invocation"]["data"] == {DATASET: digest}
    again = run(compose_config(overrides(data_dir, tmp_path)))  # unchanged data resumes
    assert again["run_dir"] == summary["run_dir"]
    lines = (Path(summary["run_dir"]) / "invocations.jsonl").read_text().splitlines()
    assert [json.loads(line)["data"] for line in lines] == [{DATASET: digest}] * 2


def test_a_run_resumed_over_changed_data_stops_naming_the_file(
    data_dir: Path, tmp_path: Path
) -> None:
    first = run(compose_config(overrides(data_dir, tmp_path)))
    before = file_digest(data_dir / DATASET)
    path = data_dir / DATASET
    content = path.read_bytes()
    path.write_bytes(content.replace(b"dog", b"cat", 1))  # one word of one turn
    after = file_digest(path)
    with pytest.raises(DataChangedError, match=rf"{path} \(sha256 {before}… .*, {after}… now\)"):
        run(compose_config(overrides(data_dir, tmp_path)))
    lines = (Path(first["run_dir"]) / "invocations.jsonl").read_text().splitlines()
    assert len(lines) == 1  # the refused invocation did no work and logged none
    # The command line says it in one line and exits 2.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.pipeline.run", *overrides(data_dir, tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: dataset changed under this run")
