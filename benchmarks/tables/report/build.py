"""Select, check and recompute: :func:`build_report` turns a runs folder into a :class:`Report`,
the header lines and rows every writer reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.data.specs import DatasetSpec, spec_of
from benchmarks.metrics.longmemeval_official import Corpus
from benchmarks.metrics.ranking import load_corpora
from benchmarks.metrics.stats import INTERVAL_UNITS
from benchmarks.tables.judge_calibration import calibration_lines
from benchmarks.tables.report.conditions import (
    check_one_run_per_row,
    shared_conditions,
    with_variants,
)
from benchmarks.tables.report.header import (
    code_line,
    context_order_line,
    header_lines,
    invalid_rows_line,
    no_context_line,
    stale_rows_line,
    statistics_line,
    unranked_rows_line,
)
from benchmarks.tables.report.rows import (
    Row,
    add_p_values,
    build_row,
    category_order,
    mark_stale,
    row_order,
)
from benchmarks.tables.report.runs import (
    ReportError,
    Run,
    load_runs,
    run_configs,
    unfinished_runs_line,
)
from benchmarks.tables.summary import score_names

PRIMARY_METRICS = ("f1_set", "f1_locomo")
#: A run with a larger share of failed questions (answers or verdicts) is marked INVALID.
MAX_FAILURE_SHARE = 0.02


@dataclass
class Report:
    """Everything the writers need: header lines, column order and rows."""

    title: str
    header: list[str]
    metric: str
    categories: list[str]
    rows: list[Row]
    #: The dataset's traits: LongMemEval's own scores, the default title and output path.
    dataset: DatasetSpec
    #: Every score name the runs carry: the F1s, BLEU-1, ``judge_acc`` and the other judge
    #: protocols' ``judge_acc_<protocol>`` (:func:`benchmarks.tables.summary.score_names`).
    scores: tuple[str, ...]

    @property
    def answered(self) -> list[Row]:
        """Rows of runs that answered (and maybe judged) the questions."""
        return [row for row in self.rows if not row.key.retrieval_only]

    @property
    def retrieval_only(self) -> list[Row]:
        """Rows of ``answer=none`` runs: retrieval and cost columns only."""
        return [row for row in self.rows if row.key.retrieval_only]


def longmemeval_corpora(runs: Sequence[Run], shared: dict[str, Any]) -> dict[str, Corpus]:
    """The official retrieval corpora of every question the runs logged, read from the dataset
    (``MEMBENCH_DATA``): the stored rankings are scored against them."""
    try:
        return load_corpora(
            shared.get("dataset", {}).get("variant") or "s",
            {record["question_id"] for run in runs for record in run.records},
        )
    except (DatasetError, DataMissingError) as error:
        raise ReportError(f"cannot score the stored rankings: {error}") from error


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
) -> Report:
    """Select, check and recompute: the whole table, ready to write; its intervals and p-values
    resample ``interval_unit`` (conversations, or questions)."""
    if metric not in PRIMARY_METRICS:
        raise ReportError(f"--metric must be one of {list(PRIMARY_METRICS)}, got {metric!r}")
    if interval_unit not in INTERVAL_UNITS:
        raise ReportError(f"interval unit must be one of {list(INTERVAL_UNITS)}")
    # One read of the run configs serves both the table and the note on what it leaves out.
    configs = run_configs(runs_dir)
    runs = with_variants(load_runs(runs_dir, dataset, subset, where, configs))
    shared = shared_conditions(runs)
    check_one_run_per_row(runs)
    categories = category_order(runs)
    spec = spec_of(shared)
    names = score_names(record for run in runs for record in run.records)
    corpora = longmemeval_corpora(runs, shared) if spec.longmemeval_scores else None
    rows = sorted(
        (
            build_row(run, categories, corpora, max_failure_share, interval_unit, names)
            for run in runs
        ),
        key=row_order,
    )
    for tested in (metric, "judge_acc") if spec.longmemeval_scores else (metric,):
        add_p_values(rows, tested, interval_unit)
    mark_stale(rows)
    notes = [
        code_line(runs),
        *calibration_lines(runs, names),
        unfinished_runs_line(configs, dataset, subset, where),
        invalid_rows_line(rows, max_failure_share),
        no_context_line(rows),
        unranked_rows_line(rows),
        stale_rows_line(rows),
    ]
    return Report(
        title or spec.table,
        header_lines(
            shared,
            metric,
            runs_dir,
            statistics_line(shared, metric, rows, interval_unit),
            context_order_line(rows),
        )
        + [note for note in notes if note],
        metric,
        categories,
        rows,
        spec,
        names,
    )
