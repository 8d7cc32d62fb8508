"""Table 1 from hand-written run directories: files, numbers, adversarial policy, p-values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from benchmarks.metrics.stats import bootstrap_ci, paired_bootstrap_pvalue
from benchmarks.report import ReportError, build_report, main, render_markdown

TURN_RAG = {"_target_": "memsys.methods.baselines.TurnRAG", "retriever": "dense", "top_k": 50}
ZERO = {"_target_": "memsys.methods.baselines.ZeroHistory"}
NEW_METHOD = {"_target_": "memsys.methods.esmem.ESMem", "extraction": "llm"}


def config(method: dict[str, Any], *, template: str | None = "uniform", **changes: Any) -> dict:
    """A config.yaml as the runner writes it, for the smoke subset."""
    written: dict[str, Any] = {
        "dataset": {"name": "locomo", "file": "locomo/locomo10.json"},
        "method": method,
        "backbone": {"name": "tiny-llm", "provider": {"_target_": "fake"}},
        "judge": {"enabled": True, "backbone": None},
        "answer": {"template": template, "context_budget": 2048, "max_tokens": 32},
        "subset": {"name": "smoke", "conversations": 1, "max_questions": 40},
        "embedder": {"model": "all-MiniLM-L6-v2", "batch_size": 64},
        "seed": 0,
        "adversarial": "exclude",
        "batch_size": 16,
    }
    if template is None:
        del written["backbone"], written["judge"]
    return written | changes


def record(index: int, category: str, f1: float | None, recall: float | None = 1.0) -> dict:
    """One predictions.jsonl line; ``f1=None`` is a retrieval-only question."""
    line: dict[str, Any] = {
        "question_id": f"conv-1:q{index}",
        "conversation_id": "conv-1",
        "category": category,
        "evidence": ["D1:1"],
        "context_tokens": 100 + index,
        "evidence_recall": recall,
        "failure": None,
        "scores": {},
        "latency_s": {"retrieve": 0.01, "render": 0.001},
    }
    if f1 is not None:
        line["scores"] = {"f1_locomo": f1, "f1_set": f1, "bleu1": f1 / 2, "judge_acc": 1.0}
        line["answering"] = {"prompt_tokens": 10, "completion_tokens": 2, "latency_s": 0.5}
        line["judging"] = {"prompt_tokens": 5, "completion_tokens": 1, "attempts": 1}
    return line


def write_run(root: Path, name: str, run_config: dict, records: list[dict]) -> Path:
    """A finished run directory: config.yaml, predictions.jsonl, metrics.json."""
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.yaml").write_text(yaml.safe_dump(run_config))
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    metrics = {"construction": {"built": 1, "loaded": 0}, "accounting": {"stages": {}}}
    (directory / "metrics.json").write_text(json.dumps(metrics))
    return directory


def scored(values: list[float], category: str = "single_hop") -> list[dict]:
    return [record(i, category, value) for i, value in enumerate(values)]


def read_table(out: Path) -> pd.DataFrame:
    return pd.read_csv(out.parent / f"{out.name}.csv", comment="#")


def test_writes_md_csv_tex_png_with_the_header(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "a", config(TURN_RAG), scored([0.0, 0.5, 1.0, 1.0]))
    write_run(runs, "b", config(TURN_RAG, template=None), scored([None] * 4))  # type: ignore[list-item]
    out = tmp_path / "results" / "table1"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    for suffix in (".md", ".csv", ".tex", ".png"):
        assert (out.parent / f"table1{suffix}").stat().st_size > 0
    assert (out.parent / "table1.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (out.parent / "table1.md").read_text()
    assert "offline smoke subset: 1 conversation, 40 questions — not the paper setting" in markdown
    assert "A-Mem/mem0 set F1" in markdown and "judge model: same as answering backbone" in markdown
    assert "template uniform, context budget 2048 tokens" in markdown
    assert "## Retrieval only (answer=none)" in markdown
    tex = (out.parent / "table1.tex").read_text()
    assert r"\toprule" in tex and "% Subset: smoke" in tex and r"F1 (f1\_set)" in tex
    table = read_table(out)
    assert list(table["retrieval_only"]) == [False, True]
    assert (
        pd.isna(table.loc[1, "overall_f1_set_mean"]) and table.loc[1, "evidence_recall_mean"] == 1
    )


def test_hand_computed_mean_and_interval(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "a", config(TURN_RAG), scored([0.0, 0.5, 1.0, 1.0]))
    report = build_report(runs)
    overall = report.rows[0].scores["overall"]["f1_set"]
    assert overall is not None and overall.mean == 0.625 and overall.n == 4
    assert overall.low < overall.mean < overall.high
    assert (overall.low, overall.high) == (
        bootstrap_ci([0.0, 0.5, 1.0, 1.0]).low,
        bootstrap_ci([0.0, 0.5, 1.0, 1.0]).high,
    )
    assert report.rows[0].scores["overall"]["bleu1"].mean == 0.3125  # type: ignore[union-attr]
    assert f"0.625 [{overall.low:.2f}, {overall.high:.2f}]" in render_markdown(report)


@pytest.mark.parametrize(("policy", "overall"), [("exclude", 1.0), ("include", 0.5)])
def test_adversarial_policy_decides_the_overall_mean(
    tmp_path: Path, policy: str, overall: float
) -> None:
    records = [*scored([1.0, 1.0]), record(2, "adversarial", 0.0), record(3, "adversarial", 0.0)]
    write_run(tmp_path, "a", config(TURN_RAG, adversarial=policy), records)
    row = build_report(tmp_path).rows[0]
    assert row.scores["overall"]["f1_set"].mean == overall  # type: ignore[union-attr]
    assert row.scores["adversarial"]["f1_set"].mean == 0.0  # type: ignore[union-attr]
    assert row.scores["adversarial"]["f1_set"].n == 2  # type: ignore[union-attr]


def test_p_value_against_the_best_baseline_of_the_same_backbone(tmp_path: Path) -> None:
    best = [0.2, 0.4, 0.5, 0.1, 0.3, 0.6]
    method = [0.9, 0.8, 1.0, 0.7, 0.9]  # one question fewer: paired on the five in common
    write_run(tmp_path, "zero", config(ZERO), scored([0.0] * 6))
    write_run(tmp_path, "turn", config(TURN_RAG), scored(best))
    write_run(tmp_path, "new", config(NEW_METHOD), scored(method))
    out = tmp_path / "table1"
    assert main(["--runs", str(tmp_path), "--out", str(out)]) == 0
    table = read_table(out).set_index("method")
    assert table.loc["ESMem", "p_value_baseline"] == "TurnRAG (dense)"
    assert table.loc["ESMem", "p_value_questions"] == 5
    expected = paired_bootstrap_pvalue(method, best[:5])
    assert table.loc["ESMem", "p_value"] == round(expected, 4)
    assert table.loc["ESMem", "extraction"] == "llm"
    assert pd.isna(table.loc["ZeroHistory", "p_value"]) and table.loc["TurnRAG (dense)", "baseline"]
    markdown = (tmp_path / "table1.md").read_text()
    assert f"{expected:.4f} (vs TurnRAG (dense))" in markdown


def test_only_baselines_still_have_the_p_value_column(tmp_path: Path) -> None:
    write_run(tmp_path / "runs", "a", config(ZERO), scored([0.0, 1.0]))
    out = tmp_path / "table1"
    assert main(["--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert "p_value" in read_table(out).columns
    assert "p vs best baseline" in (tmp_path / "table1.md").read_text()


def test_no_matching_run_names_the_folder_and_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, "a", config(TURN_RAG), scored([1.0]))
    assert main(["--runs", str(tmp_path), "--subset", "full", "--out", str(tmp_path / "t")]) == 2
    message = capsys.readouterr().err
    assert f"no finished run in {tmp_path} matches dataset=locomo, subset=full" in message
    assert "it holds locomo/smoke" in message
    with pytest.raises(ReportError, match="matches dataset=locomo, subset=smoke; the folder does"):
        build_report(tmp_path / "missing")


def test_two_runs_on_one_row_name_the_key_that_differs(tmp_path: Path) -> None:
    write_run(tmp_path, "a", config(TURN_RAG), scored([1.0]))
    write_run(tmp_path, "b", config(TURN_RAG | {"top_k": 10}), scored([1.0]))
    with pytest.raises(ReportError, match=r"a and b both give the row .* differ in method\.top_k"):
        build_report(tmp_path)
    assert build_report(tmp_path, where={"method.top_k": 10}).rows[0].run.directory.name == "b"


def test_runs_under_different_conditions_are_refused(tmp_path: Path) -> None:
    write_run(tmp_path, "a", config(TURN_RAG), scored([1.0]))
    write_run(tmp_path, "b", config(ZERO, seed=1), scored([1.0]))
    with pytest.raises(ReportError, match="disagree on seed: 0 in a, 1 in b"):
        build_report(tmp_path)
