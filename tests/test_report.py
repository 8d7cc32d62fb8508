"""Tables 1 and 2 from hand-written run directories: files, numbers, adversarial policy,
p-values, LongMemEval's aggregates and ranking metrics, and what the intervals resample."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import yaml
from test_sweeps import compose_with_hydra, sweep_values

from benchmarks.metrics.stats import bootstrap_ci, paired_bootstrap_pvalue
from benchmarks.report import (
    LONGMEMEVAL_TYPES,
    ReportError,
    build_report,
    main,
    method_name,
    render_markdown,
)
from benchmarks.summary import interval_line, longmemeval_summary, summarize_run
from memsys.types import LONGMEMEVAL_CATEGORIES

TURN_RAG = {"_target_": "memsys.methods.baselines.TurnRAG", "retriever": "dense", "top_k": 50}
ZERO = {"_target_": "memsys.methods.baselines.ZeroHistory"}
NEW_METHOD = {"_target_": "memsys.methods.esmem.ESMem", "extraction": "llm"}


def config(method: dict[str, Any], *, template: str | None = "uniform", **changes: Any) -> dict:
    """A config.yaml as the runner writes it, for the smoke subset."""
    written: dict[str, Any] = {
        "dataset": {"name": "locomo", "file": "locomo/locomo10.json", "judge_protocol": "mem0"},
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
    if template is None:  # as settings.run_identity writes a retrieval-only run
        del written["backbone"], written["judge"], written["dataset"]["judge_protocol"]
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
    assert "A-Mem/mem0 set F1" in markdown and "Judge model: same as answering backbone" in markdown
    assert "template uniform, context budget 2048 tokens" in markdown
    assert (  # one conversation: the intervals cannot resample conversations, and say so
        "95% percentile bootstrap CIs resampling questions (1000 resamples) because the subset "
        "has 1 conversation, fewer than the 5 a cluster bootstrap needs: questions of one "
        "conversation share its memory, so these intervals understate uncertainty"
    ) in markdown
    assert "## Retrieval only (answer=none)" in markdown
    tex = (out.parent / "table1.tex").read_text()
    assert r"\toprule" in tex and "% Subset: smoke" in tex and r"F1 (f1\_set)" in tex
    table = read_table(out)
    assert list(table["retrieval_only"]) == [False, True]
    assert (
        pd.isna(table.loc[1, "overall_f1_set_mean"]) and table.loc[1, "evidence_recall_mean"] == 1
    )


def test_retrieval_rows_show_costs_only_when_the_invocations_cover_every_question(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    directory = write_run(runs, "b", config(TURN_RAG, template=None), scored([None] * 4))  # type: ignore[list-item]
    metrics = json.loads((directory / "metrics.json").read_text())
    embedding = {"requested": 2500, "encoded": 1900, "encode_seconds": 9.5}
    costs = {"construction_s": 12.4, "embedding": embedding, "wall_s": 61.0, "peak_rss_mb": 812}
    out = tmp_path / "retrieval"
    shown = {}
    for questions in (3, 4):  # a killed invocation left one question's cost out; then all four
        metrics["invocations"] = {**costs, "count": 2, "questions": questions}
        (directory / "metrics.json").write_text(json.dumps(metrics))
        assert main(["--runs", str(runs), "--out", str(out)]) == 0
        markdown = out.with_suffix(".md").read_text()
        header, row = markdown_section(markdown, "Retrieval only (answer=none)")
        shown[questions] = dict(zip(header, row, strict=True))
    assert shown[3]["Wall (s)"] == shown[3]["Texts embedded / asked"] == "—"
    assert (
        shown[4]["Construction (s)"] == "12"
        and shown[4]["Texts embedded / asked"] == "1,900 / 2,500"
    )
    assert (shown[4]["Wall (s)"], shown[4]["Peak RSS (MB)"]) == ("61", "812")
    assert shown[4]["Texts parsed / asked"] == "—"  # not logged by these invocations
    table = read_table(out)
    assert (table.loc[0, "texts_embedded"], table.loc[0, "peak_rss_mb"]) == (1900, 812)
    # A run done by worker processes says how many: its wall time compares only at that count.
    parsing = {"requested": 1200, "parsed": 310, "parse_seconds": 4.0}
    metrics["invocations"] = {**costs, "count": 2, "questions": 4, "workers": 2, "parsing": parsing}
    (directory / "metrics.json").write_text(json.dumps(metrics))
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    header, row = markdown_section(
        out.with_suffix(".md").read_text(), "Retrieval only (answer=none)"
    )
    cells = dict(zip(header, row, strict=True))
    assert (cells["Wall (s)"], cells["Texts parsed / asked"]) == ("61 (2 workers)", "310 / 1,200")
    table = read_table(out)
    assert (table.loc[0, "texts_parsed"], table.loc[0, "texts_parsing_asked"]) == (310, 1200)
    assert read_table(out).loc[0, "workers"] == 2


def test_costs_are_summed_from_the_invocation_ledger_where_a_run_has_one(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    directory = write_run(runs, "b", config(TURN_RAG, template=None), scored([None] * 4))  # type: ignore[list-item]
    metrics = json.loads((directory / "metrics.json").read_text())
    embedding = {"requested": 20, "encoded": 5, "encode_seconds": 1.0}
    parsing = {"requested": 40, "parsed": 9, "parse_seconds": 2.0}
    # metrics.json as an older version summed it: parsing counted although one invocation
    # (logged before parses were counted) has none.
    metrics["invocations"] = {
        "count": 2, "questions": 4, "wall_s": 9.0, "peak_rss_mb": 700, "construction_s": 6.0,
        "embedding": embedding, "parsing": parsing,
    }  # fmt: skip
    (directory / "metrics.json").write_text(json.dumps(metrics))
    ledger = [
        {"questions": 1, "wall_s": 4.0, "peak_rss_mb": 700, "construction_s": 3.0},
        {"questions": 3, "wall_s": 5.0, "peak_rss_mb": 600, "construction_s": 3.0},
    ]
    ledger[0]["embedding"], ledger[1]["embedding"] = embedding, embedding
    ledger[1]["parsing"] = parsing
    (directory / "invocations.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ledger))
    out = tmp_path / "retrieval"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    header, row = markdown_section(
        out.with_suffix(".md").read_text(), "Retrieval only (answer=none)"
    )
    cells = dict(zip(header, row, strict=True))
    assert (cells["Texts embedded / asked"], cells["Texts parsed / asked"]) == ("10 / 40", "—")
    assert (cells["Wall (s)"], cells["Peak RSS (MB)"]) == ("9", "700")


def test_unfinished_runs_are_left_out_and_named_with_their_progress(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "done", config(TURN_RAG, template=None), scored([None] * 4))  # type: ignore[list-item]
    partial = write_run(runs, "partial", config(NEW_METHOD, template=None), scored([None] * 3))  # type: ignore[list-item]
    (partial / "metrics.json").unlink()  # the runner writes it last: this run was interrupted
    with (partial / "predictions.jsonl").open("a") as log:  # a failed question asked again
        log.write(json.dumps(record(2, "single_hop", None)) + "\n")
    other = write_run(runs, "other", config(ZERO, subset={"name": "full"}), scored([1.0]))
    (other / "metrics.json").unlink()  # another subset: not this table's business

    report = build_report(runs)

    assert [row.run.directory.name for row in report.rows] == ["done"]
    assert report.header[-1] == (
        "Not in the table, unfinished (a rerun resumes them): "
        "ES-Mem, llm (3 questions logged, run partial)"
    )


def test_row_names_show_the_retriever_and_the_compressor() -> None:
    secom = {"_target_": "memsys.methods.secom.SeCom", "retriever": "dense"}
    assert method_name({**secom, "compression": "none"}) == "SeCom (dense, no compression)"
    assert (
        method_name({**secom, "compression": "self_info"}) == "SeCom (dense, self_info compression)"
    )
    assert method_name(TURN_RAG) == "TurnRAG (dense)" and method_name(ZERO) == "ZeroHistory"
    assert method_name({"_target_": "memsys.methods.esmem.ESMem"}) == "ES-Mem"


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
    assert table.loc["ES-Mem", "p_value_baseline"] == "TurnRAG (dense)"
    assert table.loc["ES-Mem", "p_value_questions"] == 5
    expected = paired_bootstrap_pvalue(method, best[:5])
    assert table.loc["ES-Mem", "p_value"] == round(expected, 4)
    assert table.loc["ES-Mem", "extraction"] == "llm (tiny-llm)"  # the model that built the memory
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
    write_run(tmp_path, "b", config(TURN_RAG, batch_size=4), scored([1.0]))
    with pytest.raises(ReportError, match=r"a and b both give the row .* differ in batch_size"):
        build_report(tmp_path)
    assert build_report(tmp_path, where={"batch_size": 4}).rows[0].run.directory.name == "b"


def test_ablations_of_one_method_get_rows_labelled_by_their_settings(tmp_path: Path) -> None:
    write_run(tmp_path, "a", config(TURN_RAG), scored([1.0]))
    write_run(tmp_path, "b", config(TURN_RAG | {"top_k": 10}), scored([0.5]))
    labels = sorted(row.key.method for row in build_report(tmp_path).rows)
    assert labels == ["TurnRAG (dense) [top_k=10]", "TurnRAG (dense) [top_k=50]"]


def test_runs_under_different_conditions_are_refused(tmp_path: Path) -> None:
    write_run(tmp_path, "a", config(TURN_RAG), scored([1.0]))
    write_run(tmp_path, "b", config(ZERO, seed=1), scored([1.0]))
    with pytest.raises(ReportError, match="disagree on seed: 0 in a, 1 in b"):
        build_report(tmp_path)


# ---------------------------------------------------------------------------------------------
# LongMemEval (Table 2)

LME_DATASET = {"name": "longmemeval", "variant": "s"}
LME30 = {"name": "lme30", "conversations": None, "max_questions": 30}
RANKING_NAMES = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10")


def lme_record(
    question_id: str,
    category: str,
    correct: float | None,
    *,
    session: float | None = 1.0,
    turn: float | None = 1.0,
) -> dict:
    """One LongMemEval line: a verdict (None = failed), and every ranking metric of a level
    equal to ``session`` / ``turn`` (None = no evidence at that level); ``_abs`` ids have none."""
    abstention = question_id.endswith("_abs")
    line = record(0, category, None) | {
        "question_id": question_id,
        "conversation_id": question_id,
        "is_abstention": abstention,
        "ranking": None
        if abstention
        else {
            level: None if value is None else dict.fromkeys(RANKING_NAMES, value)
            for level, value in (("session", session), ("turn", turn))
        },
    }
    line["scores"] = {"f1_set": 0.5, "f1_locomo": 0.5, "bleu1": 0.25, "judge_acc": correct}
    return line


# Four types out of order; a failed verdict (ku2); an abstention question; a turn-level gap (ssu1).
LME_RECORDS = [
    lme_record("ssu1", "single_session_user", 1.0, turn=None),
    lme_record("tr1", "temporal_reasoning", 1.0),
    lme_record("tr2", "temporal_reasoning", 0.0, session=0.0, turn=0.0),
    lme_record("tr3_abs", "temporal_reasoning", 1.0),
    lme_record("ms1", "multi_session", 1.0),
    lme_record("ms2", "multi_session", 1.0, turn=0.0),
    lme_record("ku1", "knowledge_update", 0.0, session=0.0, turn=0.0),
    lme_record("ku2", "knowledge_update", None),
]


def lme_config(method: dict[str, Any], *, template: str | None = "uniform") -> dict:
    return config(method, template=template, dataset=LME_DATASET, subset=LME30)


def markdown_section(markdown: str, title: str) -> list[list[str]]:
    """The rows of one md table, header first, as lists of cells."""
    lines = markdown.split(f"## {title}\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [line.strip("| ").split(" | ") for line in lines if not line.startswith("|---")]


def report_table2(runs: Path, out: Path) -> pd.DataFrame:
    """Run the command line on the lme30 runs of ``runs``; the csv it wrote."""
    argv = ["--runs", str(runs), "--dataset", "longmemeval_s", "--subset", "lme30"]
    assert main([*argv, "--out", str(out)]) == 0
    return read_table(out)


def shown(values: list[float]) -> str:
    interval = bootstrap_ci(values)
    return f"{interval.mean:.3f} [{interval.low:.2f}, {interval.high:.2f}]"


def test_longmemeval_table_2_by_hand(tmp_path: Path) -> None:
    write_run(tmp_path / "runs", "turn", lme_config(TURN_RAG), LME_RECORDS)
    unanswered = [line | {"scores": {}} for line in LME_RECORDS]
    write_run(tmp_path / "runs", "bm25", lme_config(TURN_RAG, template=None), unanswered)
    out = tmp_path / "table2"
    table = report_table2(tmp_path / "runs", out).set_index("run")
    markdown = (tmp_path / "table2.md").read_text()
    assert markdown.startswith("# Table 2\n")
    assert "Dataset: longmemeval_s (LongMemEval-S" in markdown
    assert "lme30 (30 questions, stratified by question type, deterministic — offline" in markdown
    assert "LongMemEval's per-type yes/no instructions" in markdown
    assert "Judge model: same as answering backbone" in markdown
    assert "## Per category" not in markdown and "Adversarial" not in markdown

    header, row = markdown_section(markdown, "LongMemEval accuracy (judge) per question type")
    assert header[3:] == [
        "Temporal (n=3)",  # ES-Mem's Table 2 order, whatever the file order
        "Multi-session (n=2)",
        "Knowledge-update (n=2)",
        "Single-user (n=1)",
        "Overall (N=8)",
        "Task-averaged",
        "Abstention",
        "p vs best baseline (judge)",
        "Run",
    ]
    assert row[3:] == [
        shown([1.0, 0.0, 1.0]),
        shown([1.0, 1.0]),
        shown([0.0]),  # the failed verdict is left out, not scored 0
        shown([1.0]),
        shown([1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]),  # file order: ssu1 first
        f"{(2 / 3 + 1 + 0 + 1) / 4:.3f}",
        shown([1.0]),
        "—",
        "turn",
    ]

    header, answered, retrieval_only = markdown_section(markdown, "LongMemEval retrieval")
    assert header[3:8] == [*(f"Session {name}" for name in RANKING_NAMES), "Session n"]
    session = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]  # every question but tr3_abs
    turn = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]  # and not ssu1, which has no has_answer turn
    assert answered[3:13] == [*[shown(session)] * 4, "7", *[shown(turn)] * 4, "6"]
    assert (
        retrieval_only[:3] == ["TurnRAG (dense)", "—", "—"]
        and retrieval_only[3:13] == answered[3:13]
    )

    assert table.loc["turn", "task_averaged_judge_acc"] == round(2 / 3, 4)
    assert table.loc["turn", "overall_judge_acc_mean"] == round(5 / 7, 4)
    assert table.loc["turn", "knowledge_update_judge_acc_n"] == 1
    assert table.loc["turn", "abstention_judge_acc_mean"] == 1.0
    assert table.loc["turn", "abstention_judge_acc_n"] == 1
    assert table.loc["turn", "session_recall_all@10_mean"] == round(5 / 7, 4)
    assert table.loc["turn", "turn_ndcg_any@5_mean"] == 0.5
    assert table.loc["turn", "turn_ndcg_any@5_n"] == 6
    assert table.loc["bm25", "session_recall_all@5_n"] == 7
    assert pd.isna(table.loc["bm25", "task_averaged_judge_acc"])
    assert r"Temporal (n=3)" in (tmp_path / "table2.tex").read_text()


def test_longmemeval_numbers_match_the_run_summary(tmp_path: Path) -> None:
    """metrics.json and the report group the records through the same function."""
    write_run(tmp_path, "turn", lme_config(TURN_RAG), LME_RECORDS)
    row = build_report(tmp_path, dataset="longmemeval", subset="lme30").rows[0]
    summary = longmemeval_summary(LME_RECORDS, seed=0)
    cells = row.longmemeval
    assert cells is not None and cells.task_averaged == summary["task_averaged_accuracy"]
    pairs = [(cells.overall, summary["overall_accuracy"])]
    pairs += [(cells.abstention, summary["abstention_accuracy"])]
    pairs += [(cells.per_type[t], summary["accuracy_per_type"][t]) for t in cells.per_type]
    pairs += [
        (cells.retrieval[level][name], summary["retrieval"][level][name])
        for level in ("session", "turn")
        for name in RANKING_NAMES
    ]
    for found, expected in pairs:
        assert found is not None
        assert [found.mean, found.low, found.high, found.n] == [
            expected["mean"],
            *expected["ci95"],
            expected["n"],
        ]


def test_longmemeval_judge_p_value_against_the_best_baseline(tmp_path: Path) -> None:
    ids = [f"q{i}" for i in range(6)]
    zero = [lme_record(q, "multi_session", 0.0) for q in ids]
    turn = [lme_record(q, "multi_session", v) for q, v in zip(ids, [1, 0, 1, 0, 0, 1], strict=True)]
    esmem = [
        lme_record(q, "multi_session", v) for q, v in zip(ids, [1, 1, 1, 1, 0, 1], strict=True)
    ]
    write_run(tmp_path, "zero", lme_config(ZERO), zero)
    write_run(tmp_path, "turn", lme_config(TURN_RAG), turn)
    write_run(tmp_path, "esmem", lme_config(NEW_METHOD), esmem)
    table = report_table2(tmp_path, tmp_path / "table2").set_index("run")
    expected = paired_bootstrap_pvalue([1, 1, 1, 1, 0, 1], [1, 0, 1, 0, 0, 1])
    assert table.loc["esmem", "judge_acc_p_value"] == round(expected, 4)
    assert table.loc["esmem", "judge_acc_p_value_baseline"] == "TurnRAG (dense)"
    assert table.loc["esmem", "judge_acc_p_value_questions"] == 6
    assert pd.isna(table.loc["turn", "judge_acc_p_value"])
    row = markdown_section(
        (tmp_path / "table2.md").read_text(), "LongMemEval accuracy (judge) per question type"
    )[-1]
    assert row[-2] == f"{expected:.4f} (vs TurnRAG (dense))"


def test_table_2_columns_cover_every_longmemeval_type() -> None:
    assert set(LONGMEMEVAL_TYPES) == set(LONGMEMEVAL_CATEGORIES.values())


def test_table2_experiment_composes_the_lme12_grid() -> None:
    cfg = compose_with_hydra(["+experiment=table2"])
    assert (cfg.dataset.name, cfg.dataset.variant, cfg.subset.name) == ("longmemeval", "s", "lme12")
    assert cfg.answer.template == "uniform" and cfg.answer.context_budget == 1024
    methods = sweep_values(cfg.hydra.sweeper.params.method)
    table1 = sweep_values(compose_with_hydra(["+experiment=table1"]).hydra.sweeper.params.method)
    # SeCom without its CPU compression on ~115k-token haystacks; every other row as in Table 1
    assert methods == ["secom_no_denoise" if m == "secom" else m for m in table1]


def test_every_judge_protocol_gets_a_column_and_its_probe_figures(tmp_path: Path) -> None:
    """A lenient mem0 judge (every answer accepted) beside a strict one (half), both graded on
    the probes of two runs (pooled once per probe id): 2/2 gold and 3/3 wrong answers accepted by
    mem0, 1/2 and 0/3 by strict; the judge is the reader, and the header says so."""
    runs = tmp_path / "runs"
    probes = [
        {"probe_id": "q0:gold", "kind": "gold", "verdicts": {"mem0": True, "strict": True}},
        {"probe_id": "q1:gold", "kind": "gold", "verdicts": {"mem0": True, "strict": False}},
        {"probe_id": "q0:other_question", "kind": "other_question",
         "verdicts": {"mem0": True, "strict": False}},
        {"probe_id": "q0:distractor", "kind": "distractor",
         "verdicts": {"mem0": True, "strict": False}},
        {"probe_id": "q1:distractor", "kind": "distractor",
         "verdicts": {"mem0": True, "strict": False}},
    ]  # fmt: skip
    for name, method in (("a", TURN_RAG), ("b", ZERO)):
        lines = scored([1.0, 0.0, 1.0, 0.0])
        for index, line in enumerate(lines):
            line["scores"]["judge_acc_strict"] = float(index % 2 == 0)
            line["other_judgings"] = {"strict": {"attempts": 1, "prompt_tokens": 7}}
        directory = write_run(runs, name, config(method), lines)
        (directory / "judge_probes.json").write_text(json.dumps(probes[: 3 if name == "a" else 5]))
    out = tmp_path / "table"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    markdown = out.with_suffix(".md").read_text()
    assert "| Judge | Judge strict | p vs best baseline |" in markdown
    assert "| 1.000 [1.00, 1.00] | 0.500 [0.00, 1.00] |" in markdown
    assert "Judges: each answer graded under mem0 (Judge: mem0-style" in markdown
    assert "Judge model tiny-llm is also the reader of its rows (tiny-llm)" in markdown
    assert (
        "Judge tiny-llm · mem0 probes: accepted 2/2 gold answers (rejected 0% of known-right); "
        "accepted 1/1 other questions' answers and 2/2 topical distractors (accepted 100% of "
        "known-wrong) — does not discriminate: its column is NOT a measure of accuracy"
    ) in markdown
    assert (
        "Judge tiny-llm · strict probes: accepted 1/2 gold answers (rejected 50% of "
        "known-right); accepted 0/1 other questions' answers and 0/2 topical distractors "
        "(accepted 0% of known-wrong) — discriminates on the probes"
    ) in markdown
    table = read_table(out).set_index("method")
    assert table.loc["ZeroHistory", "overall_judge_acc_strict_mean"] == 0.5
    assert table.loc["ZeroHistory", "judging_calls"] == 8  # 4 verdicts per protocol
    assert table.loc["ZeroHistory", "judging_prompt_tokens"] == 4 * 5 + 4 * 7


def test_a_run_with_too_many_failures_is_marked_invalid_with_its_count(tmp_path: Path) -> None:
    """2 failed of 50 (4%) is over the default 2%: the row says INVALID and how many failed; the
    failures are left out of its mean (not scored as 0); a looser threshold lets it stand."""
    runs = tmp_path / "runs"
    lines = scored([1.0] * 48 + [0.0] * 2)
    for line in lines[-2:]:
        line.update(failure="answer: HTTP 500", scores={}, answering=None, judging=None)
    write_run(runs, "a", config(TURN_RAG), lines)
    write_run(runs, "b", config(ZERO), scored([0.5] * 50))
    out = tmp_path / "table"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    markdown = out.with_suffix(".md").read_text()
    assert "| TurnRAG (dense) INVALID (2 of 50 failed) |" in markdown
    assert "INVALID rows: 1 run(s) with more than 2% of their questions failed" in markdown
    assert "ZeroHistory INVALID" not in markdown
    table = read_table(out).set_index("method")
    assert table.loc["TurnRAG (dense)", "invalid"]
    assert table.loc["TurnRAG (dense)", "failures"] == 2
    assert table.loc["TurnRAG (dense)", "overall_f1_set_mean"] == 1.0
    assert main(["--runs", str(runs), "--out", str(out), "--max-failure-share", "0.05"]) == 0
    assert "INVALID" not in out.with_suffix(".md").read_text()


def test_scores_on_the_questions_whose_evidence_was_all_shown(tmp_path: Path) -> None:
    """Recall 1, 1, 0.5, 0 and F1 1, 0, 1, 0: with all evidence shown the reader scored 1 and
    0 (mean 0.5); the third question's F1 of 1 did not need all of it, so it is left out."""
    runs = tmp_path / "runs"
    lines = [
        record(i, "single_hop", f1, recall)
        for i, (f1, recall) in enumerate([(1.0, 1.0), (0.0, 1.0), (1.0, 0.5), (0.0, 0.0)])
    ]
    write_run(runs, "a", config(TURN_RAG), lines)
    out = tmp_path / "table"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    assert "| F1 / Judge, all evidence shown |" in out.with_suffix(".md").read_text()
    assert " | 0.500 / 1.000 | " in out.with_suffix(".md").read_text()
    table = read_table(out)
    assert table.loc[0, "all_evidence_f1_set_mean"] == 0.5
    assert table.loc[0, "all_evidence_f1_set_n"] == 2


