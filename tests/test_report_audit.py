"""LoCoMo's audited key beside the published one in Table 1: the side-by-side table from records
of questions the audit disputes (a wrong citation, a wrong date, an ambiguous item, an undisputed
one), its csv columns, the published key's ceiling on the table's questions, and a dash with a
note where the audit cannot be read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from report_helpers import TURN_RAG, config, markdown_section, read_table, record, write_run

from benchmarks.metrics.qa import f1_locomo
from benchmarks.tables.report.build import build_report
from benchmarks.tables.report.cli import main

SATURDAY = "The Saturday before 25 May 2023"


def audited_record(
    index: int, question: int, answer: str, evidence: list[str], shown: list[str], context: str
) -> dict:
    """A temporal or multi-hop question of conv-26 (the audit's conversation 0), answered with
    its published answer except q5, answered as the auditors read it."""
    category = "multi_hop" if question == 43 else "temporal"
    prediction = SATURDAY if question == 5 else answer
    line = record(index, category, 1.0) | {
        "question_id": f"conv-26:q{question}",
        "conversation_id": "conv-26",
        "answer": answer,
        "evidence": evidence,
        "retrieved_turn_ids": shown,
        "evidence_recall": len(set(evidence) & set(shown)) / len(evidence),
        "context": context,
        "answer_coverage": 1.0 if answer.lower() in context.lower() else 0.0,
        "prediction": prediction,
    }
    line["scores"]["f1_locomo"] = f1_locomo(prediction, answer, category)
    return line


RECORDS = [
    # undisputed
    audited_record(0, 0, "7 May 2023", ["D1:3"], ["D1:3"], "Caroline: on 7 May 2023 I went."),
    # WRONG_CITATION: the evidence moves to D1:14, the answer stands
    audited_record(1, 1, "2022", ["D1:12"], ["D1:14"], "Melanie: I painted it in 2022."),
    # TEMPORAL_ERROR: audited answer "The Saturday before 25 May 2023 (approximately May 20, 2023)"
    audited_record(
        2, 5, "The sunday before 25 May 2023", ["D2:1"], ["D2:1"], f"Melanie: {SATURDAY}."
    ),
    # AMBIGUOUS: audited evidence D17:13, D11:12, D14:5, D13:11, D14:17; no audited answer
    audited_record(
        3, 43, "abstract art", ["D11:12", "D11:8", "D9:14"], ["D11:12"], "I love abstract art."
    ),
]


@pytest.fixture
def audited_report(data_dir: Path, tmp_path: Path) -> tuple[str, object]:
    """Table 1 of one run over :data:`RECORDS`: its markdown, and its csv as a table."""
    write_run(tmp_path / "runs", "turn", config(TURN_RAG), RECORDS)
    out = tmp_path / "table1"
    assert main(["--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    return out.with_suffix(".md").read_text(), read_table(out)


def test_both_keys_side_by_side(audited_report: tuple[str, object]) -> None:
    markdown, _ = audited_report
    header, row = markdown_section(markdown, "Published vs audited key")
    cells = dict(zip(header[1:4], row[1:4], strict=True))
    # evidence recall: 1, 0, 1, 1/3 published; 1, 1, 1, 1/5 audited
    assert cells == {
        "Ev. recall pub": f"{(1 + 0 + 1 + 1 / 3) / 4:.3f}",
        "Ev. recall aud": f"{(1 + 1 + 1 + 1 / 5) / 4:.3f}",
        "Δ": f"{(1 + 1 + 1 + 1 / 5) / 4 - (1 + 0 + 1 + 1 / 3) / 4:+.3f}",
    }
    # answer coverage over q0, q1, q5 (q43 has no audited answer): 1, 1, 0 under both keys
    # (q5's audited answer, with its parenthesis, is not in the context either)
    assert row[4:7] == ["0.667", "0.667", "+0.000"]
    # LoCoMo's F1 over the same three: q5's prediction is the auditors' reading
    published = (1 + 1 + f1_locomo(SATURDAY, "The sunday before 25 May 2023", "temporal")) / 3
    audited = (
        1 + 1 + f1_locomo(SATURDAY, f"{SATURDAY} (approximately May 20, 2023)", "temporal")
    ) / 3
    assert row[7:10] == [f"{published:.3f}", f"{audited:.3f}", f"{audited - published:+.3f}"]
    assert audited != published
    assert "1 of this table's questions); the judge is not asked again" in markdown
    assert "pub: LoCoMo's published key (every other table's); aud: the audit's key" in markdown


def test_the_csv_keeps_both_keys_and_their_question_counts(
    audited_report: tuple[str, object],
) -> None:
    _, table = audited_report
    line = table.iloc[0]  # type: ignore[attr-defined]
    assert line["evidence_recall_audited"] == round((3 + 1 / 5) / 4, 4)
    assert line["evidence_recall_published_same_questions"] == round((2 + 1 / 3) / 4, 4)
    assert line["evidence_recall_audited_questions"] == 4
    assert (line["answer_coverage_audited_questions"], line["f1_locomo_audited_questions"]) == (
        3,
        3,
    )
    assert line["answer_coverage_mean"] == 0.75  # the published key, every question with one


def test_the_published_keys_ceiling_on_the_tables_questions(
    audited_report: tuple[str, object],
) -> None:
    """q5 (a wrong date) and q43 (ambiguous) dispute the published answer; q1's wrong citation
    does not."""
    markdown, _ = audited_report
    assert (
        "against the published key: multi-hop 0.00% (0/1), temporal 66.67% (2/3); categories "
        "1-4 50.00% (2/4). The auditors report 93.57% on categories 1-4 over the whole dataset"
    ) in markdown


def test_an_unreadable_audit_is_a_dash_and_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMBENCH_DATA", str(tmp_path / "no_data"))
    write_run(tmp_path / "runs", "turn", config(TURN_RAG), RECORDS)
    report = build_report(tmp_path / "runs")
    assert report.audit is not None and report.audit.errata is None
    note = report.notes.text("audit")
    assert note is not None and note.startswith("Audited key: not shown (—), the audit could not")
    assert report.notes.text("ceiling") is None
    out = tmp_path / "table1"
    assert main(["--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    _, row = markdown_section(out.with_suffix(".md").read_text(), "Published vs audited key")
    assert row[1:4] == [f"{(2 + 1 / 3) / 4:.3f}", "—", "—"]  # the published key, as Overall
    assert pd.isna(read_table(out).loc[0, "evidence_recall_audited"])


def test_no_audit_table_for_longmemeval_nor_without_the_dataset_trait(tmp_path: Path) -> None:
    write_run(tmp_path, "turn", config(TURN_RAG), [record(0, "single_hop", 1.0)])
    assert build_report(tmp_path).audit is not None  # LoCoMo
    lme = config(TURN_RAG, dataset={"name": "longmemeval", "variant": "s"})
    lme["subset"] = {"name": "lme30", "conversations": None, "max_questions": 30}
    question = record(0, "multi_session", 1.0) | {"is_abstention": False}
    write_run(tmp_path / "lme", "turn", lme, [question])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("benchmarks.runs.selection.longmemeval_corpora", lambda *_: {})
        report = build_report(tmp_path / "lme", dataset="longmemeval_s", subset="lme30")
    assert report.audit is None and report.notes.text("audit") is None
