"""Table 1 as the offline main job (``--retrieval-subset``): one document from two selections.

The retrieval columns (evidence recall and answer coverage under LoCoMo's published and audited
keys, context tokens) need no reader, so they are measured on a sample large enough to rank
methods (the retrieval subset, ``answer=none`` runs at the QA grid's context budget); the QA grid
on the smoke subset with the small embedded reader is a pipeline check, shown after them. Each
selection is built as its own :class:`~benchmarks.tables.report.build.Report` (its conditions
checked, its numbers recomputed); this module keeps the retrieval rows of the QA grid's methods,
merges the two reports' notes into one numbered list and lays out the tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.tables.render import Footnotes, Table
from benchmarks.tables.report.build import Report, build_report
from benchmarks.tables.report.plot import write_plot
from benchmarks.tables.report.render import csv_record
from benchmarks.tables.report.rows import Row
from benchmarks.tables.report.tables import (
    DASH,
    answer_cells,
    answer_header,
    fmt_cell,
    fmt_number,
    fmt_tokens,
    fmt_wall,
    fmt_work,
    identity_cells,
    identity_columns,
    judge_scores,
    run_cell,
    section,
    starred,
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
    "costs",
    "source",
    "unfinished",
    "invalid",
    "stale",
)
QA_PREFIX = "QA pipeline check: "
ASKED_NOTE = (
    "Asked: LLM requests (answers, verdicts, the judge's probes) the run sent to the model, of "
    "all it made; the rest were served from Table 1's recorded replies "
    "(results/table1_replies.jsonl.gz, llm_cache_mode=recorded: make reproduce-table1's default, "
    "a request reused only where it matches a recorded one byte for byte) or the response cache"
)


@dataclass(frozen=True)
class MainJob:
    """The two reports, sharing one numbered list of notes (``notes``)."""

    title: str
    retrieval: Report
    qa: Report
    notes: Footnotes


def merged_notes(retrieval: Report, qa: Report, missing: Sequence[str]) -> Footnotes:
    """The retrieval report's notes, then the QA report's (:data:`QA_NOTES`) that say something
    else: a QA note whose key the retrieval report uses too goes under ``qa_<key>``."""
    entries = list(retrieval.notes.entries)
    known = dict(entries)
    for key, text in qa.notes.entries:
        if key not in QA_NOTES or known.get(key) == text:
            continue
        entries.append((f"qa_{key}", QA_PREFIX + text) if key in known else (key, text))
    entries.append(("asked", ASKED_NOTE))
    if missing:
        entries.append(
            ("missing", "No retrieval run on the retrieval subset: " + ", ".join(missing))
        )
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
    title = options.get("title") or qa.title
    return MainJob(
        title,
        dataclasses.replace(retrieval, rows=kept, notes=notes),
        dataclasses.replace(qa, notes=qa_marks(notes)),
        notes,
    )


def retrieval_overall(job: MainJob) -> Table:
    """What the reader is shown, on the retrieval subset: evidence recall and answer coverage
    under the published key (mean and interval) and the audited one, all-evidence share and
    context tokens."""
    report = job.retrieval
    rows, mark = report.rows, report.notes.mark
    identity = identity_columns(report, rows)
    header = [
        f"Ev. recall pub{mark('evidence')}",
        f"aud{mark('audit')}",
        f"Ans. cov. pub{mark('coverage')}",
        "aud",
        f"All ev.{mark('evidence')}",
        f"Ctx tok{mark('tokens')}",
    ]
    body = [
        [
            *identity_cells(report, row, identity),
            fmt_cell(row.evidence_recall),
            audited_mean(row, "evidence_recall"),
            fmt_cell(row.answer_coverage["overall"]),
            audited_mean(row, "answer_coverage"),
            fmt_number(row.all_evidence_share),
            fmt_number(row.context_tokens, 0),
        ]
        for row in rows
    ]
    questions = max((len(row.run.records) for row in rows), default=0)
    caption = [
        "pub: LoCoMo's published key, mean [95% CI]; aud: the audited key's mean over the "
        f"questions it scores; the published key's ceiling per category{mark('ceiling')}."
    ]
    return section(
        f"Overall: retrieval ({questions} questions, no LLM)",
        identity,
        header,
        body,
        caption=caption,
    )


def audited_mean(row: Row, name: str) -> str:
    """A row's mean of ``name`` under the audited key, or a dash without an audit."""
    return DASH if row.audited is None else fmt_number(row.audited[name].audited)


def qa_overall(job: MainJob) -> Table:
    """The QA pipeline check: F1, BLEU-1, the judge columns whose judge discriminates on its
    probes (a column every row would show as a dash is left out), and the p-value."""
    report = job.qa
    rows = report.answered
    identity = identity_columns(report, rows)
    judges = [
        name for name in judge_scores(report) if any(name not in r.hidden_judges for r in rows)
    ]
    header = answer_header(report, judges)
    body = [
        [*identity_cells(report, row, identity), *answer_cells(report, row, judges)] for row in rows
    ]
    questions = max((len(row.run.records) for row in rows), default=0)
    reader = ", ".join(sorted({row.key.backbone for row in rows}))
    return section(
        f"QA pipeline check ({questions} questions, reader {reader})",
        identity,
        header,
        body,
        caption=["A check that answering and scoring run end to end, not a ranking of methods."],
    )


