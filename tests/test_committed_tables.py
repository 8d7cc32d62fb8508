"""The committed tables built from committed runs (Table 1, the LongMemEval-S retrieval tables,
the ablation table) are what their builders make of the run records committed beside them, so
every cell can be traced to the lines behind it on any clone."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.data.paths import REPO_ROOT
from benchmarks.tables import ablations
from benchmarks.tables.report import main

#: Tables whose runs are committed (``make reproduce-retrieval-lme``'s folder): table, subset;
#: an unfinished run is a row marked PARTIAL (``--partial``).
COMMITTED_TABLES = [
    ("results/retrieval_longmemeval", "full"),
    ("results/retrieval_longmemeval_lme30", "lme30"),
]


def test_table1_is_rebuilt_from_its_committed_runs(tmp_path: Path) -> None:
    """Table 1 (both parts, its notes and costs) from results/table1_runs, as committed."""
    argv = ["--runs", str(REPO_ROOT / "results" / "table1_runs"), "--dataset", "locomo"]
    argv += ["--subset", "smoke", "--where", "answer.context_budget=512"]
    argv += ["--retrieval-subset", "three_conversations", "--out", str(tmp_path / "table1")]
    assert main(argv) == 0
    for suffix in (".md", ".csv", ".tex"):
        rebuilt = (tmp_path / "table1").with_suffix(suffix).read_text()
        assert rebuilt == (REPO_ROOT / "results" / "table1").with_suffix(suffix).read_text(), suffix


@pytest.mark.parametrize(("table", "subset"), COMMITTED_TABLES)
def test_committed_table_is_rebuilt_from_its_committed_runs(
    table: str, subset: str, tmp_path: Path
) -> None:
    runs = REPO_ROOT / f"{table}_runs"
    assert runs.is_dir(), f"{runs} holds the runs behind {table}.md"
    argv = ["--runs", str(runs), "--dataset", "longmemeval_s", "--subset", subset]
    argv += ["--where", "answer.template=null", "--title", "LongMemEval-S retrieval (no LLM)"]
    argv += ["--partial"]  # both are rebuilt as backlogs over sittings
    assert main([*argv, "--out", str(tmp_path / "table")]) == 0
    for suffix in (".md", ".csv", ".tex"):
        rebuilt = (tmp_path / "table").with_suffix(suffix).read_text()
        assert rebuilt == (REPO_ROOT / table).with_suffix(suffix).read_text(), suffix


def test_the_ablation_table_is_rebuilt_from_its_committed_runs(tmp_path: Path) -> None:
    """results/ablations.{md,json} from results/ablations_runs (the overlay's folder), as
    committed."""
    assert ablations.main(["--out", str(tmp_path / "ablations")]) == 0
    for suffix in (".md", ".json"):
        rebuilt = (tmp_path / "ablations").with_suffix(suffix).read_text()
        assert rebuilt == (REPO_ROOT / "results" / "ablations").with_suffix(suffix).read_text(), (
            suffix
        )
