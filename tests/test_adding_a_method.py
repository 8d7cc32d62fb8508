"""docs/adding_a_method.md's worked examples, a baseline and a paper method, run: their files
written into a copy of the repository, their own tests passing there, the registry placing each
(the paper method's name, published file and protocol read from its files), the published-numbers
report quoting the paper method's cell, a retrieval-only run of each on the smoke subset, and the
doc's one-method regression refresh, after which the CI regression passes on their cases and no
other case's expectation moved. A doc whose example stops working fails here."""

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
COPIED = (
    "benchmarks",
    "memsys",
    "conf",
    "tests",
    "results/published",
    "results/regression",
    "pyproject.toml",
)


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
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_text(body, encoding="utf-8")
    return copy


def run_in(copy: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "MEMBENCH_DATA": str(resolve_data_dir()),
        "MEMSYS_CACHE_DIR": str(copy / ".cache"),
    }
    return subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=timeout
    )


def retrieval_run(copy: Path, *overrides: str) -> dict:
    """A retrieval-only run on the smoke subset in ``copy``; its metrics."""
    results = copy / "results" / "runs" / overrides[-1].replace("=", "_")
    ran = run_in(
        copy, "-m", "benchmarks.pipeline.run", *overrides, "answer=none", "subset=smoke",
        f"results_dir={results}", "progress=false",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (metrics,) = results.glob("*/metrics.json")
    return json.loads(metrics.read_text())


def test_the_doc_marks_the_files_of_its_examples() -> None:
    assert set(doc_files()) == {
        "memsys/methods/last_sessions.py",
        "conf/method/last_sessions.yaml",
        "tests/test_last_sessions.py",
        "memsys/methods/lexmem/__init__.py",
        "memsys/methods/lexmem/method.py",
        "conf/method/lexmem.yaml",
        "results/published/lex-mem.yaml",
        "tests/test_lexmem.py",
    }


def test_the_examples_pass_their_own_tests_and_the_schema(repo_copy: Path) -> None:
    tested = run_in(
        repo_copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_last_sessions.py",
        "tests/test_lexmem.py", "tests/test_published.py", "-k", "not published or lex-mem",
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "3 passed" in tested.stdout, tested.stdout  # both examples' tests, lex-mem.yaml's schema


def test_the_baseline_joins_its_grids(repo_copy: Path) -> None:
    listed = run_in(repo_copy, "-m", "benchmarks.registry", "retrieval")
    assert listed.returncode == 0, listed.stderr
    assert "last_sessions" in listed.stdout.replace(",", " ").split()


@pytest.mark.usefixtures("data_dir")
def test_the_baseline_runs_retrieval_only_on_the_smoke_subset(repo_copy: Path) -> None:
    summary = retrieval_run(repo_copy, "method=last_sessions")
    assert summary["questions"] == 20
    # the last 2 sessions' turns hold some evidence of the smoke questions, not all of it
    assert 0.0 < summary["evidence_recall"]["mean"] < 1.0


#: What the copy's registry says of the paper method, as JSON.
PLACED = """
import json
from benchmarks import registry
from benchmarks.published.cells import how_measured
from benchmarks.runs.naming import method_name

(entry,) = [e for e in registry.entries() if e.config == "lexmem"]
paper = registry.papers()["lexmem"]
print(json.dumps({
    "role": entry.role, "paper": entry.paper, "name": paper.name, "file": paper.published.name,
    "table_name": method_name({"_target_": entry.target, "top_k": 10}),
    "paper_grid": registry.sweep("paper"),
    "paper_option": registry.paper_grid()["lexmem"].method, "papers": list(registry.papers()),
    "f1": how_measured()["lexmem"].f1,
}))
"""


def test_the_paper_method_is_placed_from_its_files(repo_copy: Path) -> None:
    placed = run_in(repo_copy, "-c", PLACED)
    assert placed.returncode == 0, placed.stderr
    found = json.loads(placed.stdout)
    assert (found["role"], found["paper"], found["name"]) == ("method", "lexmem", "LexMem")
    assert (found["file"], found["table_name"], found["f1"]) == ("lex-mem.yaml", "LexMem", "f1_set")
    assert found["paper_grid"][-1] == "lexmem"  # its position, 6, after the five papers
    assert found["paper_option"] == "lexmem"  # paper=lexmem runs its method config: no file
    assert found["papers"] == ["esmem", "secom", "hingemem", "fracom", "cast", "lexmem"]


def test_the_published_report_quotes_the_paper_methods_cell(repo_copy: Path) -> None:
    out = repo_copy / "paper_locomo"
    built = run_in(
        repo_copy, "-m", "benchmarks.published", "--dataset", "locomo", "--out", str(out)
    )
    assert built.returncode == 0, built.stdout + built.stderr
    report = out.with_suffix(".md").read_text()
    assert (
        "| LexMem | Table 1 | LexMem | LoCoMo / F1 | gpt-4o-mini | f1_set · overall | 31.2 |"
        in (report)
    )
    assert "- LexMem: 1 of 2 cells shown; left out: 1 on other datasets (msc)" in report


@pytest.mark.usefixtures("data_dir")
def test_the_paper_method_runs_retrieval_only_through_its_paper_entry(repo_copy: Path) -> None:
    summary = retrieval_run(repo_copy, "+experiment=paper_locomo", "paper=lexmem")
    assert summary["questions"] == 20
    # turns sharing the questions' words hold most of their evidence, not all of it
    assert 0.0 < summary["evidence_recall"]["mean"] < 1.0


#: The regression cases the examples' registry blocks add (their grids).
NEW_CASES = [
    "locomo_qa/method=last_sessions",
    "locomo_qa/method=lexmem",
    "locomo_retrieval/method=lexmem",
]
REGRESSION = ("-m", "benchmarks.checks.regression")
EXAMPLES = ("--method", "last_sessions", "--method", "lexmem")
COMMITTED = json.loads((REPO_ROOT / "results" / "regression" / "expected.json").read_text())


def expectations(copy: Path) -> dict:
    return json.loads((copy / "results" / "regression" / "expected.json").read_text())


def replies(copy: Path) -> set[str]:
    return set((copy / "results" / "regression" / "replay.jsonl").read_text().splitlines())


def test_the_examples_cases_fail_the_regression_as_new_until_recorded(repo_copy: Path) -> None:
    """§2: the examples' regression cases have no expectation, so the check names each as new
    with the refresh that records it, runs none of them, and fails; a one-method refresh (here
    of the retrieval case alone, no LLM) records it and only it, and its check passes."""
    unrecorded = run_in(repo_copy, *REGRESSION, "check", *EXAMPLES)
    assert unrecorded.returncode == 1, unrecorded.stdout + unrecorded.stderr
    for case in NEW_CASES:
        assert f"NEW {case}: no expectation recorded" in unrecorded.stdout
    assert "record them: memsys-bench regression refresh --case" in unrecorded.stdout
    assert "0 cases run, 3 new" in unrecorded.stdout
    before = replies(repo_copy)
    one = ("--group", "locomo_retrieval", "--method", "lexmem")
    refreshed = run_in(repo_copy, *REGRESSION, "refresh", *one)
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    checked = run_in(repo_copy, *REGRESSION, "check", *one)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 cases, 0 mismatches (float tolerance 1e-06), 0 new" in checked.stdout
    after = expectations(repo_copy)
    assert sorted(set(after) - set(COMMITTED)) == ["locomo_retrieval/method=lexmem"]
    assert {case: after[case] for case in COMMITTED} == COMMITTED
    assert before <= replies(repo_copy)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # SmolLM2 answers and judges both QA cases: 9 min on 2 busy cores
def test_the_documented_refresh_keeps_the_ci_regression_green(repo_copy: Path) -> None:
    """§2's commands for both examples: the refresh records their cases and only them (every
    committed expectation and reply as it was), and the check passes on them, so
    ``make ci-regression`` checks the other cases as before and these as recorded."""
    before = replies(repo_copy)
    refreshed = run_in(repo_copy, *REGRESSION, "refresh", *EXAMPLES, timeout=3000)
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    checked = run_in(repo_copy, *REGRESSION, "check", *EXAMPLES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "3 cases, 0 mismatches" in checked.stdout
    after = expectations(repo_copy)
    assert sorted(set(after) - set(COMMITTED)) == NEW_CASES
    assert {case: after[case] for case in COMMITTED} == COMMITTED
    assert before <= replies(repo_copy)
