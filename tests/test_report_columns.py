"""Table 1's columns beyond the means: one per judge protocol with its probe figures (a dash
where the judge does not discriminate), INVALID rows for runs with too many failed questions,
scores on the questions whose evidence was all shown, and answer coverage."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from report_helpers import (
    TURN_RAG,
    ZERO,
    config,
    markdown_section,
    read_table,
    record,
    scored,
    write_run,
)

from benchmarks.tables.report.cli import main


def test_every_judge_protocol_gets_a_column_and_its_probe_figures(tmp_path: Path) -> None:
    """A lenient mem0 judge (every answer accepted) beside a strict one (half), both graded on
    the probes of two runs (pooled once per probe id): 2/2 gold and 3/3 wrong answers accepted by
    mem0, 1/2 and 0/3 by strict; the judge is the reader, and the notes say so. The mem0 column
    shows dashes (its judge does not discriminate), the strict one its verdicts."""
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
    header, *rows = markdown_section(markdown, "Overall")
    assert header[-3:] == ["J", "J strict", "p"]
    assert [row[-3:-1] for row in rows] == [["—", "0.500 [0.00,1.00]"]] * 2
    assert "## J per category" not in markdown  # mem0's J only there: every cell a dash
    assert (
        "J: share of answers the judge accepted. Judges: each answer graded under mem0 (J: "
        "mem0's ACCURACY_PROMPT verbatim"
    ) in markdown
    assert (
        "— in a J column: its judge does not discriminate on the probes (it accepts most "
        "known-wrong answers or rejects most known-right ones)"
    ) in markdown
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
    assert table.loc["ZeroHistory", "overall_judge_acc_mean"] == 1.0  # the csv keeps them
    assert table.loc["ZeroHistory", "judge_scores_not_discriminating"] == "judge_acc"
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
    0 (mean 0.5); the third question's F1 of 1 did not need all of it, so it is left out. The
    per-category tables show it as their last column."""
    runs = tmp_path / "runs"
    lines = [
        record(i, "single_hop", f1, recall)
        for i, (f1, recall) in enumerate([(1.0, 1.0), (0.0, 1.0), (1.0, 0.5), (0.0, 0.0)])
    ]
    write_run(runs, "a", config(TURN_RAG), lines)
    out = tmp_path / "table"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    markdown = out.with_suffix(".md").read_text()
    for title, shown in (("F1 per category", "0.500"), ("J per category", "1.000")):
        header, row = markdown_section(markdown, title)
        assert header[-1] == "All ev. shown" and row[-1].startswith(f"{shown} ["), title
    table = read_table(out)
    assert table.loc[0, "all_evidence_f1_set_mean"] == 0.5
    assert table.loc[0, "all_evidence_f1_set_n"] == 2


def test_answer_coverage_overall_and_per_category_and_a_dash_for_older_runs(
    tmp_path: Path,
) -> None:
    """Coverage 1, 0, 1 on single-hop and 1 on temporal questions, none on the adversarial one
    (no answer to cover): overall 0.75 over the four, per category 0.667 and 1. A run logged
    before records kept the context has none: a dash, never 0."""
    runs = tmp_path / "runs"
    covered = [*scored([1.0, 0.0, 1.0]), record(3, "temporal", 1.0), record(4, "adversarial", 0.0)]
    for line, coverage in zip(covered, [1.0, 0.0, 1.0, 1.0, None], strict=True):
        line["answer_coverage"] = coverage
    write_run(runs, "a", config(TURN_RAG), covered)
    write_run(runs, "b", config(ZERO), scored([0.0, 0.0]))  # no answer_coverage key at all
    out = tmp_path / "table"
    assert main(["--runs", str(runs), "--out", str(out)]) == 0
    markdown = out.with_suffix(".md").read_text()
    header, *rows = markdown_section(markdown, "Overall")
    assert header[:5] == ["Method", "Ev. recall", "All ev.", "Ans. cov.", "Ctx tok"]
    coverage = {row[0]: row[3] for row in rows}
    assert coverage["ZeroHistory"] == "—" and coverage["TurnRAG (dense)"].startswith("0.750 [")
    header, *rows = markdown_section(markdown, "Ans. cov. per category")
    cells = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert cells["TurnRAG (dense)"]["Single-hop (n=3)"].startswith("0.667 [")
    assert cells["TurnRAG (dense)"]["Temporal (n=1)"].startswith("1.000 [")
    assert cells["TurnRAG (dense)"]["Adversarial (n=1)"] == cells["ZeroHistory"]["Temporal (n=1)"]
    assert cells["ZeroHistory"]["Temporal (n=1)"] == "—"
    table = read_table(out).set_index("method")
    assert (
        table.loc["TurnRAG (dense)", "answer_coverage_mean"],
        table.loc["TurnRAG (dense)", "answer_coverage_n"],
    ) == (0.75, 4)
    assert table.loc["TurnRAG (dense)", "single_hop_answer_coverage_n"] == 3
    assert pd.isna(table.loc["ZeroHistory", "answer_coverage_mean"])
