"""Select, check and recompute: :func:`build_report` turns a runs folder into a :class:`Report`,
the setting line, notes and rows every writer reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data.locomo_audit import AUDIT_SOURCE, AUDITORS_CEILING
from benchmarks.data.paths import shown_path
from benchmarks.data.specs import DatasetSpec
from benchmarks.metrics.agreement import judge_repeats, protocol_agreement
from benchmarks.metrics.stats import INTERVAL_UNITS
from benchmarks.render import Footnotes
from benchmarks.runs.folders import ReportError
from benchmarks.runs.judges import repeat_counts, repeat_temperature
from benchmarks.runs.rows import Row
from benchmarks.runs.selection import MAX_FAILURE_SHARE, Audit, table_rows
from benchmarks.tables.notes import note
from benchmarks.tables.report.header import (
    context_order_line,
    evidence_note,
    f1_note,
    invalid_rows_line,
    judge_note,
    labels_note,
    no_context_line,
    p_value_note,
    partial_rows_line,
    restamped_rows_line,
    setting_line,
    shallow_rows_line,
    stale_rows_line,
    statistics_note,
    tokens_note,
    unfinished_runs_line,
)

PRIMARY_METRICS = ("f1_set", "f1_locomo")


@dataclass
class Report:
    """Everything the writers need: the setting line, the numbered notes, column order and
    rows."""

    title: str
    setting: str
    notes: Footnotes
    metric: str
    categories: list[str]
    rows: list[Row]
    #: The dataset's traits: LongMemEval's own scores, the default title and output path.
    dataset: DatasetSpec
    #: Every score name the runs carry (:func:`benchmarks.metrics.aggregate.score_names`).
    scores: tuple[str, ...]
    #: LoCoMo's audited key (None for a dataset without an audit).
    audit: Audit | None = None

    @property
    def answered(self) -> list[Row]:
        """Rows of runs that answered (and maybe judged) the questions."""
        return [row for row in self.rows if not row.key.retrieval_only]

    @property
    def retrieval_only(self) -> list[Row]:
        """Rows of ``answer=none`` runs: retrieval and cost columns only."""
        return [row for row in self.rows if row.key.retrieval_only]


def audit_notes(
    audit: Audit, rows: Sequence[Row], categories: Sequence[str]
) -> list[tuple[str, str]]:
    """The notes of the published-vs-audited table: the key's rules, and the published key's
    ceiling on the table's questions per category (in ``categories``' order)."""
    if audit.errata is None:
        return [("audit", note("report.audit_missing", missing=audit.missing))]
    rules = note(
        "report.audit", source=AUDIT_SOURCE, ambiguous=len(audit.ambiguous([r.run for r in rows]))
    )
    total = [sum(counts) for counts in zip(*audit.ceiling.values(), strict=True)] or [0, 0]
    shares = [
        f"{category.replace('_', '-')} {stands / questions:.2%} ({stands}/{questions})"
        for category in categories
        if category in audit.ceiling
        for stands, questions in [audit.ceiling[category]]
    ]
    overall = f"{total[0] / total[1]:.2%} ({total[0]}/{total[1]})" if total[1] else "—"
    ceiling = note(
        "report.ceiling", shares=", ".join(shares), overall=overall, auditors=AUDITORS_CEILING
    )
    return [("audit", rules), ("ceiling", ceiling)]


def build_report(
    runs_dir: Path,
    *,
    dataset: str = "locomo",
    subset: str = "smoke",
    metric: str = "f1_set",
    title: str | None = None,
    where: dict[str, Any] | None = None,
    max_failure_share: float = MAX_FAILURE_SHARE,
    interval_unit: str = "conversation",
    partial: bool = False,
) -> Report:
    """Select, check and recompute: the whole table, ready to write; ``partial`` shows unfinished
    runs as far as they got (a backlog's table)."""
    if metric not in PRIMARY_METRICS:
        raise ReportError(f"--metric must be one of {list(PRIMARY_METRICS)}, got {metric!r}")
    if interval_unit not in INTERVAL_UNITS:
        raise ReportError(f"interval unit must be one of {list(INTERVAL_UNITS)}")
    found = table_rows(
        runs_dir,
        dataset=dataset,
        subset=subset,
        where=where,
        metric=metric,
        max_failure_share=max_failure_share,
        interval_unit=interval_unit,
        partial=partial,
    )
    runs, rows, shared, spec, names = found.runs, found.rows, found.shared, found.spec, found.names
    answered = any(not row.key.retrieval_only for row in rows)
    notes: list[tuple[str, str | None]] = [
        ("statistics", statistics_note(rows, interval_unit, spec.memory_name)),
        ("order", context_order_line(rows)),
        ("labels", labels_note(rows)),
        ("evidence", evidence_note(spec, answered)),
        ("coverage", note("report.coverage")),
        ("tokens", tokens_note(shared, answered)),
    ]
    if answered:
        notes += [
            ("f1", f1_note(shared, metric)),
            ("bleu", note("report.bleu")),
            ("judge", judge_note(runs, names, rows)),
            ("p", p_value_note(shared, metric, rows)),
            ("judge_repeats", judge_repeats_note(rows)),
            ("protocol_agreement", protocol_agreement_note(rows)),
        ]
    if spec.longmemeval_scores:
        if answered:
            notes.append(("longmemeval_accuracy", note("report.longmemeval_accuracy")))
        notes.append(("longmemeval_retrieval", note("report.longmemeval_retrieval")))
    if found.audit is not None:
        notes += audit_notes(found.audit, rows, found.categories)
    notes += [
        ("costs", costs_note(rows)),
        (
            "footprint",
            note("report.footprint") if any(r.key.retrieval_only for r in rows) else None,
        ),
        ("source", note("report.source", runs=shown_path(runs_dir))),
        (
            "unfinished",
            None if partial else unfinished_runs_line(found.configs, dataset, subset, where),
        ),
        ("partial", partial_rows_line(rows)),
        ("invalid", invalid_rows_line(rows, max_failure_share)),
        ("no_context", no_context_line(rows)),
        ("shallow", shallow_rows_line(rows)),
        ("stale", stale_rows_line(rows)),
        ("restamped", restamped_rows_line(rows)),
    ]
    variant = shared["dataset"].get("variant")
    default_title = spec.table if answered else f"Retrieval on {spec.display_name(variant)}"
    return Report(
        title or default_title,
        setting_line(shared, runs, rows),
        Footnotes([(key, text) for key, text in notes if text]),
        metric,
        found.categories,
        rows,
        spec,
        names,
        found.audit,
    )


def judge_repeats_note(rows: Sequence[Row]) -> str | None:
    """How the rows' repeated verdicts were asked (their count; the protocol's temperature, or
    the one they were sampled at), or None where no row repeats."""
    repeated = [row for row in rows if judge_repeats(row.run.records)]
    if not repeated:
        return None
    counts = sorted({n for row in repeated for n in repeat_counts(row.run)})
    repeats = " or ".join(str(count) for count in counts)
    temperatures = sorted({str(repeat_temperature(row.run)) for row in repeated})
    if temperatures == ["None"]:
        return note("report.judge_repeats.protocol", repeats=repeats)
    return note(
        "report.judge_repeats.sampled", repeats=repeats, temperature=" or ".join(temperatures)
    )


def protocol_agreement_note(rows: Sequence[Row]) -> str | None:
    """The agreement table's note, where the answered rows were graded under two protocols or
    more."""
    records = [record for row in rows if not row.key.retrieval_only for record in row.run.records]
    return note("report.protocol_agreement") if protocol_agreement(records) else None


def costs_note(rows: Sequence[Row]) -> str:
    """The costs note, for the costs tables the rows make: answered rows' and retrieval-only
    rows'."""
    kinds = {"retrieval" if row.key.retrieval_only else "answered" for row in rows}
    return "; ".join(
        note(f"report.costs.{kind}") for kind in ("answered", "retrieval") if kind in kinds
    )
