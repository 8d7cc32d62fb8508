"""An incomplete run says so: a question or a judge probe whose request failed for good leaves
its records and metrics.json written and marked incomplete, the command exits 2 naming the
rerun, a sweep runs its other jobs and lists it, and the rerun completes it. A verdict the
model's reply could not be read into is counted, not incomplete."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from reliability_helpers import CORRECT, JUDGE, QUESTIONS, server_backbone
from run_helpers import compose_config, fixture_overrides

from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.run import run

pytestmark = pytest.mark.usefixtures("no_env_overrides")


def cli(*arguments: str, hydra_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.pipeline.run", *arguments, f"hydra.run.dir={hydra_dir}",
         f"hydra.sweep.dir={hydra_dir}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_failed_question_makes_the_run_incomplete_and_the_rerun_completes_it(
    tmp_path: Path, server: FakeChatServer
) -> None:
    server.on(QUESTIONS["dog"], "500")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    first = cli(*overrides, hydra_dir=tmp_path / "hydra")
    assert first.returncode == 2, first.stderr
    last = first.stderr.strip().splitlines()[-1]
    assert last.startswith("error: incomplete run ")
    assert "1 question(s) and 0 judge probe(s) failed" in last
    assert (
        "run the same command again to ask them again:" in last and "method=turn_rag_bm25" in last
    )
    assert "INCOMPLETE: 1 question(s)" in first.stdout  # the summary printed before
    (run_dir,) = (tmp_path / "runs").iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["completeness"] == {"complete": False, "failed_questions": 1, "failed_probes": 0}

    server.clear()
    server.on(JUDGE, reply=CORRECT)
    second = cli(*overrides, hydra_dir=tmp_path / "hydra2")
    assert second.returncode == 0, second.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["completeness"]["complete"] is True


def test_a_sweep_runs_its_other_jobs_and_lists_the_incomplete_one(
    tmp_path: Path, server: FakeChatServer
) -> None:
    server.on(QUESTIONS["dog"], "500")  # one question of each job fails for good
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        "-m",
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25,full_history",
        *server_backbone(server),
    ]
    swept = cli(*overrides, hydra_dir=tmp_path / "hydra")
    assert swept.returncode == 2, swept.stderr
    assert "2 job(s) of this sweep failed" in swept.stderr
    assert swept.stderr.count("incomplete run") == 4  # each job's line, then the sweep's list
    finished = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/metrics.json")]
    assert len(finished) == 2  # both jobs ran and wrote their metrics


def test_an_unreadable_verdict_is_counted_not_incomplete(
    tmp_path: Path, server: FakeChatServer
) -> None:
    server.on([QUESTIONS["beach"], JUDGE], reply="I would rather not say.")
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
    ]
    summary = run(compose_config(overrides))
    assert summary["failures"]["judge"] == 1
    assert summary["completeness"]["complete"] is True


def test_a_probe_whose_request_failed_is_counted_and_graded_again(
    tmp_path: Path, server: FakeChatServer
) -> None:
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        "judge.probes=true",
        *server_backbone(server),
        "+backbone.retry.max_consecutive_failures=100",
    ]
    server.clear()
    server.on([JUDGE, QUESTIONS["5k"]], "500")  # every verdict on the 5k question fails
    server.on(JUDGE, reply=CORRECT)
    first = run(compose_config(overrides))
    assert first["completeness"]["failed_questions"] == 1
    assert first["completeness"]["failed_probes"] >= 1  # its gold probe at least
    assert first["completeness"]["complete"] is False
    server.clear()
    server.on(JUDGE, reply=CORRECT)
    second = run(compose_config(overrides))
    assert second["completeness"] == {"complete": True, "failed_questions": 0, "failed_probes": 0}
