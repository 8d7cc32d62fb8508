"""Sweeps through the cluster launchers, run for real on this machine (``make test-cluster``).

Hydra's submitit launcher in its ``local`` mode is the machinery of ``submitit_slurm`` without
the scheduler (jobs pickled, run as subprocesses, results read back); the Ray launcher runs each
job as a task on a Ray cluster, here one started on 127.0.0.1. Each sweep runs the same two
retrieval-only methods on the tiny fixture, each launcher with a cache of its own, and must give
the records of a joblib sweep: same run ids, same contexts, same scores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import ray_head
from run_helpers import fixture_overrides, read_records, stable

from benchmarks.data.paths import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

SWEEP = ["method=turn_rag_bm25,session_rag_bm25", "answer=none"]


def sweep(tmp_path: Path, name: str, launcher: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run the sweep through ``launcher``; {run id: (metrics without timings, stable records)}."""
    results, cache = tmp_path / name / "runs", tmp_path / name / "cache"
    command = [sys.executable, "-m", "benchmarks.pipeline.run", "-m", *launcher, *SWEEP]
    command += [f"hydra.sweep.dir={tmp_path / name / 'multirun'}"]
    command += fixture_overrides(results, cache)
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = {}
    for run_dir in sorted(results.iterdir()):
        metrics = json.loads((run_dir / "metrics.json").read_text())
        records = sorted(read_records(run_dir), key=lambda record: record["question_id"])
        runs[run_dir.name] = (metrics["scores"], [stable(record) for record in records])
    assert len(runs) == 2, sorted(runs)
    return runs


@pytest.fixture(scope="module")
def joblib_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("joblib")
    return sweep(
        tmp, "joblib", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], dict(os.environ)
    )


def test_submitit_local_sweep_equals_the_joblib_sweep(
    tmp_path: Path, joblib_runs: dict[str, Any]
) -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    launcher = ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=15"]
    assert sweep(tmp_path, "submitit", launcher, dict(os.environ)) == joblib_runs


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 (:func:`cluster_helpers.ray_head`)."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    with ray_head(tmp_path_factory.mktemp("ray")) as address:
        yield address


def test_ray_sweep_on_a_local_cluster_equals_the_joblib_sweep(
    tmp_path: Path, joblib_runs: dict[str, Any], ray_cluster: str
) -> None:
    env = {**os.environ, "RAY_ADDRESS": ray_cluster}
    launcher = ["hydra/launcher=ray_cluster", "hydra.launcher.ray.remote.num_cpus=1"]
    assert sweep(tmp_path, "ray", launcher, env) == joblib_runs
