"""Table 1 as the offline main job (``--retrieval-subset``): one document from two selections.

The retrieval columns need no reader, so they are measured on a larger retrieval subset; the QA
grid on the smoke subset is a pipeline check shown after them. Each selection is its own
:class:`~benchmarks.tables.report.build.Report`; this module merges their notes and lays out the
tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.render import Document, Footnotes, Table
from benchmarks.runs.rows import Row
from benchmarks.tables.notes import note
from benchmarks.tables.report.build import Report, build_report
from benchmarks.tables.report.render import csv_record, write_document
from benchmarks.tables.report.tables import (
    ALL_EVIDENCE,
    BUDGET_USED,
    CONSTRUCTION_S,
    CONTEXT_TOKENS,
    DASH,
    EMBEDDED,
    FOOTPRINT,
    PARSED,
    RUN,
    WALL,
    Column,
    answer_columns,
    audited,
    fmt_cell,
    judge_repeats_table,
    judge_scores,
    layout,
    protocol_agreement_table,
    stage_cost,
)

#: The QA report's notes that the QA tables use (the retrieval columns' notes come from the
#: retrieval report): a note both reports word alike is given once.
QA_NOTES = (
    "statistics",
    "order",
    "labels",
    "f1",
    "bleu",
    "judge",
    "p",
    "judge_repeats",
    "protocol_agreement",
    "source",
    "unfinished",
    "invalid",
    "stale",
    "restamped",
)


@dataclass(frozen=True)
class MainJob:
    """The two reports, sharing one numbered list of notes (:func:`merged_notes`); the document's
    title is the QA report's."""

    retrieval: Report
    qa: Report


def merged_notes(retrieval: Report, qa: Report, missing: Sequence[str]) -> Footnotes:
    """The retrieval report's notes, then the QA report's (:data:`QA_NOTES`) that say something
    else: a QA note whose key the retrieval report uses too goes under ``qa_<key>``."""
    entries = list(retrieval.notes.entries)
    known = dict(entries)
    for key, text in qa.notes.entries:
        if key not in QA_NOTES or known.get(key) == text:
            continue
        qa_text = note("main_job.qa_prefix") + text
        entries.append((f"qa_{key}", qa_text) if key in known else (key, text))
    entries = [
        (key, note("main_job.costs")) if key == "costs" else (key, text) for key, text in entries
    ]
    entries.append(("asked", note("main_job.asked")))
    if missing:
        entries.append(("missing", note("main_job.missing", methods=", ".join(missing))))
    return Footnotes(entries)


def qa_marks(notes: Footnotes) -> Footnotes:
    """The merged notes, in the same order (the same numbers), as the QA tables look them up:
    ``qa_<key>`` answers for ``<key>``, the retrieval report's ``<key>`` moving aside."""
    keys = {key for key, _ in notes.entries}
    return Footnotes(
        [
            (f"retrieval_{key}" if f"qa_{key}" in keys else key.removeprefix("qa_"), text)
            for key, text in notes.entries
        ]
    )


def build_main_job(
    runs_dir: Path, *, subset: str, retrieval_subset: str, where: dict[str, Any], **options: Any
) -> MainJob:
    """Both reports from ``runs_dir``: the QA grid on ``subset`` and the retrieval-only runs on
    ``retrieval_subset`` (both under ``where``), the latter narrowed to the QA grid's methods."""
    qa = build_report(runs_dir, subset=subset, where=where, **options)
    retrieval = build_report(
        runs_dir,
        subset=retrieval_subset,
        where={**where, "answer.template": None},
        **{key: value for key, value in options.items() if key != "title"},
    )
    methods = {row.key.method for row in qa.answered}
    kept = [row for row in retrieval.rows if row.key.method in methods]
    missing = sorted(methods - {row.key.method for row in kept})
    notes = merged_notes(retrieval, qa, missing)
    return MainJob(
        dataclasses.replace(retrieval, rows=kept, notes=notes),
        dataclasses.replace(qa, notes=qa_marks(notes)),
    )