def asked_cell(row: Row) -> str:
    """``asked / all``: the LLM requests the run sent to the model, of every request it made
    (answers, verdicts, probes; the rest came from the recorded replies or the response cache),
    from its call ledger's summary in ``metrics.json``."""
    total = row.run.metrics.get("accounting", {}).get("total")
    if not total:
        return DASH
    return f"{total['calls'] - total['cache_hits']} / {total['calls']}"


def qa_costs(job: MainJob) -> Table:
    """The QA grid's LLM calls and tokens per stage, the requests asked of the model, the run."""
    report = job.qa
    rows = report.answered
    identity = identity_columns(report, rows)
    header = [
        f"Answer calls{report.notes.mark('costs')}",
        "Judge calls",
        "Answer tokens",
        "Judge tokens",
        f"Asked{report.notes.mark('asked')}",
        "Run",
    ]
    body = [
        [
            *identity_cells(report, row, identity),
            *(str(row.costs[stage]["calls"]) for stage in ("answering", "judging")),
            *(
                fmt_tokens(
                    row.costs[stage]["prompt_tokens"] + row.costs[stage]["completion_tokens"]
                )
                for stage in ("answering", "judging")
            ),
            asked_cell(row),
            run_cell(row),
        ]
        for row in rows
    ]
    return section("Costs: QA pipeline check", identity, header, body)


def retrieval_costs(job: MainJob) -> Table:
    """What building and searching each retrieval row's memories took (the main job's time is
    mostly this): construction and wall seconds, texts embedded and parsed, the run."""
    report = job.retrieval
    rows = report.rows
    identity = identity_columns(report, rows)
    header = [
        f"Construction (s){report.notes.mark('costs')}",
        "Wall (s)",
        "Texts embedded / asked",
        "Texts parsed / asked",
        "Run",
    ]
    body = [
        [
            *identity_cells(report, row, identity),
            starred(fmt_number(row.invocations.get("construction_s"), 0), row),
            starred(fmt_wall(row.invocations), row),
            starred(fmt_work(row.invocations.get("embedding"), "encoded"), row),
            starred(fmt_work(row.invocations.get("parsing"), "parsed"), row),
            run_cell(row),
        ]
        for row in rows
    ]
    return section("Costs: retrieval columns", identity, header, body)


def sections(job: MainJob) -> list[Table]:
    """Retrieval first, then the QA pipeline check, then the costs of each."""
    return [
        retrieval_overall(job),
        qa_overall(job),
        retrieval_costs(job),
        qa_costs(job),
    ]


def setting_lines(job: MainJob) -> list[str]:
    """Each selection's setting line, named."""
    return [
        "Setting of the retrieval columns: " + job.retrieval.setting.removeprefix("Setting: "),
        "",
        "Setting of the QA pipeline check: " + job.qa.setting.removeprefix("Setting: "),
    ]


def render_markdown(job: MainJob) -> str:
    """Title, the two setting lines, the tables, the notes."""
    lines = [f"# {job.title}", "", *setting_lines(job)]
    for table in sections(job):
        lines += ["", *table.markdown_lines(marks=False)]
    lines += ["", *job.notes.markdown_lines()]
    return "\n".join(lines) + "\n"


def render_tex(job: MainJob) -> str:
    """Booktabs tabulars, one float per table; settings and notes as comments."""
    header = [line for line in setting_lines(job) if line] + job.notes.lines()
    lines = [
        f"% {job.title}",
        *(f"% {line}" for line in header),
        r"% needs \usepackage{booktabs,graphicx}",
    ]
    for table in sections(job):
        lines += ["", *table.latex_lines(caption=f"{job.title}: {table.title}")]
    return "\n".join(lines) + "\n"


def write_csv(job: MainJob, path: Path) -> None:
    """Every row of both selections, every number in its own column (``subset`` tells them
    apart); settings and notes as leading ``#`` lines."""
    records = [
        {"subset": report.rows[0].run.config["subset"]["name"], **csv_record(row, report)}
        for report in (job.retrieval, job.qa)
        for row in report.rows
        if report.rows
    ]
    fields = list(dict.fromkeys(key for record in records for key in record))
    caption = [line for line in setting_lines(job) if line] + job.notes.lines()
    table = Table.from_records(records, fields, title=job.title, caption=caption)
    path.write_text(table.to_csv(), encoding="utf-8", newline="")


def write_main_job(job: MainJob, out: Path) -> list[Path]:
    """``out`` + ``.md``, ``.csv``, ``.tex``, ``.png`` (the figure: the retrieval rows' evidence
    recall, what the table leads with); returns the paths written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.parent / f"{out.name}{suffix}" for suffix in (".md", ".csv", ".tex", ".png")]
    paths[0].write_text(render_markdown(job), encoding="utf-8")
    write_csv(job, paths[1])
    paths[2].write_text(render_tex(job), encoding="utf-8")
    write_plot(job.retrieval, paths[3])
    return paths
