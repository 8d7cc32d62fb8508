"""``benchmarks.checks.reproduced`` (``make check-table1``'s comparison): every measured
cell of a report's CSV must match, what the run cost on the machine may differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.checks.reproduced import differences, main
from benchmarks.data.paths import REPO_ROOT

HEADER = "subset,method,backbone,run,evidence_recall_mean,f1_set_mean,wall_s,answering_calls\n"


def table(tmp_path: Path, name: str, *rows: str) -> Path:
    path = tmp_path / name
    path.write_text("# Table 1\n# code abc1234\n" + HEADER + "".join(f"{row}\n" for row in rows))
    return path


def test_costs_may_differ_and_measured_cells_may_not(tmp_path: Path) -> None:
    committed = table(tmp_path, "a.csv", "s,TurnRAG,,r1,0.5,0.25,10.0,20", "s,CAST,,r2,0.4,,3.0,0")
    cheaper = table(tmp_path, "b.csv", "s,CAST,,r2,0.4,,1.0,0", "s,TurnRAG,,r1,0.5,0.25,99.0,0")
    assert differences(committed, cheaper) == []  # row order, seconds and calls are not results
    moved = table(tmp_path, "c.csv", "s,TurnRAG,,r1,0.5,0.2501,10.0,20", "s,ES-Mem,,r3,0.1,,1.0,0")
    assert differences(committed, moved) == [
        f"only in {committed}: s · CAST ·  · r2",
        f"only in {moved}: s · ES-Mem ·  · r3",
        "s · TurnRAG ·  · r1: f1_set_mean '0.25' -> '0.2501'",
    ]


def test_the_command_exits_1_on_a_difference_and_names_a_file_that_is_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = REPO_ROOT / "results" / "table1.csv"
    assert main([str(committed), str(committed)]) == 0
    assert "reproduces every measured cell" in capsys.readouterr().out
    changed = tmp_path / "table1.csv"
    changed.write_text(committed.read_text().replace(",497,", ",496,", 1))
    assert main([str(committed), str(changed)]) == 1
    assert "questions '497' -> '496'" in capsys.readouterr().out
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"other\.csv: no column 'subset'"):
        main([str(committed), str(other)])
