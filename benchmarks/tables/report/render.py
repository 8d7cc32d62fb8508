"""Writing a report: its :class:`~benchmarks.render.Document` (the setting line under the title,
the tables, the numbered notes) as markdown and booktabs tex, a csv with every number of a row in
its own column, and the four files (the plot too) under one name, as Table 1's main job writes
its own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.metrics.aggregate import Cell
from benchmarks.render import Document
from benchmarks.runs.rows import AUDITED_SCORES, STAGES, Comparison, Row
from benchmarks.tables.report.build import Report
from benchmarks.tables.report.plot import write_plot
from benchmarks.tables.report.tables import sections


def document(report: Report) -> Document:
    """The setting line under the title, a readable table per section, then the notes."""
    return Document(report.title, [report.setting], sections(report), report.notes)


def cell_columns(prefix: str, found: Cell | None) -> dict[str, Any]:
    """``prefix_mean``, ``_low``, ``_high``, ``_n`` rounded to 4 decimals (blank if absent)."""
    if found is None:
        return {f"{prefix}_{part}": "" for part in ("mean", "low", "high", "n")}
    return {
        f"{prefix}_mean": round(found.mean, 4),
        f"{prefix}_low": round(found.low, 4),
        f"{prefix}_high": round(found.high, 4),
        f"{prefix}_n": found.n,
    }


def rounded(value: float | None, digits: int = 4) -> Any:
    """Round for csv; blank when absent."""
    return "" if value is None else round(value, digits)


def comparison_columns(prefix: str, found: Comparison | None) -> dict[str, Any]:
    """``prefix`` + ``p_value``, ``_baseline``, ``_questions`` (blank without a comparison)."""
    return {
        f"{prefix}p_value": "" if found is None else round(found.p_value, 4),
        f"{prefix}p_value_baseline": "" if found is None else found.baseline,
        f"{prefix}p_value_questions": "" if found is None else found.questions,
    }


def longmemeval_columns(row: Row) -> dict[str, Any]:
    """Table 2's numbers the per-category columns lack: task-averaged and abstention accuracy, the
    judge p-value, the ranking metrics."""
    assert row.longmemeval is not None  # built for every row of a LongMemEval report
    record = {
        "task_averaged_judge_acc": rounded(row.longmemeval.task_averaged),
        **cell_columns("abstention_judge_acc", row.longmemeval.abstention),
        **comparison_columns("judge_acc_", row.comparisons.get("judge_acc")),
    }
    for level, cells in row.longmemeval.retrieval.items():
        for name, found in cells.items():
            record |= cell_columns(f"{level}_{name}", found)
    return record


def csv_record(row: Row, report: Report) -> dict[str, Any]:
    """One csv line: every number of a row in its own column."""
    record: dict[str, Any] = {
        "method": row.key.method,
        "backbone": row.key.backbone,
        "extraction": row.key.extraction,
        "retrieval_only": row.key.retrieval_only,
        "baseline": row.key.baseline,
        "run": row.run.directory.name,
        "questions": len(row.run.records),
        "failures": row.failed,
        "invalid": row.invalid,
    }
    for scope in ("overall", "all_evidence", *report.categories):
        for name in report.scores:
            record |= cell_columns(f"{scope}_{name}", row.scores[scope][name])
    record |= comparison_columns("", row.comparisons.get(report.metric))
    if report.dataset.longmemeval_scores:
        record |= longmemeval_columns(row)
    record |= {
        **cell_columns("evidence_recall", row.evidence_recall),
        "evidence_all_share": rounded(row.all_evidence_share),
        "context_tokens_mean": rounded(row.context_tokens, 1),
        "construction_memories_loaded": row.memories_loaded,
        "construction_s": row.invocations.get("construction_s"),
        "texts_embedded": row.invocations.get("embedding", {}).get("encoded"),
        "texts_embedding_asked": row.invocations.get("embedding", {}).get("requested"),
        "texts_parsed": row.invocations.get("parsing", {}).get("parsed"),
        "texts_parsing_asked": row.invocations.get("parsing", {}).get("requested"),
        "wall_s": row.invocations.get("wall_s"),
        "workers": row.invocations.get("workers"),
        "peak_rss_mb": row.invocations.get("peak_rss_mb"),
    }
    for stage in STAGES:
        record |= {f"{stage}_{key}": value for key, value in row.costs[stage].items()}
    record["answer_latency_s_mean"] = rounded(row.answer_latency_s)
    record["retrieve_latency_s_mean"] = rounded(row.retrieve_latency_s)
    # Appended later than the columns above (so older readers of the csv keep their places):
    # answer coverage overall and per category, the judge columns a table shows as dashes,
    # and LoCoMo's scores under both keys.
    record |= cell_columns("answer_coverage", row.answer_coverage["overall"])
    for category in report.categories:
        record |= cell_columns(f"{category}_answer_coverage", row.answer_coverage.get(category))
    record["judge_scores_not_discriminating"] = " ".join(sorted(row.hidden_judges))
    for phase, found in (("answer", row.answer_latency), ("retrieve", row.retrieve_latency)):
        record |= {
            f"{phase}_latency_s_{key}": found.get(key, "") for key in ("p50", "p95", "p99", "max")
        }
    if report.audit is not None:
        record |= audited_columns(row)
    return record


def audited_columns(row: Row) -> dict[str, Any]:
    """Each score under LoCoMo's audited key, the published key's mean over the same questions,
    and their count (blank where the audit's files were missing)."""
    record: dict[str, Any] = {}
    for name in AUDITED_SCORES:
        found = None if row.audited is None else row.audited[name]
        record |= {
            f"{name}_audited": "" if found is None else rounded(found.audited),
            f"{name}_published_same_questions": "" if found is None else rounded(found.published),
            f"{name}_audited_questions": "" if found is None else found.questions,
        }
    return record


def write_document(
    document: Document, records: Sequence[dict[str, Any]], plotted: Report, out: Path
) -> list[Path]:
    """``out`` + ``.md``, ``.csv`` (``records``, one per row, the setting and notes as leading ``#``
    lines), ``.tex``, ``.png`` (``plotted``'s figure); returns the paths written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.parent / f"{out.name}{suffix}" for suffix in (".md", ".csv", ".tex", ".png")]
    paths[0].write_text(document.to_markdown(), encoding="utf-8")
    paths[1].write_text(document.records_csv(records), encoding="utf-8", newline="")
    paths[2].write_text(document.to_latex(), encoding="utf-8")
    write_plot(plotted, paths[3])
    return paths


def write_report(report: Report, out: Path) -> list[Path]:
    """``out`` + ``.md``, ``.csv``, ``.tex``, ``.png``; returns the paths written."""
    records = [csv_record(row, report) for row in report.rows]
    return write_document(document(report), records, report, out)
