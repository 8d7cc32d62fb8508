"""``memsys-bench``: the console command lists every subcommand, answers each one's ``--help``,
and hands a Hydra app its arguments unchanged (a real retrieval-only run, a real sweep)."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from omegaconf import OmegaConf
from run_helpers import fixture_overrides

from benchmarks.config.compose import CONF, compose_config
from benchmarks.console import NOT_INSTALLED, main, run_command
from benchmarks.console.commands import COMMANDS, Command, Group
from benchmarks.console.hydra_usage import selected_groups
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.settings import run_id, run_identity

LEAVES = {
    f"{name} {word}" if isinstance(entry, Group) else name: command
    for name, entry in COMMANDS.items()
    for word, command in (entry.commands.items() if isinstance(entry, Group) else [(name, entry)])
}
#: Subcommands whose arguments include Hydra overrides, and the word their help names them by.
TAKES_OVERRIDES = {
    "plan": "Hydra overrides",
    "ask": "Hydra overrides",
    "score qa": "Hydra overrides",
}


def console(*args: str) -> subprocess.CompletedProcess[str]:
    """``memsys-bench ARGS`` as its own process (``python -m benchmarks.console``)."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.console", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line[2:] for line in lines if line.startswith("  ") and not line.startswith("   ")]
    for name, entry in COMMANDS.items():
        words = f"{name} {'|'.join(entry.commands)}" if isinstance(entry, Group) else name
        assert any(row == words or row.startswith(f"{words} ") for row in rows), name


def test_no_subcommand_prints_the_listing_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "commands:" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["rnu"], ["score", "f1"]])
def test_an_unknown_subcommand_exits_2_naming_it(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    error = capsys.readouterr().err
    assert f"unknown command {args[-1]!r}" in error and "--help lists them" in error


def test_a_close_name_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rnu"]) == 2
    assert "did you mean 'run'?" in capsys.readouterr().err


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    """The installed distribution's (``make setup`` installs this checkout); a checkout run
    without installing says so."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    try:
        installed = metadata.version("memsys-bench")
    except metadata.PackageNotFoundError:
        installed = None
    assert installed in (project["version"], None)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"memsys-bench {installed or NOT_INSTALLED}"


def test_the_console_script_names_this_main() -> None:
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["memsys-bench"].partition(":")
    assert getattr(importlib.import_module(module), function) is main


def test_every_target_exists() -> None:
    """Each subcommand's module and function are there (inspect and diff may not be yet)."""
    for name, command in LEAVES.items():
        module, _, function = command.target.partition(":")
        if importlib.util.find_spec(module) is None:
            assert name in ("inspect", "diff"), f"{name}: {module} is missing"
            continue
        loaded = importlib.import_module(module)
        assert callable(getattr(loaded, function or "main")), name


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_each_subcommand_help_exits_0(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = LEAVES[name].target.partition(":")[0]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not in this checkout yet")
    assert main([*name.split(), "--help"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage:"), shown[:200]
    if name in TAKES_OVERRIDES:
        assert TAKES_OVERRIDES[name] in " ".join(shown.split())


@pytest.mark.parametrize("name", ["run", "segment"])
def test_a_hydra_app_help_names_its_groups_and_keys(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = COMMANDS[name]
    assert isinstance(command, Command) and command.config is not None
    primary = OmegaConf.load(CONF / f"{command.config}.yaml")
    assert main([name, "-h"]) == 0
    shown = capsys.readouterr().out
    for group, default in selected_groups(primary.defaults):
        assert f"\n  {group:<14}{default} | " in shown or f"\n  {group:<14}{default}\n" in shown
    assert "results_dir=" in shown and "--cfg job" in shown and "--hydra-help" in shown


def test_run_help_shows_the_overlays_and_segment_its_own_datasets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["run", "--help"])
    run_help = capsys.readouterr().out
    assert "\n  experiment    " in run_help and "table1" in run_help
    # the paper group's options live in Hydra's config store only (benchmarks.registry.paper_grid)
    assert "\n  paper         cast | esmem | fracom | full_history" in run_help
    main(["segment", "--help"])
    segment_help = capsys.readouterr().out
    assert "\n  dataset       dialseg711 | superdialseg | tiage\n" in segment_help
    assert "experiment" not in segment_help  # the QA runner's overlays are not segment's


def test_stats_gets_its_own_word_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "stats", "--help"]) == 0
    assert "--json" in capsys.readouterr().out


def test_a_missing_module_is_named_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    command = Command("benchmarks.tables.no_such_table:main", "not written yet")
    assert run_command("memsys-bench later", command, []) == 2
    assert "benchmarks.tables.no_such_table is missing" in capsys.readouterr().err


def test_cfg_job_prints_what_python_m_prints(tmp_path: Path) -> None:
    """Hydra's own flags reach it unchanged: ``--cfg job`` prints the same composed config."""
    args = ["--cfg", "job", "method=turn_rag_bm25", "answer=none", f"results_dir={tmp_path}"]
    through_console = console("run", *args)
    direct = subprocess.run(
        [sys.executable, "-m", "benchmarks.pipeline.run", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert through_console.returncode == direct.returncode == 0, through_console.stderr
    assert through_console.stdout == direct.stdout and "retriever: bm25" in direct.stdout


def test_a_retrieval_only_smoke_run_lands_under_its_run_id(tmp_path: Path, data_dir: Path) -> None:
    overrides = ["method=turn_rag_bm25", "answer=none", "subset=smoke", f"results_dir={tmp_path}"]
    result = console("run", *overrides, "progress=false")
    assert result.returncode == 0, result.stderr
    (run_dir,) = (path for path in tmp_path.iterdir() if not path.name.startswith("."))
    assert run_dir.name == run_id(run_identity(compose_config(overrides)))
    assert len((run_dir / "predictions.jsonl").read_text().splitlines()) == 20
    assert f"run {run_dir}" in result.stdout


def test_a_sweep_runs_every_job(tmp_path: Path) -> None:
    overrides = fixture_overrides(tmp_path / "runs", tmp_path / "cache")
    result = console(
        "run", "-m", "method=turn_rag_bm25,session_rag_bm25", "answer=none", *overrides
    )
    assert result.returncode == 0, result.stderr
    runs = {path.name for path in (tmp_path / "runs").iterdir() if not path.name.startswith(".")}
    expected = {
        run_id(run_identity(compose_config([*overrides, f"method={method}", "answer=none"])))
        for method in ("turn_rag_bm25", "session_rag_bm25")
    }
    assert runs == expected


def test_docs_cli_names_every_subcommand() -> None:
    page = (REPO_ROOT / "docs" / "cli.md").read_text()
    for name in LEAVES:
        assert f"| `{name}" in page, name


def test_every_make_target_calls_a_listed_subcommand() -> None:
    """The Makefile runs everything through ``$(BENCH)``; each call names a subcommand (and a
    group's word) that the table lists."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    calls = re.findall(r"\$\(BENCH\) (\S+)(?: (\S+))?", makefile)
    assert len(calls) >= 10
    for name, word in calls:
        entry = COMMANDS[name]
        assert not isinstance(entry, Group) or word in entry.commands, (name, word)
    assert re.search(r"^setup:.*(\n\t.*)*\n\t\$\(BENCH\) data fetch$", makefile, re.MULTILINE)