def asked_cell(row: Row) -> str:
    """``asked / all``: the LLM requests the run sent to the model, of every request it made (the
    rest came from recorded replies or the cache)."""
    total = row.run.metrics.get("accounting", {}).get("total")
    if not total:
        return DASH
    return f"{total['calls'] - total['cache_hits']} / {total['calls']}"


def retrieval_overall(job: MainJob) -> Table:
    """What the reader is shown on the retrieval subset, under the published and audited keys."""
    report = job.retrieval
    columns = [
        Column("Ev. recall pub", lambda row: fmt_cell(row.evidence_recall), "evidence"),
        audited("evidence_recall", "audited", "aud", "audit"),
        audited("evidence_recall", "delta", "Δ"),
        Column("Ans. cov. pub", lambda row: fmt_cell(row.answer_coverage["overall"]), "coverage"),
        audited("answer_coverage", "audited", "aud"),
        audited("answer_coverage", "delta", "Δ"),
        ALL_EVIDENCE,
        CONTEXT_TOKENS,
        BUDGET_USED,
    ]
    questions = max((len(row.run.records) for row in report.rows), default=0)
    marks = {"audit": report.notes.mark("audit"), "ceiling": report.notes.mark("ceiling")}
    caption = [note("main_job.retrieval_caption", **marks)]
    title = f"Overall: retrieval ({questions} questions, no LLM)"
    return layout(report, title, report.rows, columns, caption=caption)


def qa_overall(job: MainJob) -> Table:
    """The QA pipeline check: F1, BLEU-1, the judge columns whose judge discriminates on its
    probes (a column every row would show as a dash is left out), and the p-value."""
    report = job.qa
    rows = report.answered
    judges = [
        name for name in judge_scores(report) if any(name not in r.hidden_judges for r in rows)
    ]
    questions = max((len(row.run.records) for row in rows), default=0)
    reader = ", ".join(sorted({row.key.backbone for row in rows}))
    title = f"QA pipeline check ({questions} questions, reader {reader})"
    caption = [note("main_job.qa_caption")]
    return layout(report, title, rows, answer_columns(report, judges), caption=caption)


def qa_costs(job: MainJob) -> Table:
    """The QA grid's LLM calls and tokens per stage, the requests asked of the model, the run."""
    columns = [
        stage_cost("answering", "Answer calls").marked("costs"),
        stage_cost("judging", "Judge calls"),
        stage_cost("answering", "Answer tokens", tokens=True),
        stage_cost("judging", "Judge tokens", tokens=True),
        Column("Asked", asked_cell, "asked"),
        RUN,
    ]
    return layout(job.qa, "Costs: QA pipeline check", job.qa.answered, columns)


def retrieval_costs(job: MainJob) -> Table:
    """What building and searching each retrieval row's memories took (the main job's time is
    mostly this): construction and wall seconds, texts embedded and parsed, the run."""
    columns = [CONSTRUCTION_S.marked("costs"), WALL, EMBEDDED, PARSED, FOOTPRINT, RUN]
    return layout(job.retrieval, "Costs: retrieval columns", job.retrieval.rows, columns)


def document(job: MainJob) -> Document:
    """Each selection's setting, named; retrieval first, then the QA pipeline check, then the
    costs of each; the merged notes."""
    settings = [
        note("main_job.setting", part=part, setting=report.setting.removeprefix("Setting: "))
        for part, report in (("retrieval columns", job.retrieval), ("QA pipeline check", job.qa))
    ]
    judges = [judge_repeats_table(job.qa), protocol_agreement_table(job.qa)]
    tables = [
        retrieval_overall(job),
        qa_overall(job),
        *(table for table in judges if table is not None),
        retrieval_costs(job),
        qa_costs(job),
    ]
    return Document(job.qa.title, settings, tables, job.retrieval.notes)


def write_main_job(job: MainJob, out: Path) -> list[Path]:
    """``out`` + ``.md``, ``.csv`` (both selections' rows, ``subset`` telling them apart), ``.tex``,
    ``.png``; returns the paths written."""
    records = [
        {"subset": report.rows[0].run.config["subset"]["name"], **csv_record(row, report)}
        for report in (job.retrieval, job.qa)
        for row in report.rows
        if report.rows
    ]
    return write_document(document(job), records, job.retrieval, out)
