"""Hydra multirun: the Table 1 experiment grid, the cluster launcher configs, a joblib sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import CONF, FIXTURE, compose_with_hydra, sweep_values

from benchmarks.data.paths import REPO_ROOT


def test_table1_experiment_lists_every_method_once_and_each_has_a_config() -> None:
    cfg = compose_with_hydra(["+experiment=table1"])
    methods = sweep_values(cfg.hydra.sweeper.params.method)
    assert len(methods) == len(set(methods))
    assert {"zero_history", "full_history", "turn_rag_dense", "session_rag_bm25"} <= set(methods)
    assert {"esmem", "secom", "hingemem", "fracom", "cast"} <= set(methods)
    assert "oracle_evidence" in methods  # the ceiling row of every table
    for method in methods:
        assert (CONF / "method" / f"{method}.yaml").exists(), method
    assert (cfg.answer.context_budget, list(cfg.judge.protocols)) == (512, [])
    assert cfg.dataset.name == "locomo"


def test_slurm_launcher_config_composes() -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    cfg = compose_with_hydra(["hydra/launcher=slurm", "+experiment=table1"])
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.timeout_min, launcher.cpus_per_task, launcher.mem_gb) == (240, 8, 32)


@pytest.mark.slow
def test_joblib_sweep_two_methods_by_two_backbones(
    tmp_path: Path, llama_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 methods × {in-process llama.cpp, llama.cpp's OpenAI server}, two worker processes.

    Both backbones serve SmolLM2, so the memories (which do not depend on the answering backbone)
    are built once per method and shared through the cache by the parallel jobs.
    """
    env = {**os.environ, "LLAMACPP_BASE_URL": llama_server, "MEMSYS_CACHE_DIR": str(tmp_path)}
    env.pop("MEMBENCH_DATA", None)
    command = [sys.executable, "-m", "benchmarks.pipeline.run", "-m", "hydra/launcher=joblib"]
    command += ["hydra.launcher.n_jobs=2", f"hydra.sweep.dir={tmp_path / 'multirun'}"]
    command += ["method=turn_rag_bm25,session_rag_bm25", "backbone=embedded,llamacpp_server"]
    command += [f"data_dir={FIXTURE}", "dataset.file=locomo/tiny_conversation.json"]
    command += ["subset=full", f"results_dir={tmp_path / 'runs'}", "progress=false"]
    command += ["judge.protocols=[]", "judge.probes=false"]  # as fixture_overrides
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 4
    for run_dir in runs:
        lines = (run_dir / "predictions.jsonl").read_text().splitlines()
        ids = [json.loads(line)["question_id"] for line in lines]
        assert len(ids) == len(set(ids)) == 6
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["failures"] == {"answer": 0, "judge": 0}
    memories = list((tmp_path / "memories").rglob("*.json"))
    assert len(memories) == 2


def test_a_sweep_refuses_its_next_job_once_conf_changed(tmp_path: Path) -> None:
    """Hydra composes each job from conf/ on disk while the process keeps its code: the guard
    remembers conf/ at the first job, lets unchanged later jobs through and refuses the first
    job after an edit, naming the folder."""
    from benchmarks.pipeline.cli import ConfChangedError
    from benchmarks.pipeline.run import SweepGuard, conf_digest

    conf = tmp_path / "conf"
    (conf / "embedder").mkdir(parents=True)
    (conf / "embedder" / "minilm.yaml").write_text("model: all-MiniLM-L6-v2\n")
    guard = SweepGuard(conf)
    guard.check()
    guard.check()
    before = conf_digest(conf)
    (conf / "embedder" / "minilm.yaml").write_text("model: all-MiniLM-L6-v2\ndevice: cpu\n")
    assert conf_digest(conf) != before
    with pytest.raises(ConfChangedError, match=r"conf changed since this sweep's first job"):
        guard.check()
