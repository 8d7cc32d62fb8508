"""The efficiency frontier (issue 50 item 5): its sweep, and its figure and csv built from run
folders, each point its run's numbers, the context within the budget, the same bytes twice."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from run_helpers import compose_config, compose_with_hydra, fixture_overrides, sweep_values

from benchmarks import registry
from benchmarks.pipeline.run import run
from benchmarks.tables.frontier import main

pytestmark = pytest.mark.usefixtures("no_env_overrides")

METHODS = ("turn_rag_bm25", "session_rag_bm25")
#: Small enough that a session of the tiny fixture does not fit the first (an empty context).
BUDGETS = (64, 512)


def test_the_frontier_sweeps_the_retrieval_grid_over_five_budgets_without_a_reader() -> None:
    cfg = compose_with_hydra(["+experiment=frontier"])
    params = cfg.hydra.sweeper.params
    assert sweep_values(params["method"]) == registry.members("retrieval")
    assert sweep_values(params["answer.context_budget"]) == ["256", "512", "1024", "2048", "4096"]
    assert cfg.answer.template is None
    assert cfg.subset.name == "three_conversations"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], dict]:
    """Retrieval-only runs of the tiny fixture, each method at each budget: their metrics."""
    root = tmp_path_factory.mktemp("frontier")
    found = {}
    for method in METHODS:
        for budget in BUDGETS:
            overrides = fixture_overrides(root / "runs", root / "cache")
            cfg = compose_config(
                [*overrides, f"method={method}", "answer=none", f"answer.context_budget={budget}"]
            )
            found[(method, budget)] = run(cfg)
    return found


def frontier_rows(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("# ")]
    return list(csv.DictReader(lines))


def test_each_point_is_its_runs_numbers_within_its_budget(
    runs: dict[tuple[str, int], dict], tmp_path: Path
) -> None:
    runs_dir = Path(next(iter(runs.values()))["run_dir"]).parent
    out = tmp_path / "frontier_locomo"
    assert main(["--runs", str(runs_dir), "--subset", "full", "--out", str(out)]) == 0
    rows = {row["run_id"]: row for row in frontier_rows(out.with_suffix(".csv"))}
    names = {"turn_rag_bm25": "TurnRAG (bm25)", "session_rag_bm25": "SessionRAG (bm25)"}
    assert len(rows) == len(runs)
    for (method, budget), metrics in runs.items():
        row = rows[Path(metrics["run_dir"]).name]
        assert (row["method"], int(row["context_budget"])) == (names[method], budget)
        tokens = float(row["context_tokens_mean"])
        assert tokens == round(metrics["context_tokens"]["mean"], 1)
        assert tokens <= budget
        assert float(row["evidence_recall"]) == round(metrics["evidence_recall"]["mean"], 4)
        assert row["answer_coverage"] != ""
    empty = Path(runs[("session_rag_bm25", BUDGETS[0])]["run_dir"]).name
    # No session fits the budget whole: the first is cut to fit it, never dropped.
    assert float(rows[empty]["context_tokens_mean"]) == float(BUDGETS[0])
    caption = out.with_suffix(".csv").read_text().splitlines()[1]
    assert "retrieval only (no reader), context budgets 64, 512 tokens" in caption

    png = out.with_suffix(".png").read_bytes()
    assert main(["--runs", str(runs_dir), "--subset", "full", "--out", str(out)]) == 0
    assert out.with_suffix(".png").read_bytes() == png


def test_no_retrieval_run_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--runs", str(tmp_path), "--subset", "full", "--out", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.startswith(f"error: no retrieval-only run in {tmp_path}")


def test_runs_that_differ_in_more_than_the_budget_are_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for budget, seed in zip(BUDGETS, (0, 1), strict=True):
        overrides = fixture_overrides(tmp_path / "runs", tmp_path / "cache")
        extra = ["method=turn_rag_bm25", "answer=none", f"answer.context_budget={budget}"]
        run(compose_config([*overrides, *extra, f"seed={seed}"]))
    capsys.readouterr()  # the runs' own lines
    out = tmp_path / "frontier"
    assert main(["--runs", str(tmp_path / "runs"), "--subset", "full", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: the runs at budget {BUDGETS[0]} and at budget {BUDGETS[1]} disagree on seed"
    )
    assert not out.with_suffix(".png").exists()
