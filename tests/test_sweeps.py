"""Hydra multirun: the Table 1 experiment grid, the cluster launcher configs, a joblib sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import CONF, FIXTURE, compose_with_hydra, sweep_values

from benchmarks import registry
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


def sweep_jobs(experiment: str, command_line: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper makes of ``-m +experiment=EXPERIMENT *command_line``: the
    sweeper instantiated from the composed config as Hydra's plugin loader does (its params
    resolved then, ``${registry:...}`` included), then its own split of params + command line."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.plugins import Plugins

    arguments = [f"+experiment={experiment}", *command_line]
    fixed = [a for a in arguments if "," not in a]
    sweeper = Plugins.instance()._instantiate(compose_with_hydra(fixed).hydra.sweeper)
    assert isinstance(sweeper, BasicSweeper)
    lines = sweeper._parse_config() + arguments
    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(lines), None)
    return [job for batch in batches for job in batch]


@pytest.mark.parametrize(
    ("experiment", "grid", "key"),
    [
        ("table1", "table1", "method"),
        ("table2", "table2", "method"),
        ("retrieval", "retrieval", "method"),
        ("libraries", "libraries", "method"),
        ("ablations", "ablations", "method"),
        ("paper_locomo", "paper", "paper"),
        ("paper_longmemeval", "paper", "paper"),
    ],
)
def test_the_sweeper_expands_the_registry_grid(experiment: str, grid: str, key: str) -> None:
    jobs = sweep_jobs(experiment, [])
    swept = [job[0] for job in jobs][:: len(jobs) // len(registry.sweep(grid))]
    assert swept == [f"{key}={member}" for member in registry.sweep(grid)]


def test_a_command_line_list_replaces_the_registry_grid() -> None:
    jobs = sweep_jobs("table1", ["method=esmem,cast", "subset=full"])
    assert [job[:2] for job in jobs] == [
        ["method=esmem", "backbone=embedded"],
        ["method=cast", "backbone=embedded"],
    ]
    assert all("subset=full" in job for job in jobs)


@pytest.mark.slow
def test_the_runner_sweeps_the_registry_grid(tmp_path: Path) -> None:
    """The real command line (``@hydra.main``, the resolver registered on import): every job of
    Table 1's grid is launched; ``batch_size=0`` makes each refuse its config at once, and the
    sweep's closing lines name each job's overrides."""
    command = [sys.executable, "-m", "benchmarks.pipeline.run", "-m", "+experiment=table1"]
    command += ["batch_size=0", f"results_dir={tmp_path}"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr[-3000:]
    launched = [
        line.split()[2] for line in done.stderr.splitlines() if line.startswith("error:   #")
    ]
    assert launched == [f"method={member}" for member in registry.members("table1")]


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


def test_the_makefile_reads_the_tables_settings_from_their_experiments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Table 1's budget and protocols and Table 2's budget are stated in their experiment configs
    only: the Makefile passes them to a run only when given (BUDGET=, PROTOCOLS=, LME_BUDGET=)
    and reads the report's filter from the experiment (benchmarks.config.print_value)."""
    from benchmarks.config.print_value import main as config_value

    makefile = (REPO_ROOT / "Makefile").read_text()
    for variable in ("BUDGET", "PROTOCOLS", "LME_BUDGET"):
        assert f"\n{variable} ?=\n" in makefile, variable
    assert "$(call config_value,answer.context_budget,+experiment=table1)" in makefile
    assert "$(call config_value,answer.context_budget,+experiment=table2)" in makefile
    assert "--where answer.context_budget=$(TABLE1_BUDGET)" in makefile
    assert "--where answer.context_budget=$(TABLE2_BUDGET)" in makefile
    for key, experiment, printed in (
        ("answer.context_budget", "table1", "512"),
        ("judge.protocols", "table1", "[]"),
        ("answer.context_budget", "table2", "1024"),
    ):
        assert config_value([key, f"+experiment={experiment}"]) == 0
        assert capsys.readouterr().out.strip() == printed
    assert config_value(["no.such.key"]) == 2
