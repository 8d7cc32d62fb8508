"""Table 1 (LoCoMo) from hand-written run directories: the files written, costs from the
invocation ledger, unfinished runs, row names, means and intervals, the adversarial policy,
p-values against the best baseline, refused mixes of runs, what the intervals resample (a cluster
bootstrap over conversations), the header's code versions, rows without context and context
order."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from report_helpers import (
    NEW_METHOD,
    SIX_CONVERSATIONS,
    TURN_RAG,
    ZERO,
    config,
    in_conversations,
    markdown_section,
    read_table,
    record,
    scored,
    write_run,
)

from benchmarks import registry
from benchmarks.metrics.aggregate import interval_line, summarize_run
from benchmarks.metrics.stats import bootstrap_ci, paired_bootstrap_pvalue
from benchmarks.runs.folders import ReportError
from benchmarks.runs.naming import method_name, row_key
from benchmarks.tables.report.build import build_report
from benchmarks.tables.report.cli import main
from benchmarks.tables.report.header import short_label
from benchmarks.tables.report.render import document


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
    setting = markdown.splitlines()[2]  # the one line under the title
    assert setting.startswith("Setting: locomo (locomo/locomo10.json) · subset smoke (offline")
    assert "offline smoke subset: 1 conversation, 40 questions — not the paper setting" in setting
    assert "judge tiny-llm (the reader), mem0 protocol" in setting
    assert "context budget 2048 tokens, template uniform, at most 32 answer tokens" in setting
    assert "reader tiny-llm" in setting and "embedder all-MiniLM-L6-v2" in setting
    assert "\n## Notes\n\n1. Statistics: cells are mean [95% CI]" in markdown
    assert "A-Mem/mem0 set F1" in markdown
    assert (  # one conversation: the intervals cannot resample conversations, and say so
        "95% percentile bootstrap CIs resampling questions (1000 resamples) because the subset "
        "has 1 conversation, fewer than the 5 a cluster bootstrap needs: questions of one "
        "conversation share its memory, so these intervals understate uncertainty"
    ) in markdown
    assert "## Retrieval only (answer=none)" in markdown and "## Retrieval costs" in markdown
    tex = (out.parent / "table1.tex").read_text()
    assert r"\toprule" in tex and "% Setting: locomo" in tex and r"F1\textsuperscript{" in tex
    assert "% 1. Statistics: cells are mean [95% CI]" in tex
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
        header, row = markdown_section(markdown, "Retrieval costs")
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
    header, row = markdown_section(out.with_suffix(".md").read_text(), "Retrieval costs")
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
    header, row = markdown_section(out.with_suffix(".md").read_text(), "Retrieval costs")
    cells = dict(zip(header, row, strict=True))
    assert (cells["Texts embedded / asked"], cells["Texts parsed / asked"]) == ("10 / 40", "—")
    assert (cells["Wall (s)"], cells["Peak RSS (MB)"]) == ("9", "700")
    # Every record's retrieval took 10 ms: the percentiles say so, and the csv has p99 and max.
    assert cells["Retrieve p50 / p95 (s)"] == "0.010 / 0.010"
    table = read_table(out)
    assert (table.loc[0, "retrieve_latency_s_p99"], table.loc[0, "retrieve_latency_s_max"]) == (
        0.01,
        0.01,
    )


def test_the_setting_line_names_the_digest_of_the_data_each_run_read(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    rows = (("a", TURN_RAG, "3c1f00aa0001"), ("b", NEW_METHOD, "3c1f00aa0001"), ("c", ZERO, None))
    for name, method, digest in rows:
        directory = write_run(runs, name, config(method, template=None), scored([None] * 2))  # type: ignore[list-item]
        line = {"started": "t", "questions": 2, "wall_s": 1.0, "peak_rss_mb": 1}
        line |= {"construction_s": 0.5} | ({"data": {"locomo/x.json": digest}} if digest else {})
        (directory / "invocations.jsonl").write_text(json.dumps(line) + "\n")
    setting = build_report(runs).setting
    assert "data sha256 x.json 3c1f00aa0001 (2 runs); not recorded by 1 run" in setting


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
    assert report.notes.text("unfinished") == (
        "Not in the table, unfinished (a rerun resumes them): "
        "ES-Mem, llm (3 questions logged, run partial)"
    )
    # the csv's last header line
    assert document(report).header[-1].endswith(report.notes.text("unfinished"))

    # A backlog's table (--partial): the unfinished run is a row, over its questions done.
    backlog = build_report(runs, partial=True)
    rows = {row.run.directory.name: row for row in backlog.rows}
    assert sorted(rows) == ["done", "partial"] and rows["partial"].run.partial
    assert len(rows["partial"].run.records) == 3  # the question asked again counted once
    assert backlog.notes.text("unfinished") is None
    assert "PARTIAL: runs not finished yet" in backlog.notes.text("partial")
    assert "ES-Mem · retrieval only · llm (3)" in backlog.notes.text("partial")
    markdown = document(backlog).to_markdown()
    assert "ES-Mem PARTIAL (3 done)" in markdown


def test_row_names_show_the_retriever_and_the_compressor() -> None:
    secom = {"_target_": "memsys.methods.secom.SeCom", "retriever": "dense"}
    assert method_name({**secom, "compression": "none"}) == "SeCom (dense, no compression)"
    stand_in = {**secom, "compression": "self_info", "compression_rate": 0.75}
    assert method_name(stand_in) == "SeCom (dense, self-info stand-in, not LLMLingua-2, rate 0.75)"
    paper = {**stand_in, "compression": "llmlingua2", "compression_rate": 0.9}
    assert method_name(paper) == "SeCom (dense, LLMLingua-2, rate 0.9)"
    exchange = {**TURN_RAG, "unit": "exchange"}
    assert method_name(exchange) == "TurnRAG (dense, per exchange)"
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
    assert f"| 0.625 [{overall.low:.2f},{overall.high:.2f}] |" in document(report).to_markdown()


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
    header, *rows = markdown_section(markdown, "Overall")
    p_values = {row[0]: row[header.index("p")] for row in rows}
    # a plain number, its baseline in a note; 1/1001, the least a 1000-resample test gives
    assert expected < 0.001 and p_values["ES-Mem"] == "<0.001"
    assert p_values["TurnRAG (dense)"] == p_values["ZeroHistory"] == "—"
    assert (
        "p: two-sided paired bootstrap on f1_set vs TurnRAG (dense), the best baseline" in markdown
    )


MEM0 = {"_target_": "memsys.methods.libraries.mem0.Mem0", "extraction": "llm", "top_k": 30}


def test_a_baseline_in_its_own_module_is_a_baseline(tmp_path: Path) -> None:
    """The role is the config's registry declaration, not the module of its class: Mem0
    (memsys.methods.libraries, ``role: baseline``) is the best baseline a method is tested
    against, and gets no p-value of its own."""
    best = [0.5, 0.6, 0.7, 0.4, 0.5, 0.6]
    method = [0.9, 0.8, 1.0, 0.7, 0.9, 0.8]
    write_run(tmp_path, "turn", config(TURN_RAG), scored([0.1] * 6))
    write_run(tmp_path, "mem0", config(MEM0), scored(best))
    write_run(tmp_path, "new", config(NEW_METHOD), scored(method))
    out = tmp_path / "table1"
    assert main(["--runs", str(tmp_path), "--out", str(out)]) == 0
    table = read_table(out).set_index("method")
    assert table.loc["Mem0", "baseline"] and pd.isna(table.loc["Mem0", "p_value"])
    assert table.loc["ES-Mem", "p_value_baseline"] == "Mem0"
    assert table.loc["ES-Mem", "p_value"] == round(paired_bootstrap_pvalue(method, best), 4)
    assert list(table.index) == ["Mem0", "TurnRAG (dense)", "ES-Mem"]  # baselines first


def test_a_baseline_of_a_new_module_is_read_from_its_registry_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "method"
    folder.mkdir()
    (folder / "last_sessions.yaml").write_text(
        "registry:\n  about: The last sessions.\n  role: baseline\n  paper: none\n"
        "  name: LastSessions\n  grids: []\n"
        "_target_: memsys.methods.last_sessions.LastSessions\nsessions: 2\n"
    )
    monkeypatch.setattr(registry, "METHOD_DIR", folder)
    last = {"_target_": "memsys.methods.last_sessions.LastSessions", "sessions": 3}
    assert row_key(config(last)).baseline is True
    assert row_key(config(NEW_METHOD)).baseline is False  # a class no config names: not a baseline


def test_only_baselines_still_have_the_p_value_column(tmp_path: Path) -> None:
    write_run(tmp_path / "runs", "a", config(ZERO), scored([0.0, 1.0]))
    out = tmp_path / "table1"
    assert main(["--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert "p_value" in read_table(out).columns
    assert markdown_section((tmp_path / "table1.md").read_text(), "Overall")[0][-1] == "p"


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
# Cluster bootstrap: conversations are the resampling unit


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
    statistics = report.notes.text("statistics")
    assert "95% cluster bootstrap CIs resampling the 7 conversations (1000 resamples;" in statistics
    # the temporal cells (f1_locomo, f1_set, bleu1, judge_acc) come from one conversation
    assert "; 4 cell(s) whose questions come from fewer than 5 conversations resample" in statistics

    by_question = build_report(tmp_path, interval_unit="question")
    overall = by_question.rows[0].scores["overall"]["f1_set"]
    interval = bootstrap_ci(SIX_CONVERSATIONS + [0.5])
    assert overall is not None and (overall.low, overall.high) == (interval.low, interval.high)
    assert overall.unit == "question"
    statistics = by_question.notes.text("statistics")
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


def test_the_header_names_the_code_versions_of_the_runs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name, method in (("a", TURN_RAG), ("b", ZERO), ("c", NEW_METHOD)):
        directory = write_run(runs, name, config(method), scored([1.0, 0.0]))
        if name != "c":  # c: logged before runs recorded their code version
            metrics = json.loads((directory / "metrics.json").read_text())
            metrics["code_versions"] = ["abc1234"] if name == "a" else ["abc1234", "def5678"]
            (directory / "metrics.json").write_text(json.dumps(metrics))
    report = build_report(runs)
    assert report.setting.endswith(
        " · code abc1234 (2 runs), def5678 (1 run), not recorded for 1 run (logged before runs "
        "recorded it)"
    )
    assert "package versions in each run's invocations.jsonl" in report.notes.text("source")
    for name in ("b", "c"):
        (runs / name / "metrics.json").write_text(json.dumps({"code_versions": ["abc1234"]}))
    assert build_report(runs).setting.endswith(" · code abc1234")  # one version: no count


def test_the_header_names_the_methods_whose_reader_never_got_context(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    nothing = [line | {"context_tokens": 0} for line in scored([0.0, 0.0])]
    write_run(runs, "zero", config(ZERO), nothing)  # a baseline: no context by design
    write_run(runs, "esmem", config(NEW_METHOD), nothing)
    write_run(runs, "mem0", config(MEM0), nothing)  # a baseline whose LLM built nothing
    write_run(runs, "turns", config(TURN_RAG), scored([1.0, 0.0]))
    assert build_report(runs).notes.text("no_context") == (
        "NO CONTEXT: Mem0 · tiny-llm · llm (tiny-llm); ES-Mem · tiny-llm · llm (tiny-llm) handed "
        "over no context for any question "
        "(an empty memory, or nothing within the budget; a memory's construction stats in the "
        "cache say why, e.g. unparseable LLM replies): the row scores having no history, not "
        "the method"
    )
    for name in ("esmem", "mem0"):
        (runs / name / "predictions.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in scored([0.0, 0.0]))
        )
    assert build_report(runs).notes.text("no_context") is None


CAST = {"_target_": "memsys.methods.cast.CAST", "extraction": "lite"}


def context_order_of(runs: Path) -> str:
    """The context-order note of the report on ``runs``."""
    text = build_report(runs).notes.text("order")
    assert text is not None
    return text


@pytest.mark.parametrize(
    ("cast_order", "turn_order", "expected"),
    [
        (  # each as its class declares: CAST rank, TurnRAG time (no key: time, as runs record it)
            "rank",
            None,
            "each method's own: rank (best first, in the method's own ranking) for CAST; time "
            "(oldest first, under their session dates) for the other rows",
        ),
        (  # Table 1 as committed: CAST shown in time order, which sorts its promotion away
            None,
            None,
            "each method's own: time (oldest first, under their session dates) for the other "
            "rows; CAST: time by answer.order, not its own rank: its ranking does not reach the "
            "reader",
        ),
        (
            "rank",
            "rank",
            "each method's own: rank (best first, in the method's own ranking) for the other "
            "rows; TurnRAG (dense): rank by answer.order, not its own time",
        ),
    ],
)
def test_the_header_says_each_rows_context_order_and_names_overrides(
    tmp_path: Path, cast_order: str | None, turn_order: str | None, expected: str
) -> None:
    def answer(order: str | None) -> dict:
        written = {"template": "uniform", "context_budget": 2048, "max_tokens": 32}
        return written | ({"order": order} if order else {})

    write_run(tmp_path, "cast", config(CAST, answer=answer(cast_order)), scored([1.0]))
    write_run(tmp_path, "turn", config(TURN_RAG, answer=answer(turn_order)), scored([0.5]))
    line = context_order_of(tmp_path)
    assert line == f"Context order (how the kept items reach the reader): {expected}"


def test_a_table_of_time_ordered_methods_says_every_row(tmp_path: Path) -> None:
    write_run(tmp_path, "turn", config(TURN_RAG, template=None), scored([None]))  # type: ignore[list-item]
    markdown = document(build_report(tmp_path)).to_markdown()
    assert (
        "Context order (how the kept items reach the reader): each method's own: time (oldest "
        "first, under their session dates) for every row"
    ) in markdown
    assert "changes no number of a retrieval-only row except through that budget" in markdown


def test_backbone_and_extraction_get_columns_only_where_rows_differ(tmp_path: Path) -> None:
    write_run(tmp_path, "turn", config(TURN_RAG), scored([1.0]))
    write_run(tmp_path, "esmem", config(NEW_METHOD), scored([0.5]))
    report = build_report(tmp_path)
    assert markdown_section(document(report).to_markdown(), "Overall")[0][:2] == [
        "Method",
        "Ev. recall",
    ]
    assert " · reader tiny-llm · extraction llm (tiny-llm) · judge tiny-llm" in report.setting
    other = {"name": "other-llm", "provider": {"_target_": "fake"}}
    write_run(tmp_path, "other", config(NEW_METHOD, backbone=other), scored([0.2]))
    report = build_report(tmp_path)
    header, *rows = markdown_section(document(report).to_markdown(), "Overall")
    assert header[:4] == ["Method", "Backbone", "Extraction", "Ev. recall"]
    assert [row[:3] for row in rows] == [  # grouped by backbone, baselines first
        ["ES-Mem", "other-llm", "llm (other-llm)"],
        ["TurnRAG (dense)", "tiny-llm", "—"],
        ["ES-Mem", "tiny-llm", "llm (tiny-llm)"],
    ]
    assert " · readers: Backbone column · " in report.setting and "extraction" not in report.setting


def test_long_method_names_are_shortened_with_a_note_giving_them_whole(tmp_path: Path) -> None:
    secom = {"_target_": "memsys.methods.secom.SeCom", "retriever": "dense", "extraction": "lite"}
    secom |= {"compression": "self_info", "compression_rate": 0.75}
    write_run(tmp_path, "secom", config(secom), scored([1.0]))
    report = build_report(tmp_path)
    whole = "SeCom (dense, self-info stand-in, not LLMLingua-2, rate 0.75)"
    assert report.notes.text("labels") == (
        f"Method names shortened in the tables (the csv has them whole): SeCom (dense, …) = {whole}"
    )
    markdown = document(report).to_markdown()
    rows = markdown_section(markdown, "Overall")[1:]
    assert (
        rows[0][0] == "SeCom (dense, …)"
        and f"| SeCom (dense, …){report.notes.mark('labels')} |" in markdown
    )
    assert whole not in markdown.split("## Notes")[0]
    oracle = "Oracle (gold evidence) (per turns)"  # one detail: shortening would not shorten it
    assert short_label(oracle) == oracle and short_label("TurnRAG (dense)") == "TurnRAG (dense)"


def test_a_retrieval_only_report_is_titled_as_such(tmp_path: Path) -> None:
    write_run(tmp_path, "turn", config(TURN_RAG, template=None), scored([None]))  # type: ignore[list-item]
    report = build_report(tmp_path)
    assert report.title == "Retrieval on LoCoMo"
    assert " · retrieval only (no reader), context budget 2048 tokens · " in report.setting
    write_run(tmp_path, "answered", config(ZERO), scored([0.0]))
    assert build_report(tmp_path).title == "Table 1"