# ---------------------------------------------------------------------------------------------
# Cluster bootstrap: conversations are the resampling unit


def in_conversations(records: list[dict], size: int) -> list[dict]:
    """The records dealt out to conversations of ``size`` questions each, in file order."""
    return [
        r | {"question_id": f"conv-{i // size}:q{i}", "conversation_id": f"conv-{i // size}"}
        for i, r in enumerate(records)
    ]


SIX_CONVERSATIONS = [0.0, 0.5, 1.0, 1.0, 0.2, 0.9, 0.4, 0.4, 0.1, 0.7, 1.0, 0.3]


def test_intervals_resample_conversations_or_questions_on_request(tmp_path: Path) -> None:
    records = in_conversations(scored(SIX_CONVERSATIONS), 2)
    temporal = record(12, "temporal", 0.5) | {"conversation_id": "conv-6"}  # its own one
    records.append(temporal | {"question_id": "conv-6:q12"})
    write_run(tmp_path, "a", config(TURN_RAG), records)
    conversations = [r["conversation_id"] for r in records]

    report = build_report(tmp_path)
    overall = report.rows[0].scores["overall"]["f1_set"]
    interval = bootstrap_ci(SIX_CONVERSATIONS + [0.5], clusters=conversations)
    assert overall is not None and (overall.low, overall.high) == (interval.low, interval.high)
    assert (overall.unit, overall.conversations, overall.n) == ("conversation", 7, 13)
    temporal = report.rows[0].scores["temporal"]["f1_set"]
    assert temporal is not None and (temporal.unit, temporal.conversations) == ("question", 1)
    statistics = next(line for line in report.header if line.startswith("Statistics"))
    assert "95% cluster bootstrap CIs resampling the 7 conversations (1000 resamples;" in statistics
    # the temporal cells (f1_locomo, f1_set, bleu1, judge_acc) come from one conversation
    assert "; 4 cell(s) whose questions come from fewer than 5 conversations resample" in statistics

    by_question = build_report(tmp_path, interval_unit="question")
    overall = by_question.rows[0].scores["overall"]["f1_set"]
    interval = bootstrap_ci(SIX_CONVERSATIONS + [0.5])
    assert overall is not None and (overall.low, overall.high) == (interval.low, interval.high)
    assert overall.unit == "question"
    statistics = next(line for line in by_question.header if line.startswith("Statistics"))
    assert "resampling questions, as asked (--interval-unit question;" in statistics
    assert "so these intervals understate uncertainty" in statistics


