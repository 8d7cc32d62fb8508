"""Table 1's columns beyond the means: one per judge protocol with its probe figures, INVALID
rows for runs with too many failed questions, and scores on the questions whose evidence was all
shown."""

from __future__ import annotations

import json
from pathlib import Path

from report_helpers import TURN_RAG, ZERO, config, read_table, record, scored, write_run

from benchmarks.tables.report import main


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
    assert (
        "Judges: each answer graded under mem0 (Judge: mem0's ACCURACY_PROMPT verbatim" in markdown
    )
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
