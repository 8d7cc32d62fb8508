"""``benchmarks.checks.reproduced`` (``make check-table1``'s and ``make check-table2``'s
comparison): every measured cell of a report's CSV, or every record of a slice's runs, must
match; what the run cost on the machine may differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.checks.reproduced import compared, differences, main, slice_differences
from benchmarks.data.paths import REPO_ROOT
from benchmarks.runs.folders import own_records

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
    with pytest.raises(ValueError, match=r"other\.csv: no column 'method'"):
        main([str(committed), str(other)])


def write_run(
    runs: Path, run: str, subset: str, records: list[dict], probes: list[dict], **config: object
) -> None:
    """A run folder as the runner writes it: its config, its records and its graded probes."""
    folder = runs / run
    folder.mkdir(parents=True)
    config |= {"method": {"_target_": "TurnRAG"}, "subset": {"name": subset}, "seed": 0}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "judge_probes.json").write_text(json.dumps(probes))


def record(question: str, prediction: str, latency: float) -> dict:
    return {"question_id": question, "prediction": prediction, "scores": {"judge_acc": 1.0},
            "answering": {"cached": latency > 1, "latency_s": latency}}  # fmt: skip


def probe(question: str, verdict: bool) -> dict:
    return {"probe_id": f"{question}:gold", "kind": "gold", "verdicts": {"longmemeval": verdict}}


def test_a_slice_is_compared_record_by_record_with_the_committed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """make check-table2: the slice's runs have other ids and fewer questions; each question's
    record and probe must equal the committed run's (timings and cache flags apart)."""
    committed, reproduced = tmp_path / "committed", tmp_path / "reproduced"
    full = [record(q, f"answer {q}", 9.0) for q in ("q1", "q2", "q3")]
    write_run(committed, "aaa", "lme30", full, [probe("q1", True), probe("q2", False)])
    committed_csv = table(tmp_path, "a.csv", "lme30,TurnRAG,,aaa,0.5,0.25,10.0,20")
    reproduced_csv = table(tmp_path, "b.csv", "lme6,TurnRAG,,bbb,0.1,0.5,1.0,0")
    runs = ["--runs", str(committed), str(reproduced)]
    write_run(reproduced, "bbb", "lme6", [record("q2", "answer q2", 0.5)], [probe("q2", False)])
    assert main([str(committed_csv), str(reproduced_csv), *runs]) == 0
    assert "every record and probe of its 1 rows" in capsys.readouterr().out

    (reproduced / "bbb" / "predictions.jsonl").write_text(
        json.dumps(record("q2", "another answer", 0.5)) + "\n"
    )
    (reproduced / "bbb" / "judge_probes.json").write_text(json.dumps([probe("q2", True)]))
    assert main([str(committed_csv), str(reproduced_csv), *runs]) == 1
    out = capsys.readouterr().out
    assert "lme6 · TurnRAG ·  · bbb (committed run aaa): question q2: prediction" in out
    assert "probe q2:gold: verdicts.longmemeval: committed 'False', now 'True'" in out

    (reproduced / "bbb" / "config.yaml").write_text(yaml.safe_dump({"method": "other"}))
    assert slice_differences(committed_csv, reproduced_csv, committed, reproduced) == [
        f"no row of {committed_csv} has the setting of lme6 · TurnRAG ·  · bbb",
        "not reproduced: lme30 · TurnRAG ·  · aaa",
    ]


def test_a_ranking_is_compared_by_the_scores_it_decides_not_item_by_item(tmp_path: Path) -> None:
    """Two non-gold turns a hair apart deep in a full-depth ranking may swap on another CPU: no
    metric reads their order, so the record still reproduces; a gold turn moved down does not."""
    committed = next(
        r for r in own_records(REPO_ROOT / "results" / "table2_runs" / "05f6a2aae291")
        if r["question_id"] == "1d4e3b97"
    )  # fmt: skip
    turns = committed["ranking"]["turn"]
    gold = [t for t in turns if t.startswith("answer_")]
    swapped = list(turns)
    swapped[-1], swapped[-2] = swapped[-2], swapped[-1]
    assert not {swapped[-1], swapped[-2]} & set(gold)
    demoted = [t for t in turns if t != gold[0]] + [gold[0]]
    longmemeval = {"dataset": {"name": "longmemeval", "variant": "s"}}
    write_run(tmp_path / "a", "run", "lme30", [committed], [], **longmemeval)
    for name, ranking in (("swapped", swapped), ("demoted", demoted)):
        moved = committed | {"ranking": committed["ranking"] | {"turn": ranking}}
        write_run(tmp_path / name, "run", "lme6", [moved], [], **longmemeval)
    assert compared(tmp_path / "a" / "run", tmp_path / "swapped" / "run") == []
    found = compared(tmp_path / "a" / "run", tmp_path / "demoted" / "run")
    assert found and all(line.startswith("ranking.scores.") for _, line in found)