def test_p_value_resamples_the_conversations_of_the_common_questions(tmp_path: Path) -> None:
    best = [0.2, 0.4, 0.5, 0.1, 0.3, 0.6, 0.2, 0.0, 0.5, 0.5, 0.1, 0.4]
    write_run(tmp_path, "turn", config(TURN_RAG), in_conversations(scored(best), 2))
    write_run(tmp_path, "new", config(NEW_METHOD), in_conversations(scored(SIX_CONVERSATIONS), 2))
    out = tmp_path / "table1"
    assert main(["--runs", str(tmp_path), "--out", str(out)]) == 0
    table = read_table(out).set_index("method")
    # question ids sorted: conv-0:q0, conv-0:q1, conv-1:q2, ... conv-5:q11 (file order here)
    conversations = [f"conv-{i // 2}" for i in range(12)]
    expected = paired_bootstrap_pvalue(SIX_CONVERSATIONS, best, clusters=conversations)
    assert table.loc["ES-Mem", "p_value"] == round(expected, 4)
    assert expected != paired_bootstrap_pvalue(SIX_CONVERSATIONS, best)
    markdown = out.with_suffix(".md").read_text()
    assert "paired by question, resampling conversations" in markdown
    assert main(["--runs", str(tmp_path), "--out", str(out), "--interval-unit", "question"]) == 0
    unclustered = paired_bootstrap_pvalue(SIX_CONVERSATIONS, best)
    assert read_table(out).set_index("method").loc["ES-Mem", "p_value"] == round(unclustered, 4)


