"""docs/adding_a_method.md's worked example, run: its files written into a copy of the
repository, its own test passing there, the registry placing it, and a retrieval-only run of it
on the smoke subset. A doc whose example stops working fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.data.paths import REPO_ROOT, resolve_data_dir

DOC = REPO_ROOT / "docs" / "adding_a_method.md"
#: A fenced block the doc marks as a file: ```python file=memsys/methods/x.py
FILE_BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
COPIED = ("benchmarks", "memsys", "conf", "tests", "pyproject.toml")


def doc_files() -> dict[str, str]:
    return {path: body for path, body in FILE_BLOCK.findall(DOC.read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("repo")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "runs")
    for name in COPIED:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=ignore)
        else:
            shutil.copy2(source, copy / name)
    for path, body in doc_files().items():
        (copy / path).write_text(body, encoding="utf-8")
    return copy


def run_in(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "MEMBENCH_DATA": str(resolve_data_dir()),
        "MEMSYS_CACHE_DIR": str(copy / ".cache"),
    }
    return subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_doc_marks_the_files_of_its_example() -> None:
    assert set(doc_files()) == {
        "memsys/methods/last_sessions.py",
        "conf/method/last_sessions.yaml",
        "tests/test_last_sessions.py",
    }


def test_the_example_passes_its_own_test_and_joins_its_grids(repo_copy: Path) -> None:
    tested = run_in(repo_copy, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "tests/test_last_sessions.py")  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    listed = run_in(repo_copy, "-m", "benchmarks.registry", "retrieval")
    assert listed.returncode == 0, listed.stderr
    assert "last_sessions" in listed.stdout.replace(",", " ").split()


def test_the_example_runs_retrieval_only_on_the_smoke_subset(
    repo_copy: Path, data_dir: Path
) -> None:
    results = repo_copy / "results" / "runs"
    ran = run_in(
        repo_copy, "-m", "benchmarks.pipeline.run", "method=last_sessions", "answer=none",
        "subset=smoke", f"results_dir={results}", "progress=false",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (metrics,) = results.glob("*/metrics.json")
    summary = json.loads(metrics.read_text())
    assert summary["questions"] == 20
    # the last 2 sessions' turns hold some evidence of the smoke questions, not all of it
    assert 0.0 < summary["evidence_recall"]["mean"] < 1.0