def test_metrics_json_and_the_report_resample_the_same_conversations(tmp_path: Path) -> None:
    """summary and report share one aggregation: the same cells, the same unit."""
    records = in_conversations(scored(SIX_CONVERSATIONS), 2)
    write_run(tmp_path, "a", config(TURN_RAG), records)
    row = build_report(tmp_path).rows[0]
    settings = SimpleNamespace(
        dataset="locomo", variant=None, subset=SimpleNamespace(name="smoke"), template="uniform",
        adversarial="exclude", seed=0,
    )  # fmt: skip
    summary = summarize_run(records, settings)  # type: ignore[arg-type]
    assert summary["interval"] == {
        "unit": "conversation",
        "requested": "conversation",
        "conversations": 6,
        "questions": 12,
    }
    found, stored = row.scores["overall"]["f1_set"], summary["scores"]["f1_set"]
    assert found is not None and stored == found.as_json()
    assert stored["unit"] == "conversation" and stored["conversations"] == 6
    recall = summary["evidence_recall"]
    assert row.evidence_recall is not None and recall["ci95"] == [
        row.evidence_recall.low,
        row.evidence_recall.high,
    ]
    assert interval_line(summary["interval"]).endswith(
        "the run's 6 conversations (cluster bootstrap)"
    )
    by_question = summarize_run(records, settings, unit="question")  # type: ignore[arg-type]
    assert by_question["interval"]["unit"] == "question"
    assert "resample questions (as asked)" in interval_line(by_question["interval"])
    assert by_question["scores"]["f1_set"]["ci95"] == [
        bootstrap_ci(SIX_CONVERSATIONS).low,
        bootstrap_ci(SIX_CONVERSATIONS).high,
    ]


def test_longmemeval_header_says_questions_are_their_own_haystacks(tmp_path: Path) -> None:
    write_run(tmp_path, "turn", lme_config(TURN_RAG, template=None), LME_RECORDS)
    report = build_report(tmp_path, dataset="longmemeval", subset="lme30")
    statistics = next(line for line in report.header if line.startswith("Statistics"))
    assert "resampling questions (1000 resamples; each question has its own haystack" in statistics


def test_the_header_names_the_code_versions_of_the_runs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name, method in (("a", TURN_RAG), ("b", ZERO), ("c", NEW_METHOD)):
        directory = write_run(runs, name, config(method), scored([1.0, 0.0]))
        if name != "c":  # c: logged before runs recorded their code version
            metrics = json.loads((directory / "metrics.json").read_text())
            metrics["code_versions"] = ["abc1234"] if name == "a" else ["abc1234", "def5678"]
            (directory / "metrics.json").write_text(json.dumps(metrics))
    header = build_report(runs).header
    assert (
        "Code version: abc1234 (2 runs); def5678 (1 run); not recorded for 1 run (logged before "
        "runs recorded it); package versions in each run's invocations.jsonl"
    ) in header
